"""tf.errors: the exceptions a step raises, one class per canonical code.

Every class is a subclass of OpError and carries TensorFlow's
`error_code` (an int, as `tf.errors.INVALID_ARGUMENT`), `message`,
`node_def` and `op` (None here: the message names the node).
"""

OK = 0
CANCELLED = 1
UNKNOWN = 2
INVALID_ARGUMENT = 3
DEADLINE_EXCEEDED = 4
NOT_FOUND = 5
ALREADY_EXISTS = 6
PERMISSION_DENIED = 7
RESOURCE_EXHAUSTED = 8
FAILED_PRECONDITION = 9
ABORTED = 10
OUT_OF_RANGE = 11
UNIMPLEMENTED = 12
INTERNAL = 13
UNAVAILABLE = 14
DATA_LOSS = 15
UNAUTHENTICATED = 16


class OpError(Exception):
    """A failed step or graph operation (tf.errors.OpError)."""

    def __init__(self, node_def, op, message, error_code=UNKNOWN):
        super().__init__(message)
        self._node_def = node_def
        self._op = op
        self._message = message
        self._error_code = error_code

    @property
    def message(self):
        return self._message

    @property
    def error_code(self):
        return self._error_code

    @property
    def node_def(self):
        return self._node_def

    @property
    def op(self):
        return self._op

    def __str__(self):
        return self._message


def _make(name, code, doc):
    def __init__(self, node_def, op, message, *args):
        OpError.__init__(self, node_def, op, message, code)

    return type(name, (OpError,), {"__init__": __init__, "__doc__": doc})


CancelledError = _make("CancelledError", CANCELLED, "An operation was cancelled.")
UnknownError = _make("UnknownError", UNKNOWN, "An unknown error.")
InvalidArgumentError = _make("InvalidArgumentError", INVALID_ARGUMENT,
                             "An argument was invalid.")
DeadlineExceededError = _make("DeadlineExceededError", DEADLINE_EXCEEDED,
                              "A deadline passed before the operation ended.")
NotFoundError = _make("NotFoundError", NOT_FOUND, "Something was not found.")
AlreadyExistsError = _make("AlreadyExistsError", ALREADY_EXISTS,
                           "Something already exists.")
PermissionDeniedError = _make("PermissionDeniedError", PERMISSION_DENIED,
                              "The caller may not do this.")
ResourceExhaustedError = _make("ResourceExhaustedError", RESOURCE_EXHAUSTED,
                               "A resource (memory, a quota) ran out.")
FailedPreconditionError = _make("FailedPreconditionError", FAILED_PRECONDITION,
                                "The system is not in a state for this "
                                "(an uninitialized variable).")
AbortedError = _make("AbortedError", ABORTED,
                     "The operation was aborted (a closed session).")
OutOfRangeError = _make("OutOfRangeError", OUT_OF_RANGE,
                        "Past the valid range (a closed, empty queue).")
UnimplementedError = _make("UnimplementedError", UNIMPLEMENTED,
                           "Not implemented.")
InternalError = _make("InternalError", INTERNAL, "An internal error.")
UnavailableError = _make("UnavailableError", UNAVAILABLE,
                         "A task or the master cannot be reached.")
DataLossError = _make("DataLossError", DATA_LOSS,
                      "Data was lost or corrupted.")
UnauthenticatedError = _make("UnauthenticatedError", UNAUTHENTICATED,
                             "No valid credentials.")

_BY_CODE = {
    CANCELLED: CancelledError,
    UNKNOWN: UnknownError,
    INVALID_ARGUMENT: InvalidArgumentError,
    DEADLINE_EXCEEDED: DeadlineExceededError,
    NOT_FOUND: NotFoundError,
    ALREADY_EXISTS: AlreadyExistsError,
    PERMISSION_DENIED: PermissionDeniedError,
    RESOURCE_EXHAUSTED: ResourceExhaustedError,
    FAILED_PRECONDITION: FailedPreconditionError,
    ABORTED: AbortedError,
    OUT_OF_RANGE: OutOfRangeError,
    UNIMPLEMENTED: UnimplementedError,
    INTERNAL: InternalError,
    UNAVAILABLE: UnavailableError,
    DATA_LOSS: DataLossError,
    UNAUTHENTICATED: UnauthenticatedError,
}


def exception_type_from_error_code(error_code):
    """The OpError subclass for a canonical code (tf.errors' function)."""
    return _BY_CODE.get(error_code, UnknownError)


def error_code_from_exception_type(cls):
    for code, c in _BY_CODE.items():
        if c is cls:
            return code
    return UNKNOWN

#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace actorflow {

/// TensorFlow's canonical status codes (tensorflow/core/protobuf/error_codes).
enum class error_code : int {
  ok = 0,
  cancelled = 1,
  unknown = 2,
  invalid_argument = 3,
  deadline_exceeded = 4,
  not_found = 5,
  already_exists = 6,
  permission_denied = 7,
  resource_exhausted = 8,
  failed_precondition = 9,
  aborted = 10,
  out_of_range = 11,
  unimplemented = 12,
  internal = 13,
  unavailable = 14,
  data_loss = 15,
};

/// TensorFlow's name of a code, e.g. "InvalidArgument".
std::string_view to_string(error_code code);

/// The outcome of an operation: a code and a message naming what failed.
class status {
public:
  status() = default;
  status(error_code code, std::string message)
    : code_(code), message_(std::move(message)) {
    // nop
  }
  static status ok_status() {
    return {};
  }
  bool ok() const noexcept {
    return code_ == error_code::ok;
  }
  error_code code() const noexcept {
    return code_;
  }
  const std::string& message() const noexcept {
    return message_;
  }
  /// "InvalidArgument: <message>", or "OK".
  std::string to_string() const;

private:
  error_code code_ = error_code::ok;
  std::string message_;
};

/// The exception the client API throws for a failed status; mirrors
/// TensorFlow's `tf.errors.OpError` and its subclasses.
class op_error : public std::runtime_error {
public:
  explicit op_error(status st)
    : std::runtime_error(st.to_string()), status_(std::move(st)) {
    // nop
  }
  op_error(error_code code, std::string message)
    : op_error(status{code, std::move(message)}) {
    // nop
  }
  error_code code() const noexcept {
    return status_.code();
  }
  const status& get_status() const noexcept {
    return status_;
  }

private:
  status status_;
};

/// Throws `op_error` unless `st` is OK.
inline void throw_if_error(const status& st) {
  if (!st.ok())
    throw op_error(st);
}

inline status invalid_argument(std::string msg) {
  return {error_code::invalid_argument, std::move(msg)};
}
inline status not_found(std::string msg) {
  return {error_code::not_found, std::move(msg)};
}
inline status failed_precondition(std::string msg) {
  return {error_code::failed_precondition, std::move(msg)};
}
inline status internal_error(std::string msg) {
  return {error_code::internal, std::move(msg)};
}
inline status unimplemented(std::string msg) {
  return {error_code::unimplemented, std::move(msg)};
}

} // namespace actorflow

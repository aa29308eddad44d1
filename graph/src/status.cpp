#include "actorflow/graph/status.hpp"

namespace actorflow {

std::string_view to_string(error_code code) {
  switch (code) {
    case error_code::ok:
      return "OK";
    case error_code::cancelled:
      return "Cancelled";
    case error_code::unknown:
      return "Unknown";
    case error_code::invalid_argument:
      return "InvalidArgument";
    case error_code::deadline_exceeded:
      return "DeadlineExceeded";
    case error_code::not_found:
      return "NotFound";
    case error_code::already_exists:
      return "AlreadyExists";
    case error_code::permission_denied:
      return "PermissionDenied";
    case error_code::resource_exhausted:
      return "ResourceExhausted";
    case error_code::failed_precondition:
      return "FailedPrecondition";
    case error_code::aborted:
      return "Aborted";
    case error_code::out_of_range:
      return "OutOfRange";
    case error_code::unimplemented:
      return "Unimplemented";
    case error_code::internal:
      return "Internal";
    case error_code::unavailable:
      return "Unavailable";
    case error_code::data_loss:
      return "DataLoss";
  }
  return "Unknown";
}

std::string status::to_string() const {
  if (ok())
    return "OK";
  std::string result{actorflow::to_string(code_)};
  result += ": ";
  result += message_;
  return result;
}

} // namespace actorflow

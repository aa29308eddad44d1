#pragma once

// The one exit-status convention of every actorflow program
// (actorflow-node, actorflow-train, actorflow-console, actorflow-bench and
// the seed examples), and the main() that applies it:
//
//   0         success; a server stopped as asked (SIGINT, SIGTERM, its
//             --parent-pid gone)
//   1         a failure at run time: an op_error with any code but
//             InvalidArgument (an address in use, a lost task, a deadline),
//             or any other exception (data missing or unreadable)
//   2         a bad command line or configuration: usage_error, or an
//             op_error with TensorFlow's InvalidArgument (the caller's
//             input is wrong: a malformed cluster, an address that does not
//             parse, a TLS file that does not fit)
//   128 + N   stopped by signal N where a program says so
//             (actorflow-train --local)

#include <functional>
#include <stdexcept>
#include <string>

#include "actorflow/graph/status.hpp"

namespace actorflow::support {

/// A bad command line or configuration (exit status 2, exit_usage). Its
/// message names the flag, file or variable at fault.
struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline constexpr int exit_ok = 0;
inline constexpr int exit_failure = 1;
inline constexpr int exit_usage = 2;

/// The exit status for TensorFlow's canonical `code`: exit_ok for OK,
/// exit_usage for InvalidArgument, exit_failure for every other code.
int exit_status_of(error_code code) noexcept;

/// Sets up `program`'s log (log.hpp), runs `body` and ends the process with
/// the status it returns, or, if it throws, logs the error
/// ("PROGRAM: error: MESSAGE", with " (see --help)" for a usage_error) and
/// ends with the status the convention above gives. Flushes stdout and
/// stderr, then leaves with std::_Exit: CAF's threads may still be taking
/// the last messages of peers, and a process that ends here needs no
/// static destructors (whatever `body` owns is destroyed before). Never
/// returns.
[[noreturn]] void guarded_main(const std::string& program,
                               const std::function<int()>& body);

} // namespace actorflow::support

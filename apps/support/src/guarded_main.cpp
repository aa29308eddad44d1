#include "actorflow/support/guarded_main.hpp"

#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "actorflow/support/log.hpp"

namespace actorflow::support {

int exit_status_of(error_code code) noexcept {
  switch (code) {
    case error_code::ok:
      return exit_ok;
    case error_code::invalid_argument:
      return exit_usage;
    default:
      return exit_failure;
  }
}

void guarded_main(const std::string& program,
                  const std::function<int()>& body) {
  log::init(program);
  int status = exit_failure;
  try {
    status = body();
  } catch (const usage_error& e) {
    log::error(std::string{e.what()} + " (see --help)");
    status = exit_usage;
  } catch (const op_error& e) {
    log::error(e.what());
    status = exit_status_of(e.code());
  } catch (const std::exception& e) {
    log::error(e.what());
    status = exit_failure;
  } catch (...) {
    log::error("stopped by an exception that is not a std::exception");
    status = exit_failure;
  }
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  std::_Exit(status);
}

} // namespace actorflow::support

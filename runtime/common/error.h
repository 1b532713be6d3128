// Errors inside the runtime are exceptions carrying a vegas_status; the api/
// layer catches every exception at the ABI boundary and turns it into a status
// plus the thread-local message (vegas_last_error).
#pragma once

#include <stdexcept>
#include <string>

#include "vegas.h"

namespace vegas {

class Error : public std::runtime_error {
 public:
  Error(vegas_status status, const std::string &message)
      : std::runtime_error(message), status_(status) {}
  vegas_status status() const noexcept { return status_; }

 private:
  vegas_status status_;
};

[[noreturn]] inline void fail(vegas_status status, const std::string &message) {
  throw Error(status, message);
}

}  // namespace vegas

// Version queries, status names and the thread-local last error.
#include <string>

#include "api/api_guard.h"

namespace vegas::api {

namespace {
thread_local std::string t_last_error;
}

void set_last_error(const std::string &message) { t_last_error = message; }
void clear_last_error() { t_last_error.clear(); }
const char *t_last_error_cstr() { return t_last_error.c_str(); }

}  // namespace vegas::api

extern "C" {

VEGAS_API uint32_t vegas_version_number(void) { return VEGAS_VERSION_NUMBER; }

VEGAS_API const char *vegas_version(void) {
#define VEGAS_STR2(x) #x
#define VEGAS_STR(x) VEGAS_STR2(x)
  return VEGAS_STR(VEGAS_VERSION_MAJOR) "." VEGAS_STR(VEGAS_VERSION_MINOR) "." VEGAS_STR(
      VEGAS_VERSION_PATCH);
#undef VEGAS_STR
#undef VEGAS_STR2
}

VEGAS_API const char *vegas_last_error(void) { return vegas::api::t_last_error_cstr(); }

VEGAS_API const char *vegas_status_name(vegas_status status) {
  switch (status) {
    case VEGAS_OK: return "VEGAS_OK";
    case VEGAS_ERR_INVALID_ARGUMENT: return "VEGAS_ERR_INVALID_ARGUMENT";
    case VEGAS_ERR_STRUCT_SIZE: return "VEGAS_ERR_STRUCT_SIZE";
    case VEGAS_ERR_IO: return "VEGAS_ERR_IO";
    case VEGAS_ERR_FORMAT: return "VEGAS_ERR_FORMAT";
    case VEGAS_ERR_UNSUPPORTED: return "VEGAS_ERR_UNSUPPORTED";
    case VEGAS_ERR_OUT_OF_MEMORY: return "VEGAS_ERR_OUT_OF_MEMORY";
    case VEGAS_ERR_KV_FULL: return "VEGAS_ERR_KV_FULL";
    case VEGAS_ERR_TOKEN_OUT_OF_RANGE: return "VEGAS_ERR_TOKEN_OUT_OF_RANGE";
    case VEGAS_ERR_BUFFER_TOO_SMALL: return "VEGAS_ERR_BUFFER_TOO_SMALL";
    case VEGAS_ERR_CANCELLED: return "VEGAS_ERR_CANCELLED";
    case VEGAS_ERR_BACKEND: return "VEGAS_ERR_BACKEND";
    case VEGAS_ERR_NOT_BUILT: return "VEGAS_ERR_NOT_BUILT";
    case VEGAS_ERR_NOT_FOUND: return "VEGAS_ERR_NOT_FOUND";
    case VEGAS_ERR_WRONG_STATE: return "VEGAS_ERR_WRONG_STATE";
    case VEGAS_ERR_INTERNAL: return "VEGAS_ERR_INTERNAL";
    default: return "VEGAS_ERR_UNKNOWN";
  }
}

}  // extern "C"

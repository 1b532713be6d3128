// An error answered to the client as OpenAI does: an HTTP status and
// {"error": {"message", "type", "param", "code"}}, param naming the field at fault.
#pragma once

#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace vegas_server {

class ApiError : public std::runtime_error {
 public:
  ApiError(int http_status, std::string param, const std::string &message)
      : std::runtime_error(message), http_status_(http_status), param_(std::move(param)) {}

  // 400 for field `param`; the message must name the field.
  static ApiError bad_field(const std::string &param, const std::string &message) {
    return ApiError(400, param, message);
  }

  int http_status() const { return http_status_; }
  const std::string &param() const { return param_; }

  nlohmann::json to_json() const {
    const char *type = http_status_ == 401   ? "authentication_error"
                       : http_status_ < 500  ? "invalid_request_error"
                       : http_status_ == 503 ? "server_overloaded"
                                             : "server_error";
    nlohmann::json e = {{"message", what()}, {"type", type}, {"code", http_status_}};
    e["param"] = param_.empty() ? nlohmann::json(nullptr) : nlohmann::json(param_);
    return {{"error", e}};
  }

 private:
  int http_status_;
  std::string param_;
};

}  // namespace vegas_server

#include "select/policy_base.h"

#include <string>

#include "common/error.h"

namespace vegas {

void PolicyBase::check_call(const SelectInput &in, const int32_t *out, int32_t capacity) const {
  if (in.n < 0 || in.n > shape_.max_candidates)
    fail(VEGAS_ERR_INVALID_ARGUMENT, "selection policy " + name_ + ": n = " + std::to_string(in.n) +
                                         " is outside [0, " +
                                         std::to_string(shape_.max_candidates) + "]");
  if (in.layer < 0 || in.layer >= in.n_layers)
    fail(VEGAS_ERR_INVALID_ARGUMENT, "selection policy " + name_ + ": layer " +
                                         std::to_string(in.layer) + " is outside [0, " +
                                         std::to_string(in.n_layers) + ")");
  if (capacity < in.n)
    fail(VEGAS_ERR_BUFFER_TOO_SMALL, "selection policy " + name_ + ": output capacity " +
                                         std::to_string(capacity) +
                                         " is below n = " + std::to_string(in.n));
  if (out == nullptr && in.n > 0)
    fail(VEGAS_ERR_INVALID_ARGUMENT, "selection policy " + name_ + ": output buffer is NULL");
}

void validate_selection_shape(const SelectionShape &shape) {
  const auto bad = [](const char *field, int32_t value, const std::string &rule) {
    fail(VEGAS_ERR_INVALID_ARGUMENT,
         std::string("selection shape ") + field + " is " + std::to_string(value) + ", " + rule);
  };
  if (shape.max_candidates < 0) bad("max_candidates", shape.max_candidates, "must be >= 0");
  if (shape.max_rows < 1) bad("max_rows", shape.max_rows, "must be >= 1");
  if (shape.n_heads < 1) bad("n_heads", shape.n_heads, "must be >= 1");
  if (shape.n_kv_heads < 1 || shape.n_heads % shape.n_kv_heads != 0)
    bad("n_kv_heads", shape.n_kv_heads, "must be >= 1 and divide n_heads");
  if (shape.head_dim < 1) bad("head_dim", shape.head_dim, "must be >= 1");
}

}  // namespace vegas

// user: a caller's C vtable (vegas_select_policy) given the scores the vegas
// policy would rank (first and last verify rows, options.score_kind) and the
// budget; its answer is checked before anyone uses it.
#include <cstddef>
#include <string>
#include <vector>

#include "common/abi_struct.h"
#include "common/error.h"
#include "select/policy_base.h"
#include "select/score_reduce.h"

namespace vegas {

namespace {

constexpr size_t kSelectEnd =
    offsetof(vegas_select_policy, select) + sizeof(vegas_select_policy::select);
constexpr size_t kResetEnd =
    offsetof(vegas_select_policy, reset) + sizeof(vegas_select_policy::reset);
constexpr size_t kDestroyEnd =
    offsetof(vegas_select_policy, destroy) + sizeof(vegas_select_policy::destroy);

bool is_status(int32_t value) {
  return (value <= VEGAS_ERR_INVALID_ARGUMENT && value >= VEGAS_ERR_WRONG_STATE) ||
         value == VEGAS_ERR_INTERNAL;
}

class UserPolicy final : public PolicyBase {
 public:
  // Takes ownership of vtable.user_data only once constructed (destroy runs in
  // the destructor), so a failed construction leaves it with the caller.
  UserPolicy(const vegas_select_policy &vtable, const SelectionOptions &options,
             const SelectionShape &shape)
      : PolicyBase("user", options, shape),
        vtable_(vtable),
        scores_(static_cast<size_t>(shape.max_candidates)) {}
  ~UserPolicy() override {
    if (vtable_.destroy) vtable_.destroy(vtable_.user_data);
  }
  UserPolicy(const UserPolicy &) = delete;
  UserPolicy &operator=(const UserPolicy &) = delete;

  SelectionNeeds needs() const override {
    SelectionNeeds needs;
    needs.score_rows = ScoreRows::kFirstLast;
    return needs;
  }

  int32_t select(const SelectInput &in, int32_t *out, int32_t capacity) override {
    check_call(in, out, capacity);
    vegas_select_input input{};
    input.struct_size = sizeof(vegas_select_input);
    input.seq_id = in.seq_id;
    input.layer = in.layer;
    input.n_layers = in.n_layers;
    input.n_candidates = in.n;
    input.budget = budget(in.n, in.knobs);
    input.score_kind = static_cast<int32_t>(options_.score_kind);
    input.scores_on_device = 0;
    input.scores = scores_.data();
    input.stream = nullptr;
    if (in.n > 0) {
      check_score_view(in.scores, in.n, 1, name_);
      const int32_t rows[2] = {0, in.scores.n_rows - 1};
      reduce_scores(in.scores, shape_.n_heads, rows, in.scores.n_rows == 1 ? 1 : 2, in.n,
                    options_.score_kind, scores_.data(), in.threads);
    }
    const int32_t count = vtable_.select(&input, out, capacity, vtable_.user_data);
    check_answer(in.n, out, capacity, count);
    return count;
  }

  void reset(int32_t seq_id) override {
    if (vtable_.reset) vtable_.reset(seq_id, vtable_.user_data);
  }

 private:
  void check_answer(int32_t n, const int32_t *out, int32_t capacity, int32_t count) const {
    if (count < 0) {
      if (is_status(count))
        fail(static_cast<vegas_status>(count),
             std::string("user selection policy failed with ") +
                 vegas_status_name(static_cast<vegas_status>(count)));
      fail(VEGAS_ERR_INVALID_ARGUMENT,
           "user selection policy returned " + std::to_string(count) + ", not a vegas_status");
    }
    if (count > capacity || count > n)
      fail(VEGAS_ERR_INVALID_ARGUMENT, "user selection policy returned count " +
                                           std::to_string(count) + " above n_candidates " +
                                           std::to_string(n));
    for (int32_t i = 0; i < count; ++i) {
      if (out[i] < 0 || out[i] >= n)
        fail(VEGAS_ERR_INVALID_ARGUMENT, "user selection policy position " + std::to_string(i) +
                                             " is " + std::to_string(out[i]) + ", outside [0, " +
                                             std::to_string(n) + ")");
      if (i > 0 && out[i] <= out[i - 1])
        fail(VEGAS_ERR_INVALID_ARGUMENT,
             "user selection policy positions are not strictly "
             "ascending at index " +
                 std::to_string(i) + " (" + std::to_string(out[i - 1]) + ", " +
                 std::to_string(out[i]) + ")");
    }
  }

  vegas_select_policy vtable_;
  std::vector<float> scores_;
};

}  // namespace

std::unique_ptr<SelectionPolicy> make_user_policy(const SelectionOptions &options,
                                                  const SelectionShape &shape) {
  const vegas_select_policy *given = options.user;
  if (given == nullptr)
    fail(VEGAS_ERR_INVALID_ARGUMENT, "selection policy user needs a vegas_select_policy vtable");
  if (given->struct_size < kSelectEnd)
    fail(VEGAS_ERR_STRUCT_SIZE,
         "vegas_select_policy.struct_size " + std::to_string(given->struct_size) +
             " does not cover the select callback (needs " + std::to_string(kSelectEnd) + ")");
  abi::require_unknown_tail_zero(given, sizeof(vegas_select_policy), given->struct_size,
                                 "vegas_select_policy");
  // Copy only what the caller's struct_size covers; newer fields keep defaults.
  vegas_select_policy vtable{};
  vtable.struct_size = given->struct_size;
  vtable.user_data = given->user_data;
  vtable.select = given->select;
  if (given->struct_size >= kResetEnd) vtable.reset = given->reset;
  if (given->struct_size >= kDestroyEnd) vtable.destroy = given->destroy;
  if (vtable.select == nullptr)
    fail(VEGAS_ERR_INVALID_ARGUMENT, "vegas_select_policy.select is NULL");
  return std::make_unique<UserPolicy>(vtable, options, shape);
}

}  // namespace vegas

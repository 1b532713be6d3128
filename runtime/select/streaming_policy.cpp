// streaming (StreamingLLM as MagicDec-Stream drafts with it): the first `sink`
// candidates plus the most recent ones, k in all. Needs no scores.
#include "select/policy_base.h"

#include <algorithm>

namespace vegas {

namespace {

class StreamingPolicy final : public PolicyBase {
 public:
  StreamingPolicy(const SelectionOptions &options, const SelectionShape &shape)
      : PolicyBase("streaming", options, shape) {}

  SelectionNeeds needs() const override { return SelectionNeeds{}; }

  bool device_plan(int32_t n, const BudgetKnobs &knobs, DevicePlan *plan) const override {
    const int32_t k = budget(n, knobs);
    plan->head = std::min(options_.sink, k);
    plan->tail = k - plan->head;
    plan->scored = 0;
    return true;
  }

  int32_t select(const SelectInput &in, int32_t *out, int32_t capacity) override {
    check_call(in, out, capacity);
    const int32_t k = budget(in.n, in.knobs);
    // A budget below the sink size keeps only sinks; k <= n keeps the two
    // ranges [0, sinks) and [n - window, n) apart.
    const int32_t sinks = std::min(options_.sink, k);
    const int32_t window = k - sinks;
    int32_t count = 0;
    for (int32_t pos = 0; pos < sinks; ++pos) out[count++] = pos;
    for (int32_t pos = in.n - window; pos < in.n; ++pos) out[count++] = pos;
    return count;
  }
};

}  // namespace

std::unique_ptr<SelectionPolicy> make_streaming_policy(const SelectionOptions &options,
                                                       const SelectionShape &shape) {
  return std::make_unique<StreamingPolicy>(options, shape);
}

}  // namespace vegas

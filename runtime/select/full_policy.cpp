// full: every candidate (vanilla decoding's selection, and the check that
// drafting without sparsity accepts everything under greedy decoding).
#include "select/policy_base.h"

namespace vegas {

namespace {

class FullPolicy final : public PolicyBase {
 public:
  FullPolicy(const SelectionOptions &options, const SelectionShape &shape)
      : PolicyBase("full", options, shape) {}

  SelectionNeeds needs() const override { return SelectionNeeds{}; }

  bool device_plan(int32_t n, const BudgetKnobs &knobs, DevicePlan *plan) const override {
    (void)knobs;  // full keeps everything
    plan->head = n;
    plan->tail = 0;
    plan->scored = 0;
    return true;
  }

  int32_t select(const SelectInput &in, int32_t *out, int32_t capacity) override {
    check_call(in, out, capacity);
    for (int32_t pos = 0; pos < in.n; ++pos) out[pos] = pos;
    return in.n;
  }
};

}  // namespace

std::unique_ptr<SelectionPolicy> make_full_policy(const SelectionOptions &options,
                                                  const SelectionShape &shape) {
  return std::make_unique<FullPolicy>(options, shape);
}

}  // namespace vegas

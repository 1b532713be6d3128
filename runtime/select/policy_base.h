// What the built-in policies share: their name, options and shape, the checks
// every select() call makes, and the budget rule.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "select/select_policy.h"

namespace vegas {

class PolicyBase : public SelectionPolicy {
 public:
  PolicyBase(std::string name, const SelectionOptions &options, const SelectionShape &shape)
      : name_(std::move(name)), options_(options), shape_(shape) {}
  const std::string &name() const override { return name_; }

 protected:
  // Throws INVALID_ARGUMENT for n outside [0, max_candidates], a layer outside
  // [0, n_layers) or a null out; BUFFER_TOO_SMALL for capacity < n.
  void check_call(const SelectInput &in, const int32_t *out, int32_t capacity) const;
  // The budget and window share with a sequence's knobs (BudgetKnobs).
  int32_t budget(int32_t n, const BudgetKnobs &knobs = {}) const {
    return selection_budget(n, knobs.ratio >= 0.0f ? knobs.ratio : options_.ratio,
                            options_.min_tokens);
  }
  float window_share(const BudgetKnobs &knobs) const {
    return knobs.window_share >= 0.0f ? knobs.window_share : options_.window_share;
  }

  std::string name_;
  SelectionOptions options_;
  SelectionShape shape_;
};

// Throws INVALID_ARGUMENT naming the first bad field of the shape.
void validate_selection_shape(const SelectionShape &shape);

// Which verify rows a score-driven policy reduces.
enum class ScoreRowRule {
  kFirstLast,     // vegas: r0 and the last row (one row after prefill)
  kAll,           // vegas-all: every collected row
  kLastAccepted,  // specextend: the row of the last accepted token
};

// The constructors behind make_selection_policy.
std::unique_ptr<SelectionPolicy> make_score_top_k_policy(const std::string &name, ScoreRowRule rule,
                                                         const SelectionOptions &options,
                                                         const SelectionShape &shape);
std::unique_ptr<SelectionPolicy> make_streaming_policy(const SelectionOptions &options,
                                                       const SelectionShape &shape);
std::unique_ptr<SelectionPolicy> make_quest_policy(const SelectionOptions &options,
                                                   const SelectionShape &shape);
std::unique_ptr<SelectionPolicy> make_top_p_policy(const SelectionOptions &options,
                                                   const SelectionShape &shape);
std::unique_ptr<SelectionPolicy> make_full_policy(const SelectionOptions &options,
                                                  const SelectionShape &shape);
std::unique_ptr<SelectionPolicy> make_user_policy(const SelectionOptions &options,
                                                  const SelectionShape &shape);

}  // namespace vegas

// vegas, vegas-all and specextend: reduce verify rows to one score per
// candidate, then keep the budget as a recent window plus the top scores.
#include <algorithm>
#include <string>
#include <vector>

#include "common/error.h"
#include "select/policy_base.h"
#include "select/score_reduce.h"
#include "select/top_k_select.h"

namespace vegas {

namespace {

class ScoreTopKPolicy final : public PolicyBase {
 public:
  ScoreTopKPolicy(const std::string &name, ScoreRowRule rule, const SelectionOptions &options,
                  const SelectionShape &shape)
      : PolicyBase(name, options, shape),
        rule_(rule),
        rows_(static_cast<size_t>(std::max(2, shape.max_rows))),
        scores_(static_cast<size_t>(shape.max_candidates)),
        scratch_(static_cast<size_t>(shape.max_candidates)) {}

  SelectionNeeds needs() const override {
    SelectionNeeds needs;
    needs.score_rows = rule_ == ScoreRowRule::kFirstLast ? ScoreRows::kFirstLast : ScoreRows::kAll;
    return needs;
  }

  bool device_plan(int32_t n, const BudgetKnobs &knobs, DevicePlan *plan) const override {
    const int32_t k = budget(n, knobs);
    plan->head = 0;
    plan->tail = window_count(k, window_share(knobs));
    plan->scored = k - plan->tail;
    plan->weight = options_.score_kind == ScoreKind::kWeight;
    plan->last_accepted = rule_ == ScoreRowRule::kLastAccepted;
    return true;
  }

  int32_t select(const SelectInput &in, int32_t *out, int32_t capacity) override {
    check_call(in, out, capacity);
    if (in.n == 0) return 0;
    const int32_t n_used = pick_rows(in);
    reduce_scores(in.scores, shape_.n_heads, rows_.data(), n_used, in.n, options_.score_kind,
                  scores_.data(), in.threads);
    const int32_t k = budget(in.n, in.knobs);
    return select_window_top_k(scores_.data(), in.n, k, window_count(k, window_share(in.knobs)),
                               scratch_.data(), out);
  }

 private:
  // Fills rows_ with the view rows this policy reduces; returns their count.
  int32_t pick_rows(const SelectInput &in) {
    const ScoreView &view = in.scores;
    check_score_view(view, in.n, 1, name_);
    if (view.n_rows > shape_.max_rows)
      fail(VEGAS_ERR_INVALID_ARGUMENT,
           "selection policy " + name_ + ": " + std::to_string(view.n_rows) +
               " verify rows exceed the shape's max_rows " + std::to_string(shape_.max_rows));
    switch (rule_) {
      case ScoreRowRule::kFirstLast:
        rows_[0] = 0;
        rows_[1] = view.n_rows - 1;
        return view.n_rows == 1 ? 1 : 2;
      case ScoreRowRule::kAll:
        for (int32_t r = 0; r < view.n_rows; ++r) rows_[r] = r;
        return view.n_rows;
      case ScoreRowRule::kLastAccepted:
        if (in.last_accepted_row < 0 || in.last_accepted_row >= view.n_rows)
          fail(VEGAS_ERR_INVALID_ARGUMENT, "selection policy " + name_ + ": last_accepted_row " +
                                               std::to_string(in.last_accepted_row) +
                                               " is outside the " + std::to_string(view.n_rows) +
                                               " verify rows");
        rows_[0] = in.last_accepted_row;
        return 1;
    }
    return 0;
  }

  ScoreRowRule rule_;
  std::vector<int32_t> rows_;
  std::vector<float> scores_;
  std::vector<int32_t> scratch_;
};

}  // namespace

std::unique_ptr<SelectionPolicy> make_score_top_k_policy(const std::string &name, ScoreRowRule rule,
                                                         const SelectionOptions &options,
                                                         const SelectionShape &shape) {
  return std::make_unique<ScoreTopKPolicy>(name, rule, options, shape);
}

}  // namespace vegas

// quest: before every draft step, score each page of keys against the current
// draft query by its q.k upper bound and keep the best pages that fit the budget.
// The speculative loop runs it inside the backends' draft passes
// (query_aware_plan, backend.h: QuestDraft); select() is the same rule on
// given bounds, the reference the backends are tested against.
#include <string>
#include <vector>

#include "common/error.h"
#include "select/policy_base.h"
#include "select/quest_pages.h"

namespace vegas {

namespace {

class QuestPolicy final : public PolicyBase {
 public:
  QuestPolicy(const SelectionOptions &options, const SelectionShape &shape)
      : PolicyBase("quest", options, shape),
        page_scores_(static_cast<size_t>(max_pages())),
        scratch_(static_cast<size_t>(max_pages())) {}

  SelectionNeeds needs() const override {
    SelectionNeeds needs;
    needs.page_bounds = true;
    needs.every_draft_step = true;
    return needs;
  }

  bool query_aware_plan(int32_t n, const BudgetKnobs &knobs, QueryAwarePlan *plan) const override {
    plan->page_size = options_.quest_page_size;
    plan->budget = budget(n, knobs);
    return true;
  }

  int32_t select(const SelectInput &in, int32_t *out, int32_t capacity) override {
    check_call(in, out, capacity);
    if (in.n == 0) return 0;
    const int32_t page_size = options_.quest_page_size;
    const int32_t n_pages = (in.n + page_size - 1) / page_size;
    if (in.query == nullptr)
      fail(VEGAS_ERR_INVALID_ARGUMENT, "selection policy quest needs the draft query");
    if (in.pages.key_min == nullptr || in.pages.key_max == nullptr || in.pages.n_pages < n_pages)
      fail(VEGAS_ERR_INVALID_ARGUMENT, "selection policy quest needs key bounds for " +
                                           std::to_string(n_pages) + " pages, got " +
                                           std::to_string(in.pages.n_pages));
    quest_page_scores(in.query, in.pages, n_pages, shape_.n_heads, shape_.n_kv_heads,
                      shape_.head_dim, page_scores_.data());
    return select_quest_pages(page_scores_.data(), in.n, page_size, budget(in.n, in.knobs),
                              scratch_.data(), out);
  }

 private:
  int32_t max_pages() const {
    return (shape_.max_candidates + options_.quest_page_size - 1) / options_.quest_page_size;
  }

  std::vector<float> page_scores_;
  std::vector<int32_t> scratch_;
};

}  // namespace

std::unique_ptr<SelectionPolicy> make_quest_policy(const SelectionOptions &options,
                                                   const SelectionShape &shape) {
  return std::make_unique<QuestPolicy>(options, shape);
}

}  // namespace vegas

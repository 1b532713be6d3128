// topp (SpecAttn): the smallest set of candidates holding a share p of the
// reduced attention weight of the first and last verify rows. Purely mass
// based: not capped by the ratio budget, floored at min_tokens (capped at n);
// window_share does not apply.
#include <vector>

#include "select/policy_base.h"
#include "select/score_reduce.h"
#include "select/top_p_select.h"

namespace vegas {

namespace {

class TopPPolicy final : public PolicyBase {
 public:
  TopPPolicy(const SelectionOptions &options, const SelectionShape &shape)
      : PolicyBase("topp", options, shape),
        scores_(static_cast<size_t>(shape.max_candidates)),
        scratch_(static_cast<size_t>(shape.max_candidates)) {}

  SelectionNeeds needs() const override {
    SelectionNeeds needs;
    needs.score_rows = ScoreRows::kFirstLast;
    return needs;
  }

  int32_t select(const SelectInput &in, int32_t *out, int32_t capacity) override {
    check_call(in, out, capacity);
    if (in.n == 0) return 0;
    check_score_view(in.scores, in.n, 1, name_);
    const int32_t rows[2] = {0, in.scores.n_rows - 1};
    reduce_scores(in.scores, shape_.n_heads, rows, in.scores.n_rows == 1 ? 1 : 2, in.n,
                  ScoreKind::kWeight, scores_.data(), in.threads);
    return select_top_p(scores_.data(), in.n, options_.p, options_.min_tokens, scratch_.data(),
                        out);
  }

 private:
  std::vector<float> scores_;
  std::vector<int32_t> scratch_;
};

}  // namespace

std::unique_ptr<SelectionPolicy> make_top_p_policy(const SelectionOptions &options,
                                                   const SelectionShape &shape) {
  return std::make_unique<TopPPolicy>(options, shape);
}

}  // namespace vegas

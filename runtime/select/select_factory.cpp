#include <string>

#include "common/error.h"
#include "select/policy_base.h"
#include "select/select_policy.h"

namespace vegas {

std::unique_ptr<SelectionPolicy> make_selection_policy(const std::string &name,
                                                       const SelectionOptions &options,
                                                       const SelectionShape &shape) {
  validate_selection_options(options);
  validate_selection_shape(shape);
  if (name == "vegas")
    return make_score_top_k_policy(name, ScoreRowRule::kFirstLast, options, shape);
  if (name == "vegas-all") return make_score_top_k_policy(name, ScoreRowRule::kAll, options, shape);
  if (name == "specextend")
    return make_score_top_k_policy(name, ScoreRowRule::kLastAccepted, options, shape);
  if (name == "streaming") return make_streaming_policy(options, shape);
  if (name == "quest") return make_quest_policy(options, shape);
  if (name == "topp") {
    if (options.score_kind != ScoreKind::kWeight)
      fail(VEGAS_ERR_INVALID_ARGUMENT,
           "selection policy topp needs score kind weight: a mass of logits means nothing");
    return make_top_p_policy(options, shape);
  }
  if (name == "full") return make_full_policy(options, shape);
  if (name == "user") return make_user_policy(options, shape);
  fail(VEGAS_ERR_UNSUPPORTED,
       "unknown selection policy \"" + name +
           "\" (known: vegas, vegas-all, specextend, streaming, quest, topp, full, user)");
}

}  // namespace vegas

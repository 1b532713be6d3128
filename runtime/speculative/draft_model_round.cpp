// Drafting with a separate draft model (SpeculativeParams::draft_model,
// ModelDrafter): the draft's KV catches up on the tokens it has not seen,
// then γ single-row passes draw the drafts with each sequence's rule: on the
// device as the sparse drafts' chain (begin_chained) where the draft's
// context chains passes (its window too), else on the host
// (draft_pass_by_pass), both run on the draft model's context (whose passes
// draft_row gives the draft's rows). Verification and acceptance are the chain's.
#include <vector>

#include "common/error.h"
#include "speculative/round_state.h"
#include "speculative/speculative_decoder.h"

namespace vegas {

void SpeculativeDecoder::follow_prefill(const std::vector<const Sequence *> &seqs,
                                        const std::vector<SeqRows> &prompt_rows) {
  if (model_drafter_) model_drafter_->follow_prefill(seqs, prompt_rows);
}

void SpeculativeDecoder::draft_by_model(std::vector<RoundWork> &work, int32_t max_gamma,
                                        RoundState &rs) {
  if (!model_drafter_)
    fail(VEGAS_ERR_INTERNAL, "a draft-model session without the draft model's context");
  std::vector<const Sequence *> drafting;
  for (const RoundWork &w : work)
    if (w.gamma > 0) drafting.push_back(w.seq);
  model_drafter_->begin_round(drafting);
  // Passes on the draft's context make its rows (drafts_on_model).
  if (!draft_model_chain(work, max_gamma, rs))
    draft_pass_by_pass(work, max_gamma, model_drafter_->context(), rs);
}

bool SpeculativeDecoder::draft_model_chain(std::vector<RoundWork> &work, int32_t max_gamma,
                                           const RoundState &rs) {
  // The chain's passes draw on the device and the host reads every draft and
  // its candidates once (a window's set is the same for every pass). The
  // verify pass runs on the model's own context, so it is not fed by this
  // chain: it is read before verification.
  BackendContext &draft = model_drafter_->context();
  ChainedDrafts chain;
  if (!rs.by_candidates || !begin_chained(work, max_gamma, draft, &chain)) return false;
  if (finish_chained(chain, draft))
    build_chained_q(chain);
  else
    drop_chained_drafts(chain);  // the passes' KV is caught up next round
  abandon_chain(&chain);
  return true;
}

}  // namespace vegas

// What a speculative round works on, shared by the decoder and the drafters
// (drafter.h): each sequence's speculative state (its selection and tuning),
// its share of a round, and the drafts of a chain of passes on the device.
// Private to the speculative decoder's files.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "sampling/sampling.h"
#include "session/sequence.h"
#include "speculative/auto_tuning.h"
#include "speculative/draft_tree.h"
#include "speculative/tree_accept.h"

namespace vegas {

// A sequence's speculative state between rounds: its selection for the sparse
// passes (host sets, the device's, or a query-aware draft's), the scores it
// is selected from, and its γ, ratio and window share.
struct SpeculativeSeqState {
  int32_t selection_point = 0;     // candidates were [0, selection_point)
  std::vector<int32_t> positions;  // [n_layers][stride]
  std::vector<int32_t> counts;     // [n_layers]
  int32_t stride = 0;
  std::vector<int32_t> capture_rows;
  std::vector<float> score_logits;  // [n_layers][n_rows][n_heads][n_candidates]
  std::vector<float> score_lse;     // [n_layers][n_rows][n_heads]
  ScoreCapture capture;
  SparseAttention sparse;
  DeviceSelection device_select;
  QuestDraft quest;  // query-aware policies: what each draft pass selects from
  bool has_selection = false;
  SequenceTuning tuning;  // its γ, ratio, window share (and their controller)
  bool tuned = false;
  // P@model: the draft model's scores of its newest row, in the draft's
  // shape (select_from_draft), kept to be refilled round after round.
  std::vector<float> draft_logits, draft_lse;
  ScoreCapture draft_capture;
};

// One sequence's share of a round: how many drafts, its rule's candidate
// k, its RNG cursor, the drafts and the distributions they were drawn from.
struct RoundWork {
  const Sequence *seq;  // read only: the session applies the outcome
  SpeculativeSeqState *st;
  int32_t gamma;
  int32_t k;  // candidate_k of the sequence's rule
  // Sequence::rng as the round began; every draw of the round advances
  // this copy (RoundOutcome::rng_counter reports where it ended).
  Rng rng;
  std::vector<int32_t> drafts;
  std::vector<TokenDistribution> q;
  int32_t verified = 0;      // draft rows in its verification (gamma, unless drafts were dropped)
  int32_t chain_index = -1;  // its place in the round's draft chain, -1 when not chained
  bool chain_room = false;   // RoundSeq::chain_room
  // A tree round (trees()): every sequence drafts a tree, the shape's where
  // RoundSeq::tree_room, else a chain; node_q[n] is the distribution node
  // n's children were drawn from, `rows` the backend's view of the tree.
  bool in_tree = false;
  DraftTreeShape shape = {};
  DraftTree tree = DraftTree(0);
  std::vector<TokenDistribution> node_q = {};
  TokenTree rows = {};
  TreeAcceptResult tree_result = {};
  // Verify rows of the sequence: γ + 1, or the tree's nodes.
  int32_t verify_rows() const { return in_tree ? tree.n_nodes() : gamma + 1; }
};

// The drafts of one forward_draft_chain call: the chained sequences, the
// draws [pass][sequence] and their candidates, and pass 0's input tokens.
struct ChainedDrafts {
  std::vector<RoundWork *> seqs;
  std::vector<int32_t> tokens;
  std::vector<LogitCandidates> rows;
  std::vector<int32_t> first_tokens;
};

}  // namespace vegas

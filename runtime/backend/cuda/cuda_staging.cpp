// CudaContext::stage: a forward batch's rows, sequences, page tables,
// sparse records and tree masks as the index fields its kernels read
// (step_fields.h), in one pinned buffer uploaded with the step.
#include <algorithm>
#include <string>
#include <vector>

#include "backend/cuda/cuda_context.h"
#include "backend/cuda/step_fields.h"
#include "backend/forward_batch_check.h"
#include "backend/graph_shapes.h"
#include "cuda_utils.cuh"
#include "prefill_attention.cuh"
#include "quest_select.cuh"
#include "verify_attention.cuh"

namespace vegas::cuda {

namespace {

// A tree sequence's masks cover the nodes up to its last row's, a bit each.
int32_t tree_mask_words(const SeqRows &s) {
  return (s.start_pos - s.tree->base + s.n_tokens + 31) / 32;
}
// Its record: base, words, then a mask per row (stage_tree).
int64_t tree_record_ints(const SeqRows &s) {
  return 2 + int64_t{s.n_tokens} * tree_mask_words(s);
}

// Rows of a long dense sequence with captured rows to stage apart, in front
// of its captured tail (0 = none). A prefill chunk that ends a prompt captures
// its last row (DESIGN §3 step 1); staged whole, the chunk would run on the
// paged kernel, which captures but has no tensor cores (H100, 22m: 2.7 ms a
// layer for a 2048-row chunk). Split, the front goes to prefill_attention and
// the tail of at least two rows to verify_attention, which captures; the tail
// attends to the front's K/V, written by the same layer's qkv pass before any
// attention runs.
int32_t capture_split(const SeqRows &s) {
  if (s.capture == nullptr || s.capture->n_rows == 0 || s.sparse != nullptr || s.quest != nullptr ||
      s.device_sparse_key >= 0 || s.tree != nullptr || s.n_tokens <= kernels::kVerifyMaxRows)
    return 0;
  int32_t first = s.n_tokens;
  for (int32_t k = 0; k < s.capture->n_rows; ++k) first = std::min(first, s.capture->rows[k]);
  const int32_t tail = std::max(2, s.n_tokens - first);
  return tail <= kernels::kVerifyMaxRows ? s.n_tokens - tail : 0;
}

}  // namespace

// Smallest bucket >= n among powers of two, capped at max_rows.
int32_t decode_bucket(int32_t n, int32_t max_rows) {
  return std::min(graph_bucket(n), max_rows);
}

namespace {

static_assert(kGraphVerifyMaxRows < kernels::kPrefillMinRows, "a graph verifies, never prefills");

// Whether verification passes may replay graphs: VEGAS_CUDA_VERIFY_GRAPHS=1
// opts in until a GPU run has shown them exact and faster (written without a
// GPU; tools/device-check.sh runs the CUDA tests with it).
bool verify_graphs_allowed() {
  static const bool allowed = kernels::variant_opted_in("VEGAS_CUDA_VERIFY_GRAPHS");
  return allowed;
}
// ... and with VEGAS_CUDA_CAPTURE_GRAPHS=1 too, those that capture scores
// (a round that selects), opted in apart.
bool capture_graphs_allowed() {
  static const bool allowed = kernels::variant_opted_in("VEGAS_CUDA_CAPTURE_GRAPHS");
  return allowed;
}

}  // namespace

// The staged index fields of one step in meta_host_ (see Field), and where
// the next sequence's entries go.
struct CudaContext::StagingCursor {
  StagingCursor(int32_t *h, int64_t stride, int64_t table_offset)
      : tokens(h + kTokens * stride),
        positions(h + kPositions * stride),
        slots(h + kSlots * stride),
        logit_index(h + kLogitIndex * stride),
        written_page(h + kWrittenPage * stride),
        cap_slot(h + kRowCapSlot * stride),
        page_off(h + kSeqPageOff * stride),
        row_start(h + kSeqRowStart * stride),
        n_rows(h + kSeqRows * stride),
        start_pos(h + kSeqStartPos * stride),
        sparse_off(h + kSeqSparseOff * stride),
        cap_cand(h + kSeqCapCand * stride),
        quest_prefix(h + kSeqQuestPrefix * stride),
        quest_budget(h + kSeqQuestBudget * stride),
        tree_off(h + kSeqTreeOff * stride),
        table(h + table_offset) {}
  // Staged sequence si: its page table at `table_at`, rows [row0, row0 +
  // rows) at positions from `start`, dense, without capture or quest (the
  // caller overrides what differs).
  void dense_sequence(int32_t si, int32_t table_at, int32_t row0, int32_t rows, int32_t start) {
    page_off[si] = table_at;
    row_start[si] = row0;
    n_rows[si] = rows;
    start_pos[si] = start;
    sparse_off[si] = -1;
    quest_prefix[si] = -1;
    quest_budget[si] = 0;
    cap_cand[si] = 0;
    tree_off[si] = -1;
  }
  // Graph padding: inert sequences up to n_seqs (of no rows; in a decode
  // step a row each), then rows of no sequence up to `rows` (a verification
  // pass's), each a logit row. No attention kernel writes their outputs, no
  // cache takes their keys, and the layers' rows are independent: what they
  // compute is never read.
  void pad_to(int32_t n_seqs, int32_t rows, bool row_per_sequence) {
    for (; seq < n_seqs; ++seq) {
      dense_sequence(seq, 0, row_per_sequence ? row : 0, 0, 0);
      if (row_per_sequence) pad_row();
    }
    while (row < rows) pad_row();
  }
  void pad_row() {
    written_page[row] = -1;
    cap_slot[row] = -1;
    tokens[row] = 0;
    positions[row] = 0;
    slots[row] = -1;
    logit_index[logit_row++] = row;
    ++row;
  }

  int32_t *tokens, *positions, *slots, *logit_index, *written_page, *cap_slot;  // per row
  int32_t *page_off, *row_start, *n_rows, *start_pos, *sparse_off, *cap_cand;   // per sequence
  int32_t *quest_prefix, *quest_budget, *tree_off;
  int32_t *table;  // the page tables, then the sparse records
  int32_t seq = 0, row = 0, logit_row = 0, page = 0, extra_at = 0, slot = 0;
  int64_t quest_at = 0;
};

CudaContext::Step CudaContext::stage(const ForwardBatch &batch) {
  const ModelConfig &c = model_.config();
  check_forward_batch(batch, c, params_, PageEntries::kCallerChecks);
  int64_t pages = 0, extra = 0, quest_extra = 0;
  bool trees = false;
  int32_t cap_slots = 0, cap_stride = 0, n_staged = 0;
  bool decode = model_.options().use_graphs;
  // Every sequence graph_verifies.
  bool verify_graph = model_.options().use_graphs && verify_graphs_allowed();
  bool sparse = !batch.seqs.empty();
  for (size_t i = 0; i < batch.seqs.size(); ++i) {
    const SeqRows &s = batch.seqs[i];
    n_staged += capture_split(s) > 0 ? 2 : 1;
    sparse = sparse && (s.device_sparse_key >= 0 || s.sparse != nullptr || s.quest != nullptr);
    pages += s.n_pages;
    if (s.sparse) extra += 2 + int64_t{c.n_layers} * (1 + s.sparse->stride);
    if (s.tree) extra += tree_record_ints(s);
    trees = trees || s.tree != nullptr;
    if (s.quest)
      quest_extra += 2 + int64_t{c.n_layers} *
                             (1 + kernels::quest_record_stride(s.quest->prefix, s.quest->budget));
    if (s.capture && s.capture->n_rows > 0) {
      cap_slots += s.capture->n_rows;
      cap_stride = std::max(cap_stride, s.capture->n_candidates);
    }
    decode = decode && s.n_tokens == 1 && s.logits == SeqRows::Logits::kLast && !s.tree;
    verify_graph = verify_graph && graph_verifies(s, capture_graphs_allowed());
  }
  // Rows of captured scores start 8-byte aligned (kv_select reads four fp16
  // scores at once).
  cap_stride = (cap_stride + 3) / 4 * 4;
  if (pages + extra + quest_extra > INT32_MAX)
    fail(VEGAS_ERR_INVALID_ARGUMENT,
         "forward batch: page tables and sparse sets exceed 2^31 entries");
  grow_page_table(pages + extra + quest_extra);
  // Until this step's upload is enqueued, the host copy may differ.
  tables_.begin_step();

  Step st;
  const int32_t n = static_cast<int32_t>(batch.seqs.size());
  // Decode steps and verification passes replay graphs: their sequences,
  // rows, capture slots and score strides padded to few launch shapes.
  // Other steps with captures run eagerly (their buffers grow).
  const int32_t n_padded = decode_bucket(n, params_.max_rows);
  const int32_t verify_rows = !decode && verify_graph && n > 0
                                  ? graph_verify_rows(batch.total_rows(), params_.max_rows)
                                  : 0;
  st.decode = decode;
  st.graph = (decode && cap_slots == 0) || verify_rows > 0;
  st.extra = static_cast<int32_t>(extra);
  const bool padded_capture = verify_rows > 0 && cap_slots > 0;
  st.cap_slots = padded_capture ? graph_bucket(cap_slots) : cap_slots;
  st.cap_stride = padded_capture ? graph_capture_stride(cap_stride) : cap_stride;
  st.n_seqs = st.graph ? n_padded : n_staged;
  st.rows = decode ? st.n_seqs : verify_rows > 0 ? verify_rows : batch.total_rows();
  st.real_logit_rows = batch.logit_rows();
  st.logit_rows = st.graph ? st.rows : st.real_logit_rows;
  st.pages = static_cast<int32_t>(pages);
  st.quest = quest_extra > 0;
  st.sparse = sparse;
  st.trees = trees;
  if (st.quest) grow_quest_keys(st.n_seqs);

  // Each field holds field_stride entries (the step's rows or sequences,
  // whichever is more), so a step uploads kFields * field_stride ints, not
  // kFields * max_rows (a session's max_rows is prefill_chunk + max_batch).
  // The page tables start at a fixed offset, kFields * max_rows, where
  // tables_ tracks them.
  st.field_stride = std::max(std::max(st.rows, st.n_seqs), 1);
  StagingCursor cur(meta_host_.get<int32_t>(), st.field_stride,
                    kFields * int64_t{params_.max_rows});
  cur.quest_at = pages + extra;                 // quest records follow the uploaded ones
  st.table_from = static_cast<int32_t>(pages);  // the sparse records go up every step
  pending_.clear();
  selection_->begin_step(st.cap_slots > 0, st.cap_slots, st.cap_stride);
  int64_t useful_splits = 1;
  const int32_t sparse_keys = sparse_split_keys(st);
  for (int32_t i = 0; i < n; ++i) {
    stage_sequence(batch, i, cur, st);
    const SeqRows &seq = batch.seqs[static_cast<size_t>(i)];
    st.max_keys = std::max(st.max_keys, seq.start_pos + seq.n_tokens);
    useful_splits = std::max(useful_splits, useful_splits_of(seq, sparse_keys));
  }
  cur.pad_to(st.n_seqs, st.rows, decode);
  // The fp8 verify kernel picks its variant by keys per split, which a graph fixes.
  if (verify_rows > 0) st.max_keys = graph_bucket(st.max_keys);
  st.n_splits = choose_splits(st, useful_splits);
  return st;
}

void CudaContext::stage_sequence(const ForwardBatch &batch, int32_t i, StagingCursor &cur,
                                 Step &st) {
  const ModelConfig &c = model_.config();
  const SeqRows &s = batch.seqs[static_cast<size_t>(i)];
  const int32_t ps = params_.page_size;
  const int32_t front = capture_split(s);
  if (front > 0) {  // the front: dense, no capture; the tail is the next staged sequence
    st.split_tail = true;
    cur.dense_sequence(cur.seq++, cur.page, cur.row, front, s.start_pos);
  }
  const int32_t si = cur.seq++;
  cur.dense_sequence(si, cur.page, cur.row + front, s.n_tokens - front, s.start_pos + front);
  // The entries kernels read: when the device holds them, checked, at this
  // offset, the table is neither checked again nor copied.
  const int32_t page = cur.page;
  const int64_t needed = pages_needed(s, params_);
  if (tables_.held(static_cast<size_t>(i), page, needed, s.page_table, cur.table + page)) {
    tables_.keep(static_cast<size_t>(i));
  } else {
    check_page_entries(batch, static_cast<size_t>(i), params_);
    std::copy(s.page_table, s.page_table + s.n_pages, cur.table + page);
    st.table_from = std::min(st.table_from, page);
    // Entries past `needed` (pages reserved ahead: a round's drafts) are
    // held too, so the passes that reach them upload nothing.
    tables_.stage(page, valid_page_entries(s, params_));
  }
  if (s.device_sparse_key >= 0) {
    const int64_t found = selection_->find(s.device_sparse_key);
    if (found < 0)
      fail(VEGAS_ERR_INVALID_ARGUMENT,
           "forward batch: sequence " + std::to_string(i) + " drafts with device set " +
               std::to_string(s.device_sparse_key) + ", which no step selected");
    cur.sparse_off[si] = -2 - static_cast<int32_t>(found);
  }
  if (s.sparse) {
    const SparseAttention &sp = *s.sparse;
    cur.sparse_off[si] = st.pages + cur.extra_at;
    int32_t *rec = cur.table + st.pages + cur.extra_at;
    rec[0] = sp.prefix;
    rec[1] = sp.stride;
    std::copy(sp.counts, sp.counts + c.n_layers, rec + 2);
    int32_t *pos = rec + 2 + c.n_layers;
    for (int32_t l = 0; l < c.n_layers; ++l)
      std::copy(sp.positions + int64_t{l} * sp.stride,
                sp.positions + int64_t{l} * sp.stride + sp.counts[l], pos + int64_t{l} * sp.stride);
    cur.extra_at += 2 + c.n_layers * (1 + sp.stride);
  }
  if (s.quest) {  // the record is written per layer by kernels::quest_select
    cur.sparse_off[si] = static_cast<int32_t>(cur.quest_at);
    cur.quest_prefix[si] = s.quest->prefix;
    cur.quest_budget[si] = s.quest->budget;
    cur.quest_at += 2 + int64_t{c.n_layers} *
                            (1 + kernels::quest_record_stride(s.quest->prefix, s.quest->budget));
  }
  cur.cap_cand[si] = s.capture ? s.capture->n_candidates : 0;
  stage_capture(s, cur);
  const int32_t first_row = cur.row;
  for (int32_t t = 0; t < s.n_tokens; ++t, ++cur.row) {
    const int32_t pos = s.start_pos + t;
    const int32_t row = cur.row;
    cur.tokens[row] = s.tokens[t];
    cur.positions[row] = pos;
    cur.slots[row] = s.page_table[pos / ps] * ps + pos % ps;
    // A sequence's rows are consecutive positions: its pages repeat only back to back.
    cur.written_page[row] = t == 0 || pos % ps == 0 ? s.page_table[pos / ps] : -1;
    if (s.logits == SeqRows::Logits::kAll ||
        (s.logits == SeqRows::Logits::kLast && t == s.n_tokens - 1))
      cur.logit_index[cur.logit_row++] = row;
  }
  if (s.tree) stage_tree(s, si, first_row, cur, st);  // RoPE positions by depth, the masks
  cur.page += s.n_pages;
  st.max_rows_per_seq = std::max({st.max_rows_per_seq, front, s.n_tokens - front});
}

void CudaContext::stage_capture(const SeqRows &s, StagingCursor &cur) {
  std::fill(cur.cap_slot + cur.row, cur.cap_slot + cur.row + s.n_tokens, -1);
  if (s.device_select && s.capture) {  // the set is chosen on the device
    const DeviceSelection &ds = *s.device_select;
    kernels::KvSelectDesc d;
    d.n = s.capture->n_candidates;
    d.head = ds.head;
    d.tail = ds.tail;
    d.scored = ds.scored;
    d.first_slot = cur.slot;
    d.n_rows = s.capture->n_rows;
    bool moved = false;
    d.record_off = selection_->offset(ds.key, stream_, &moved);
    if (moved) graphs_.clear();  // graphs hold the old address
    d.stride = selection_->stride();
    d.weight = ds.weight ? 1 : 0;
    selection_->request(ds.key, d, ds.deferred);
  } else if (s.capture && s.capture->n_rows > 0) {
    pending_.push_back({s.capture, cur.slot});
  }
  if (s.capture)
    for (int32_t k = 0; k < s.capture->n_rows; ++k)
      cur.cap_slot[cur.row + s.capture->rows[k]] = cur.slot++;
}

// A tree sequence's rows, staged by stage_sequence at the slots of their
// nodes: RoPE at base + depth instead, and the record of their ancestor masks
// (PagedAttentionParams::seq_tree_off) among the step's sparse records.
void CudaContext::stage_tree(const SeqRows &s, int32_t si, int32_t first_row, StagingCursor &cur,
                             const Step &st) {
  const TokenTree &t = *s.tree;
  const int32_t first = s.start_pos - t.base, nodes = first + s.n_tokens;
  const int32_t words = tree_mask_words(s);
  std::vector<uint32_t> masks(static_cast<size_t>(nodes) * words, 0);
  std::vector<int32_t> depths(static_cast<size_t>(nodes), 0);
  for (int32_t n = 0; n < nodes; ++n) {  // level order: a parent's mask is done
    uint32_t *m = masks.data() + static_cast<size_t>(n) * words;
    if (n > 0) {
      const int32_t up = t.parents[n];
      std::copy(masks.data() + static_cast<size_t>(up) * words,
                masks.data() + static_cast<size_t>(up + 1) * words, m);
      depths[static_cast<size_t>(n)] = depths[static_cast<size_t>(up)] + 1;
    }
    m[n / 32] |= 1u << (n % 32);
  }
  cur.tree_off[si] = st.pages + cur.extra_at;
  int32_t *rec = cur.table + st.pages + cur.extra_at;
  rec[0] = t.base;
  rec[1] = words;
  for (int32_t i = 0; i < s.n_tokens; ++i) {
    const int32_t node = first + i;
    const uint32_t *m = masks.data() + static_cast<size_t>(node) * words;
    for (int32_t w = 0; w < words; ++w) rec[2 + i * words + w] = static_cast<int32_t>(m[w]);
    cur.positions[first_row + i] = t.base + depths[static_cast<size_t>(node)];
  }
  cur.extra_at += tree_record_ints(s);
}

}  // namespace vegas::cuda

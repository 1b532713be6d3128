// Validation of a ForwardBatch shared by every backend: a bad batch is an
// error naming the sequence and the fault, never an out-of-bounds access.
#pragma once

#include <cstdint>

#include "backend/backend.h"

namespace vegas {

// Throws INVALID_ARGUMENT (empty batch, rows <= 0 or over params.max_rows in
// total, NULL pointers, negative start_pos, a page table that does not cover
// start_pos + n_tokens slots or names a page outside [0, num_pages), a sparse
// set, score capture, quest draft or token tree that is inconsistent with
// the rows) or
// TOKEN_OUT_OF_RANGE (an id outside [0, vocab_size)).
// kCallerChecks leaves the page-table entries to check_page_entries, which
// a backend that keeps tables it already checked (the CUDA one) calls on the
// tables it has not seen.
enum class PageEntries { kChecked, kCallerChecks };
void check_forward_batch(const ForwardBatch &batch, const ModelConfig &config,
                         const ContextParams &params, PageEntries entries = PageEntries::kChecked);

// Page-table entries the rows of `s` read: those of positions [0, start_pos + n_tokens).
int64_t pages_needed(const SeqRows &s, const ContextParams &params);

// Throws INVALID_ARGUMENT when sequence i's table names a page outside
// [0, num_pages) among the entries its positions need.
void check_page_entries(const ForwardBatch &batch, size_t i, const ContextParams &params);

// After check_page_entries passed: how many leading entries of s's table name
// a page of the pool, at least pages_needed(s) and at most s.n_pages. A
// backend that keeps checked tables can hold pages reserved ahead of the
// positions (a speculative round's) without checking them again.
int64_t valid_page_entries(const SeqRows &s, const ContextParams &params);

}  // namespace vegas

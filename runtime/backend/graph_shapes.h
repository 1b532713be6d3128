// The launch shapes a GPU context replays as graphs (CudaContext's staging):
// which verification passes qualify, and how their rows and keys are padded
// so that rounds whose drafts differ a little share a graph.
//
// Host arithmetic only (no device calls), so it is tested on the CPU.
#pragma once

#include <cstdint>

#include "backend/backend.h"

namespace vegas {

// Rows of a sequence a replayed verification pass takes at most: a round's
// (1 + γ, lookup's wide rounds included), well below the prefill kernel's.
constexpr int32_t kGraphVerifyMaxRows = 16;
// A replayed verification pass pads its rows to a multiple of this (the
// small GEMMs' M tile).
constexpr int32_t kGraphVerifyRowStep = 16;

// A replayed verification pass that captures scores pads its capture slots
// to a power of two (graph_bucket: the capture buffers hold layers x slots x
// heads x stride scores, Qwen3-8B at 32K with four slots 0.3 GB, so at most
// twice that), and each slot's scores (its row stride, the longest
// candidate list) to a multiple of kGraphCaptureStrideStep: a context grows
// by a round's tokens, so its stride moves to the next graph every ~150
// rounds of 7 tokens, not every round.
constexpr int32_t kGraphCaptureStrideStep = 1024;

// Whether sequence s's rows fit a replayed verification pass: dense, every
// row's logits (or one row's), at most kGraphVerifyMaxRows rows; where
// `capture` is false, no score capture either (a lookup round's pass, or one
// that selects nothing).
bool graph_verifies(const SeqRows &s, bool capture);

// A replayed pass's score stride (at least the step's own).
int32_t graph_capture_stride(int32_t stride);

// The padded rows of a replayed verification pass of `rows` rows: a
// multiple of kGraphVerifyRowStep (its padded sequences take none; a padded
// row of a quantized model's pass at 2-32 rows so stays in quant_gemv's
// range); 0 where that exceeds max_rows (it then runs eagerly).
int32_t graph_verify_rows(int64_t rows, int32_t max_rows);

// The smallest power of two >= n (at least 1): the bucket a graph pads its
// sequences, its capture slots and its bound on the sequences' keys to.
int32_t graph_bucket(int32_t n);

}  // namespace vegas

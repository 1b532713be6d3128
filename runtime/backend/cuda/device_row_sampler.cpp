#include "backend/cuda/device_row_sampler.h"

#include <algorithm>
#include <climits>
#include <string>

#include "backend/cuda/cuda_check.h"
#include "common/error.h"
#include "sampling/penalties.h"
#include "sampling/sampling.h"

namespace vegas::cuda {

void fill_sampling_rules(const RowSampling *rows, int32_t n, uint64_t draws,
                         kernels::SamplingRow *out) {
  for (int32_t i = 0; i < n; ++i) {
    const SamplingParams &p = *rows[i].params;
    kernels::SamplingRow &rule = out[i];
    rule.temperature = p.temperature;
    rule.top_k = p.top_k;
    rule.top_p = p.top_p;
    rule.min_p = p.min_p;
    rule.seed = p.seed;
    rule.counter = rows[i].rng_counter + (p.greedy() ? 0 : draws);
    rule.repetition_penalty = p.repetition_penalty;
    rule.presence_penalty = p.presence_penalty;
    rule.frequency_penalty = p.frequency_penalty;
  }
}

DeviceRowSampler::DeviceRowSampler(int64_t max_rows) {
  rules_.allocate(max_rows * sizeof(kernels::SamplingRow), "sampling rules");
  rules_host_.reserve(max_rows * sizeof(kernels::SamplingRow), "sampling rules");
}

bool DeviceRowSampler::prepare(const RowSampling *rows, int32_t n, int32_t vocab) {
  all_greedy_ = true;
  edits_.clear();
  for (int32_t i = 0; i < n; ++i) {
    const SamplingParams *p = rows[i].params;
    if (p == nullptr) return false;
    if (p->has_penalties() && rows[i].history == nullptr) return false;  // history unknown
    validate_sampling_params(*p);
    all_greedy_ = all_greedy_ && p->greedy();
  }
  for (int32_t i = 0; i < n; ++i) {
    penalty_counts(rows[i].history, static_cast<size_t>(std::max(rows[i].history_len, 0)), vocab,
                   *rows[i].params, &counts_);
    for (const auto &c : counts_) edits_.push_back(kernels::PenaltyEdit{i, c.first, c.second});
  }
  if (edits_.size() > static_cast<size_t>(INT32_MAX))
    fail(VEGAS_ERR_INVALID_ARGUMENT, "forward_sample: too many penalty edits");
  return true;
}

void DeviceRowSampler::enqueue(const RowSampling *rows, int32_t n, float *logits, int32_t vocab,
                               int32_t *out, cudaStream_t stream) {
  if (n == 0) return;
  kernels::SamplingRow *host = rules_host_.get<kernels::SamplingRow>();
  fill_sampling_rules(rows, n, 0, host);
  check(cudaMemcpyAsync(rules_.get(), host, n * sizeof(kernels::SamplingRow),
                        cudaMemcpyHostToDevice, stream),
        "upload of sampling rules");
  if (!edits_.empty()) {
    const size_t bytes = edits_.size() * sizeof(kernels::PenaltyEdit);
    if (bytes > edits_dev_.bytes()) {
      check(cudaStreamSynchronize(stream), "stream sync");  // the old buffer may be in use
      edits_dev_.allocate(2 * bytes, "penalty edits");
    }
    edits_host_.reserve(2 * bytes, "penalty edits");
    std::copy(edits_.begin(), edits_.end(), edits_host_.get<kernels::PenaltyEdit>());
    check(
        cudaMemcpyAsync(edits_dev_.get(), edits_host_.get(), bytes, cudaMemcpyHostToDevice, stream),
        "upload of penalty edits");
    kernels::PenaltyParams pp;
    pp.logits = logits;
    pp.rules = rules_.get<kernels::SamplingRow>();
    pp.edits = edits_dev_.get<kernels::PenaltyEdit>();
    pp.n_edits = static_cast<int32_t>(edits_.size());
    pp.rows = n;
    pp.vocab = vocab;
    check(kernels::apply_penalties(pp, stream), "apply_penalties");
  }
  kernels::SampleParams sp;
  sp.logits = logits;
  sp.rules = rules_.get<kernels::SamplingRow>();
  sp.out = out;
  sp.rows = n;
  sp.vocab = vocab;
  check(kernels::sample(sp, stream), "sample");
}

void check_drawn_id(int32_t token, const std::string &row) {
  if (token >= 0) return;
  if (token == kernels::kSampleBadLogit)
    fail(VEGAS_ERR_INVALID_ARGUMENT, row + ": a logit is NaN or +inf");
  if (token == kernels::kSampleAllMasked)
    fail(VEGAS_ERR_INVALID_ARGUMENT, row + ": every logit is -inf: nothing can be sampled");
  if (token == kernels::kSampleBadRow)
    fail(VEGAS_ERR_INVALID_ARGUMENT, row + ": a logit is NaN or +inf, or none is finite");
  fail(VEGAS_ERR_INVALID_ARGUMENT, row + ": sampling rule out of range");
}

void DeviceRowSampler::check_drawn(const int32_t *tokens, int32_t n) {
  for (int32_t i = 0; i < n; ++i)
    if (tokens[i] < 0) check_drawn_id(tokens[i], "device sampling, logit row " + std::to_string(i));
}

}  // namespace vegas::cuda

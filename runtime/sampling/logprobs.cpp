#include "sampling/logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

#include "common/error.h"

namespace vegas {

namespace {

// log(sum(exp(row))) in double, over a row sampling accepts (scan_logits).
double row_log_sum_exp(const float *row, int32_t vocab) {
  const double max = scan_logits(row, vocab).max;
  double sum = 0.0;
  for (int32_t i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(row[i]) - max);
  return max + std::log(sum);
}

}  // namespace

TokenLogprobs row_logprobs(const float *row, int32_t vocab, int32_t token, int32_t n_top) {
  if (token < 0 || token >= vocab)
    fail(VEGAS_ERR_INVALID_ARGUMENT, "token " + std::to_string(token) +
                                         " is outside the vocabulary of " + std::to_string(vocab));
  const double lse = row_log_sum_exp(row, vocab);
  TokenLogprobs out;
  out.token = token;
  out.logprob = static_cast<float>(static_cast<double>(row[token]) - lse);
  const int32_t n = std::clamp(n_top, 0, vocab);
  if (n == 0) return out;
  std::vector<int32_t> ids(static_cast<size_t>(vocab));
  std::iota(ids.begin(), ids.end(), 0);
  std::partial_sort(ids.begin(), ids.begin() + n, ids.end(), [row](int32_t a, int32_t b) {
    return row[a] > row[b] || (row[a] == row[b] && a < b);
  });
  out.top_ids.assign(ids.begin(), ids.begin() + n);
  for (int32_t id : out.top_ids)
    out.top_logprobs.push_back(static_cast<float>(static_cast<double>(row[id]) - lse));
  return out;
}

TokenLogprobs distribution_logprobs(const TokenDistribution &dist, int32_t token, int32_t n_top) {
  auto log_of = [](float p) {
    return p > 0.0f ? static_cast<float>(std::log(static_cast<double>(p)))
                    : -std::numeric_limits<float>::infinity();
  };
  TokenLogprobs out;
  out.token = token;
  out.logprob = log_of(dist.prob_of(token));
  std::vector<size_t> order(dist.ids.size());
  std::iota(order.begin(), order.end(), size_t{0});
  const size_t n = std::min(order.size(), static_cast<size_t>(std::max(n_top, 0)));
  std::partial_sort(order.begin(), order.begin() + static_cast<long>(n), order.end(),
                    [&dist](size_t a, size_t b) {
                      return dist.probs[a] > dist.probs[b] ||
                             (dist.probs[a] == dist.probs[b] && dist.ids[a] < dist.ids[b]);
                    });
  for (size_t i = 0; i < n; ++i) {
    out.top_ids.push_back(dist.ids[order[i]]);
    out.top_logprobs.push_back(log_of(dist.probs[order[i]]));
  }
  return out;
}

}  // namespace vegas

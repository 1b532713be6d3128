// Pearson's chi-square goodness-of-fit test for the statistical unit tests
// (sampling frequencies, speculative losslessness). The p-value is the upper
// tail of the chi-square distribution, Q(df/2, x/2), the regularised upper
// incomplete gamma function, evaluated by its power series or, for large x,
// its continued fraction (both standard; accurate to ~1e-12 here).
#pragma once

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <vector>

namespace vegas::test {

// Q(a, x) = Γ(a, x) / Γ(a).
inline double regularised_upper_gamma(double a, double x) {
  if (x <= 0.0) return 1.0;
  const double log_prefix = -x + a * std::log(x) - std::lgamma(a);
  if (x < a + 1.0) {
    // P(a, x) = e^-x x^a / Γ(a) * Σ x^n / (a (a+1) ... (a+n)).
    double term = 1.0 / a, sum = term;
    for (int n = 1; n < 100000 && std::fabs(term) > std::fabs(sum) * 1e-16; ++n) {
      term *= x / (a + n);
      sum += term;
    }
    return 1.0 - sum * std::exp(log_prefix);
  }
  // Q(a, x) = e^-x x^a / Γ(a) * 1 / (x + 1 - a - 1(1-a) / (x + 3 - a - ...)), modified Lentz.
  const double tiny = 1e-300;
  double b = x + 1.0 - a, c = 1.0 / tiny, d = 1.0 / b, h = d;
  for (int i = 1; i < 100000; ++i) {
    const double an = -i * (i - a);
    b += 2.0;
    d = an * d + b;
    if (std::fabs(d) < tiny) d = tiny;
    c = b + an / c;
    if (std::fabs(c) < tiny) c = tiny;
    d = 1.0 / d;
    const double delta = d * c;
    h *= delta;
    if (std::fabs(delta - 1.0) < 1e-16) break;
  }
  return std::exp(log_prefix) * h;
}

// P(X >= x) for X ~ chi-square with df degrees of freedom.
inline double chi_square_p_value(double x, int df) {
  return regularised_upper_gamma(0.5 * df, 0.5 * x);
}

struct ChiSquare {
  double statistic = 0.0;
  int df = 0;
  double p_value = 1.0;
  int64_t impossible_hits = 0;  // observations in cells of expected probability 0
};

// Observed counts against expected probabilities (summing to 1). Cells with
// expected probability 0 carry no degree of freedom; any hit there is counted
// in impossible_hits (a correct sampler must have none).
inline ChiSquare chi_square(const std::vector<int64_t> &observed,
                            const std::vector<double> &expected) {
  if (observed.size() != expected.size()) throw std::invalid_argument("chi_square: sizes differ");
  int64_t n = 0;
  for (int64_t o : observed) n += o;
  ChiSquare r;
  int cells = 0;
  for (size_t i = 0; i < observed.size(); ++i) {
    if (expected[i] <= 0.0) {
      r.impossible_hits += observed[i];
      continue;
    }
    const double e = expected[i] * static_cast<double>(n);
    const double diff = static_cast<double>(observed[i]) - e;
    r.statistic += diff * diff / e;
    ++cells;
  }
  r.df = cells - 1;
  r.p_value = chi_square_p_value(r.statistic, r.df);
  return r;
}

}  // namespace vegas::test

// Device acceptance (kernels/speculative_accept.cuh, label `gpu`).
// - The kernel is the host's rule (sampling/speculative_accept.h) step for
//   step: on random candidate rows, rules and drafts drawn from q, it keeps
//   the same drafts, emits the same corrected or bonus token and uses the same
//   Rng draws as accept_greedy / accept_sampled over the distributions
//   build_distribution_from_candidates makes of the same candidates.
// - It hands a sequence back (status) for an overflowed or bad row and for a
//   draft outside its own distribution.
// - A sampled VEGAS session on the embedded model commits the same tokens
//   with the acceptance on the device as with it on the host, which makes the
//   host's chi-square test of the rule (test_speculative_sampling) a test of
//   the device path too.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "../unit/support/golden.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/device_buffer.h"
#include "logit_candidates.cuh"
#include "model/model.h"
#include "sampling/sampling.h"
#include "sampling/speculative_accept.h"
#include "session/session.h"
#include "speculative_accept.cuh"

namespace vegas {
namespace {

using namespace golden;  // NOLINT: the fixture helpers

constexpr int32_t kCap = kMaxCandidateTopK;

// Rows of candidates in the device layout (kernels::CandidateLayout).
struct CandidateBlock {
  kernels::CandidateLayout layout;
  std::vector<int32_t> ints;
  explicit CandidateBlock(int32_t n)
      : layout{n, kCap}, ints(static_cast<size_t>(layout.ints()), 0) {}
  void set(int32_t row, const LogitCandidates &c) {
    ints[static_cast<size_t>(row)] = static_cast<int32_t>(c.ids.size());
    std::copy(c.ids.begin(), c.ids.end(), layout.ids(ints.data(), row));
    std::copy(c.logits.begin(), c.logits.end(), layout.values(ints.data(), row));
  }
  void set_status(int32_t row, int32_t status) { ints[static_cast<size_t>(row)] = status; }
};

// Up to top_k candidates (ascending ids from a small vocabulary, so that p and
// q share ids), some logits tied.
LogitCandidates random_candidates(std::mt19937 &gen, int32_t top_k) {
  std::uniform_int_distribution<int32_t> count(1, std::min(top_k, 24));
  std::vector<int32_t> ids(40);
  for (int32_t i = 0; i < 40; ++i) ids[static_cast<size_t>(i)] = i * 3;
  std::shuffle(ids.begin(), ids.end(), gen);
  ids.resize(static_cast<size_t>(count(gen)));
  std::sort(ids.begin(), ids.end());
  std::normal_distribution<float> logit(0.0f, 2.0f);
  LogitCandidates c;
  c.ids = ids;
  for (size_t i = 0; i < ids.size(); ++i)
    c.logits.push_back(i > 0 && gen() % 5 == 0 ? c.logits[i - 1] : std::round(logit(gen) * 8) / 8);
  return c;
}

SamplingParams random_rule(std::mt19937 &gen) {
  SamplingParams s;
  const int kind = static_cast<int>(gen() % 6);
  if (kind == 0) return s;  // greedy
  const float temps[] = {0.3f, 0.6f, 1.0f, 1.7f};
  const float top_ps[] = {1.0f, 0.95f, 0.7f, 0.3f};
  s.temperature = temps[gen() % 4];
  s.top_k = static_cast<int32_t>(1 + gen() % 40);
  s.top_p = top_ps[gen() % 4];
  s.min_p = gen() % 3 == 0 ? 0.05f : 0.0f;
  s.seed = gen();
  return s;
}

struct Case {
  SamplingParams rule;
  uint64_t counter = 0;
  int32_t gamma = 0;
  std::vector<LogitCandidates> q, p;  // gamma draft rows, gamma + 1 verify rows
  std::vector<int32_t> drafts;
};

// The host's acceptance of a case: result and draws used.
AcceptResult host_accept(const Case &c, uint64_t *draws) {
  AcceptResult r;
  std::vector<TokenDistribution> q(c.q.size()), p(c.p.size());
  for (size_t i = 0; i < c.q.size(); ++i) build_distribution_from_candidates(c.q[i], c.rule, &q[i]);
  for (size_t i = 0; i < c.p.size(); ++i) build_distribution_from_candidates(c.p[i], c.rule, &p[i]);
  if (c.rule.greedy()) {
    std::vector<int32_t> argmax;
    for (const auto &d : p) argmax.push_back(d.ids[0]);
    accept_greedy(c.drafts.data(), c.gamma, argmax.data(), &r);
    *draws = 0;
    return r;
  }
  Rng rng(c.rule.seed);
  rng.set_counter(c.counter);
  accept_sampled(c.drafts.data(), q.data(), c.gamma, p.data(), rng, &r);
  *draws = rng.counter() - c.counter;
  return r;
}

Case random_case(std::mt19937 &gen) {
  Case c;
  c.rule = random_rule(gen);
  c.counter = gen() % 1000;
  c.gamma = static_cast<int32_t>(gen() % 9);
  const int32_t k = c.rule.greedy() ? 1 : c.rule.top_k;
  Rng draw(gen());
  for (int32_t i = 0; i <= c.gamma; ++i) {
    LogitCandidates target = random_candidates(gen, k);
    if (i < c.gamma) {
      // Half the rows draft from the target itself (long accepted runs).
      LogitCandidates draft = gen() % 2 ? target : random_candidates(gen, k);
      if (c.rule.greedy()) {  // greedy candidates are the maximum's ties
        const float mx = *std::max_element(draft.logits.begin(), draft.logits.end());
        LogitCandidates top;
        for (size_t j = 0; j < draft.ids.size(); ++j)
          if (draft.logits[j] == mx) top.ids.push_back(draft.ids[j]), top.logits.push_back(mx);
        draft = top;
      }
      TokenDistribution q;
      build_distribution_from_candidates(draft, c.rule, &q);
      c.drafts.push_back(sample_from(q, draw.uniform()));
      c.q.push_back(draft);
    }
    if (c.rule.greedy()) {
      const float mx = *std::max_element(target.logits.begin(), target.logits.end());
      LogitCandidates top;
      for (size_t j = 0; j < target.ids.size(); ++j)
        if (target.logits[j] == mx) top.ids.push_back(target.ids[j]), top.logits.push_back(mx);
      target = top;
    }
    c.p.push_back(target);
  }
  return c;
}

// Runs the kernel over `cases` (drafts in one chain of max gamma passes).
std::vector<std::vector<int32_t>> device_accept(
    const std::vector<Case> &cases, const std::vector<std::pair<int, int>> &overflow = {}) {
  const int32_t n = static_cast<int32_t>(cases.size());
  int32_t passes = 0, verify_rows = 0;
  for (const Case &c : cases) passes = std::max(passes, c.gamma), verify_rows += c.gamma + 1;
  std::vector<int32_t> chain(static_cast<size_t>(passes) * n, 0);  // draws, then candidates
  std::vector<CandidateBlock> draft_blocks(static_cast<size_t>(passes), CandidateBlock(n));
  CandidateBlock verify(verify_rows);
  std::vector<kernels::AcceptSeq> specs(static_cast<size_t>(n));
  int32_t row = 0;
  for (int32_t s = 0; s < n; ++s) {
    const Case &c = cases[static_cast<size_t>(s)];
    kernels::AcceptSeq &a = specs[static_cast<size_t>(s)];
    a.rule.temperature = c.rule.temperature;
    a.rule.top_k = c.rule.top_k;
    a.rule.top_p = c.rule.top_p;
    a.rule.min_p = c.rule.min_p;
    a.rule.seed = c.rule.seed;
    a.rule.counter = c.counter;
    a.first_row = row;
    a.gamma = c.gamma;
    a.chain_row = s;
    for (int32_t j = 0; j < c.gamma; ++j) {
      chain[static_cast<size_t>(j * n + s)] = c.drafts[static_cast<size_t>(j)];
      draft_blocks[static_cast<size_t>(j)].set(s, c.q[static_cast<size_t>(j)]);
    }
    for (int32_t i = 0; i <= c.gamma; ++i) verify.set(row + i, c.p[static_cast<size_t>(i)]);
    row += c.gamma + 1;
  }
  for (const auto &[s, r] : overflow)
    verify.set_status(specs[static_cast<size_t>(s)].first_row + r, kernels::kCandidatesOverflow);
  for (const CandidateBlock &b : draft_blocks)
    chain.insert(chain.end(), b.ints.begin(), b.ints.end());
  cuda::DeviceBuffer chain_dev(std::max<size_t>(chain.size(), 1) * 4, "test"),
      verify_dev(verify.ints.size() * 4, "test"), spec_dev(specs.size() * sizeof(specs[0]), "test"),
      out_dev(static_cast<size_t>(n) * kernels::kAcceptRecordInts * 4, "test");
  cudaMemcpy(chain_dev.get(), chain.data(), chain.size() * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(verify_dev.get(), verify.ints.data(), verify.ints.size() * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(spec_dev.get(), specs.data(), specs.size() * sizeof(specs[0]), cudaMemcpyHostToDevice);
  cudaMemset(out_dev.get(), 0xff, static_cast<size_t>(n) * kernels::kAcceptRecordInts * 4);
  kernels::AcceptParams p;
  p.seqs = spec_dev.get<kernels::AcceptSeq>();
  p.n_seqs = n;
  p.draft_tokens = chain_dev.get<int32_t>();
  p.draft_cands = p.draft_tokens + static_cast<int64_t>(passes) * n;
  p.chain_rows = n;
  p.chain_passes = passes;
  p.verify_cands = verify_dev.get<int32_t>();
  p.verify_rows = verify_rows;
  p.cap = kCap;
  p.out = out_dev.get<int32_t>();
  EXPECT_EQ(kernels::speculative_accept(p, nullptr), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<int32_t> out(static_cast<size_t>(n) * kernels::kAcceptRecordInts);
  cudaMemcpy(out.data(), out_dev.get(), out.size() * 4, cudaMemcpyDeviceToHost);
  std::vector<std::vector<int32_t>> records;
  for (int32_t s = 0; s < n; ++s)
    records.emplace_back(out.begin() + s * kernels::kAcceptRecordInts,
                         out.begin() + (s + 1) * kernels::kAcceptRecordInts);
  return records;
}

TEST(DeviceAccept, KernelMatchesHostRule) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  std::mt19937 gen(20261126);
  int64_t accepted = 0, rejected = 0, bonus = 0, greedy = 0;
  for (int batch = 0; batch < 40; ++batch) {
    std::vector<Case> cases;
    for (int i = 0; i < 100; ++i) cases.push_back(random_case(gen));
    const auto records = device_accept(cases);
    for (size_t s = 0; s < cases.size(); ++s) {
      const Case &c = cases[s];
      uint64_t draws = 0;
      const AcceptResult want = host_accept(c, &draws);
      const std::vector<int32_t> &r = records[s];
      ASSERT_EQ(r[0], kernels::kAcceptOk) << "case " << batch << "/" << s;
      ASSERT_EQ(r[1], want.n_accepted) << "case " << batch << "/" << s << " gamma " << c.gamma;
      ASSERT_EQ(static_cast<uint64_t>(r[2]), draws) << "case " << batch << "/" << s;
      const std::vector<int32_t> got(r.begin() + 3, r.begin() + 3 + r[1] + 1);
      ASSERT_EQ(got, want.tokens) << "case " << batch << "/" << s;
      accepted += want.n_accepted;
      rejected += want.n_accepted < c.gamma;
      bonus += want.n_accepted == c.gamma;
      greedy += c.rule.greedy();
    }
  }
  std::printf("4000 sequences: %lld drafts kept, %lld rejections, %lld bonus tokens, %lld greedy\n",
              static_cast<long long>(accepted), static_cast<long long>(rejected),
              static_cast<long long>(bonus), static_cast<long long>(greedy));
  // The cases reach every branch of the rule.
  EXPECT_GT(rejected, 500);
  EXPECT_GT(bonus, 500);
  EXPECT_GT(greedy, 300);
}

TEST(DeviceAccept, HandsBackWhatItCannotAccept) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  std::mt19937 gen(7);
  std::vector<Case> cases;
  while (cases.size() < 3) {
    Case c = random_case(gen);
    if (!c.rule.greedy() && c.gamma >= 2) cases.push_back(c);
  }
  // Case 1's first draft is an id no candidate row has (ids are multiples of 3).
  cases[1].drafts[0] = 1;
  // Case 2's first verify row overflowed.
  const auto records = device_accept(cases, {{2, 0}});
  EXPECT_EQ(records[0][0], kernels::kAcceptOk);
  EXPECT_EQ(records[1][0], kernels::kAcceptDraftOutside);
  EXPECT_EQ(records[2][0], kernels::kAcceptOverflow);
}

// A sampled VEGAS batch through a session, acceptance on the host or the device.
std::vector<std::vector<int32_t>> sampled_vegas(const std::shared_ptr<Model> &model,
                                                const std::vector<std::vector<int32_t>> &prompts,
                                                bool host_acceptance, SequenceStats *total) {
  SessionParams sp;
  sp.speculative = true;
  sp.spec.policy = "vegas";
  sp.spec.gamma = 6;
  sp.spec.debug_host_acceptance = host_acceptance;
  Session session(model, sp);
  std::vector<int32_t> ids;
  for (size_t i = 0; i < prompts.size(); ++i) {
    SequenceRequest req;
    req.prompt.assign(prompts[i].begin(), prompts[i].end());
    req.max_tokens = 96;
    req.ignore_eos = true;
    req.sampling.temperature = 0.6f;
    req.sampling.top_k = 20;
    req.sampling.top_p = 0.95f;
    req.sampling.seed = 100 + i;
    ids.push_back(session.submit(std::move(req)));
  }
  session.run();
  std::vector<std::vector<int32_t>> out;
  for (int32_t id : ids) {
    const Sequence &seq = session.sequence(id);
    EXPECT_EQ(seq.status, VEGAS_OK);
    total->rounds += seq.stats.rounds;
    total->drafted += seq.stats.drafted;
    total->accepted += seq.stats.accepted;
    out.emplace_back(seq.tokens.begin() + seq.n_prompt(), seq.tokens.end());
  }
  return out;
}

TEST(DeviceAccept, SampledVegasCommitsTheHostsTokens) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const std::string path = fixtures_dir() + "/embedded/greedy_2k.json";
  ASSERT_TRUE(fs::exists(path)) << path;
  ModelLoadOptions options;
  options.backend_auto = false;
  options.backend = BackendKind::kCuda;
  const auto model = Model::load(model_dir(), options);
  std::vector<std::vector<int32_t>> prompts;
  for (const auto &p : read_json(path))
    prompts.push_back(read_ids(p.at("prompt_ids"), path, model->config().vocab_size));
  while (prompts.size() < 8) prompts.push_back(prompts[prompts.size() % 2]);
  SequenceStats host{}, device{};
  const auto want = sampled_vegas(model, prompts, true, &host);
  const auto got = sampled_vegas(model, prompts, false, &device);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], want[i]) << "sequence " << i;
  EXPECT_EQ(device.accepted, host.accepted);
  EXPECT_EQ(device.rounds, host.rounds);
  EXPECT_GT(host.drafted - host.accepted, 0) << "no draft was rejected: the residual went untested";
  std::printf("%zu sequences, %lld rounds, %lld/%lld drafts kept\n", got.size(),
              static_cast<long long>(device.rounds), static_cast<long long>(device.accepted),
              static_cast<long long>(device.drafted));
}

}  // namespace
}  // namespace vegas

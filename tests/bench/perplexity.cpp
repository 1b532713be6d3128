// vegas_perplexity: the perplexity of one or more models (model directories or
// GGUF files) on the texts of a prompts file, so that a quantized model can be
// held against the model it came from. Each text is tokenized by each model's
// own tokenizer and cut to --tokens tokens; the logits of every position
// score the next token. The first model is the reference: for every other
// one the tool also reports whether its token ids were the same and how often
// its top token agrees with the reference's.
//
//   vegas_perplexity --prompts prompts-public.jsonl --tokens 2048 --limit 8 \
//       models/vegas-code-22m model-q4_k_m.gguf
//
// One JSON object per model on stdout.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "model/model.h"

namespace {

using namespace vegas;  // NOLINT: a tool over the internal API

struct Text {
  std::string id;
  std::string text;
};

std::vector<Text> read_texts(const std::string &path, int limit) {
  std::ifstream in(path);
  if (!in) fail(VEGAS_ERR_IO, "cannot read " + path);
  std::vector<Text> texts;
  std::string line;
  while (std::getline(in, line) && (limit <= 0 || static_cast<int>(texts.size()) < limit)) {
    if (line.empty()) continue;
    const nlohmann::json j = nlohmann::json::parse(line);
    texts.push_back({j.value("id", std::to_string(texts.size())), j.at("text").get<std::string>()});
  }
  return texts;
}

struct Scored {
  double nll = 0.0;  // summed over the scored positions
  int64_t n = 0;
  std::vector<int32_t> argmax;  // per scored position
};

// Runs `tokens` through a fresh context in chunks, every row's logits kept.
Scored score(BackendModel &backend, const std::vector<int32_t> &tokens, int32_t chunk,
             bool kv_fp8) {
  const int32_t vocab = backend.config().vocab_size;
  const int32_t len = static_cast<int32_t>(tokens.size());
  ContextParams p;
  p.page_size = 16;
  p.num_pages = (len + 15) / 16;
  p.max_rows = chunk;
  p.kv_fp8 = kv_fp8;
  auto ctx = backend.create_context(p);
  std::vector<int32_t> table(static_cast<size_t>(p.num_pages));
  for (int32_t i = 0; i < p.num_pages; ++i) table[static_cast<size_t>(i)] = i;
  Scored s;
  for (int32_t start = 0; start < len - 1; start += chunk) {
    SeqRows r;
    r.tokens = tokens.data() + start;
    r.n_tokens = std::min(chunk, len - start);
    r.start_pos = start;
    r.page_table = table.data();
    r.n_pages = p.num_pages;
    r.logits = SeqRows::Logits::kAll;
    ForwardBatch b;
    b.seqs.push_back(r);
    const float *logits = ctx->forward(b);
    for (int32_t i = 0; i < r.n_tokens && start + i + 1 < len; ++i) {
      const float *row = logits + static_cast<int64_t>(i) * vocab;
      const float *best = std::max_element(row, row + vocab);
      const float top = *best;
      double sum = 0.0;
      for (int32_t v = 0; v < vocab; ++v) sum += std::exp(double(row[v]) - top);
      const int32_t next = tokens[static_cast<size_t>(start + i + 1)];
      s.nll += std::log(sum) + top - row[next];
      s.argmax.push_back(static_cast<int32_t>(best - row));
      ++s.n;
    }
  }
  return s;
}

struct Reference {
  std::vector<std::vector<int32_t>> tokens;  // per text
  std::vector<std::vector<int32_t>> argmax;
};

// The process's resident memory in MB (VmRSS), -1 where /proc is missing.
double resident_mb() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  return -1.0;
}

nlohmann::json evaluate(const std::string &path, bool kv_fp8, const std::vector<Text> &texts,
                        int32_t n_tokens, int32_t chunk, Reference *ref) {
  ModelLoadOptions options;
  const double rss_before = resident_mb();
  const auto model = Model::load(path, options);
  const double rss_loaded = resident_mb() - rss_before;
  const bool is_reference = ref->tokens.empty();
  double nll = 0.0;
  int64_t n = 0, agree = 0, compared = 0;
  int32_t same_tokens = 0;
  for (size_t t = 0; t < texts.size(); ++t) {
    std::vector<int32_t> ids = model->tokenizer().encode(texts[t].text, false, true);
    if (static_cast<int32_t>(ids.size()) > n_tokens) ids.resize(static_cast<size_t>(n_tokens));
    const Scored s = score(model->backend(), ids, chunk, kv_fp8);
    nll += s.nll;
    n += s.n;
    if (is_reference) {
      ref->tokens.push_back(ids);
      ref->argmax.push_back(s.argmax);
      continue;
    }
    if (ids == ref->tokens[t]) {
      ++same_tokens;
      for (size_t i = 0; i < s.argmax.size(); ++i) agree += s.argmax[i] == ref->argmax[t][i];
      compared += static_cast<int64_t>(s.argmax.size());
    }
  }
  nlohmann::json out;
  out["model"] = path;
  out["kv_type"] = kv_fp8 ? "fp8" : "default";
  out["texts"] = texts.size();
  out["scored_tokens"] = n;
  out["perplexity"] = std::exp(nll / static_cast<double>(std::max<int64_t>(n, 1)));
  out["host_mb_after_load"] = rss_loaded;  // resident memory the load added
  if (!is_reference) {
    out["texts_tokenized_as_reference"] = same_tokens;
    out["top1_agreement_with_reference"] =
        compared > 0 ? static_cast<double>(agree) / static_cast<double>(compared) : 0.0;
  }
  return out;
}

}  // namespace

int main(int argc, char **argv) {
  CLI::App app{
      "Perplexity of models on a prompts file, each with each KV type (the first pair is the "
      "reference)"};
  std::vector<std::string> kv_types{"default"};
  std::vector<std::string> models;
  std::string prompts;
  int limit = 8;
  int32_t n_tokens = 2048, chunk = 512;
  app.add_option("models", models, "model directories or GGUF files")->required();
  app.add_option("--prompts", prompts, "JSON lines with a \"text\" field")->required();
  app.add_option("--limit", limit, "texts to score (0: all)");
  app.add_option("--tokens", n_tokens, "tokens per text")->check(CLI::Range(2, 1 << 20));
  app.add_option("--chunk", chunk, "rows per forward pass")->check(CLI::Range(1, 4096));
  app.add_option("--kv-types", kv_types, "KV caches to score each model with: default, fp8")
      ->check(CLI::IsMember({"default", "fp8"}));
  CLI11_PARSE(app, argc, argv);
  try {
    const std::vector<Text> texts = read_texts(prompts, limit);
    Reference ref;
    for (const std::string &m : models)
      for (const std::string &kv : kv_types)
        std::printf("%s\n", evaluate(m, kv == "fp8", texts, n_tokens, chunk, &ref).dump().c_str());
  } catch (const std::exception &e) {
    std::fprintf(stderr, "vegas_perplexity: %s\n", e.what());
    return 1;
  }
  return 0;
}

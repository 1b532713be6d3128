#include "run_options.h"

#include "commands.h"

namespace vegas_cli {

void add_run_options(CLI::App *cmd, RunArgs &r) {
  r.model.model_dir = default_model_dir();
  cmd->add_option("--model", r.model.model_dir,
                  "Model directory or GGUF file (default: the embedded model)");
  cmd->add_option("--synthetic", r.model.synthetic, "config.json for random weights (CUDA)");
  cmd->add_option("--prompts", r.prompts_file,
                  "JSONL prompts (field `text`) instead of random ids");
  cmd->add_option("--backend", r.model.backend, "cpu, cuda or auto")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  cmd->add_option("--threads", r.model.threads, "CPU threads (0 = all cores)");
  cmd->add_option("--new-tokens", r.new_tokens, "Tokens generated per sequence")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--temperature", r.sampling.temperature, "0 = greedy");
  cmd->add_option("--top-k", r.sampling.top_k, "0 = off");
  cmd->add_option("--top-p", r.sampling.top_p, "1 = off");
  cmd->add_option("--seed", r.sampling.seed, "Seed for prompts and sampling");
  cmd->add_option("--min-tokens", r.spec.min_tokens, "Selection floor (speculative runs)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--sink", r.spec.sink, "Policy streaming: leading tokens always kept")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--score-kind", r.spec.score_kind, "weight or logit")
      ->check(CLI::IsMember({"weight", "logit"}));
  cmd->add_option("--tree-branches", r.spec.tree_branches,
                  "Token trees (speculative runs): drafts per branching level, 1 = a chain")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--tree-depth", r.spec.tree_depth, "Token trees: draft levels that branch")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--draft-model", r.spec.draft_model_dir,
                  "Speculative runs: a smaller model of the same tokenizer drafts (directory)");
  cmd->add_option("--draft-window", r.spec.draft_window,
                  "--draft-model: its draft passes see the last N tokens (0 = all)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--kv-type", r.kv_type, "KV cache: default (bf16 on CUDA) or fp8")
      ->check(CLI::IsMember({"default", "fp8"}));
}

}  // namespace vegas_cli

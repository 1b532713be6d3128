/* Proves that a selection policy written in C99 against vegas.h alone plugs into
 * VEGAS mode (policy "user"): its select() is called once per layer after
 * prefill and after every round but the last, always with sane inputs (host
 * scores that are softmax weights, capacity >= candidates, a candidate count
 * that starts at the prompt length and grows), reset() once when the sequence
 * ends, destroy() exactly once when the session is freed; and greedy decoding
 * with it (keeping only the most recent half of the candidates) produces
 * exactly the tokens of vanilla decoding. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vegas.h"

#define CHECK(call)                                                                              \
  do {                                                                                           \
    vegas_status s_ = (call);                                                                    \
    if (s_ != VEGAS_OK) {                                                                        \
      fprintf(stderr, "%s:%d: %s -> %s: %s\n", __FILE__, __LINE__, #call, vegas_status_name(s_), \
              vegas_last_error());                                                               \
      exit(1);                                                                                   \
    }                                                                                            \
  } while (0)

#define EXPECT(cond)                                                                 \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      fprintf(stderr, "%s:%d: expectation failed: %s\n", __FILE__, __LINE__, #cond); \
      failures++;                                                                    \
    }                                                                                \
  } while (0)

#define MAX_TOKENS 48
#define MAX_LAYERS 64

static int failures = 0;

typedef struct recent_half {
  int32_t n_layers; /* from vegas_model_get_info */
  int32_t n_prompt; /* the only sequence's prompt length */
  int32_t calls;
  int32_t bad_inputs; /* calls whose input broke the contract */
  int32_t resets;
  int32_t reset_seq;
  int32_t destroys;
  int32_t last_n[MAX_LAYERS]; /* n_candidates of the previous call, per layer */
} recent_half;

static int32_t input_is_sane(const recent_half *self, const vegas_select_input *in,
                             const int32_t *out, int32_t capacity) {
  int32_t i;
  double sum = 0.0;
  if (in->struct_size < offsetof(vegas_select_input, stream) + sizeof in->stream) return 0;
  if (in->n_layers != self->n_layers || in->layer < 0 || in->layer >= in->n_layers) return 0;
  if (in->n_candidates < self->n_prompt || in->n_candidates < self->last_n[in->layer]) return 0;
  if (capacity < in->n_candidates || out == NULL) return 0;
  if (in->budget < 1 || in->budget > in->n_candidates) return 0;
  if (in->scores_on_device != 0 || in->stream != NULL || in->scores == NULL) return 0;
  if (in->score_kind != VEGAS_SCORE_WEIGHT) return 0;
  for (i = 0; i < in->n_candidates; ++i) {
    const float w = in->scores[i];
    if (!(w >= 0.0f && w <= 1.0f)) return 0; /* a softmax weight (NaN fails too) */
    sum += w;
  }
  /* Mean weights over the candidates: at most 1 (the tail after them takes the rest). */
  return sum > 0.0 && sum <= 1.0 + 1e-3;
}

static int32_t recent_half_select(const vegas_select_input *in, int32_t *out, int32_t capacity,
                                  void *user_data) {
  recent_half *self = (recent_half *)user_data;
  int32_t count = 0, pos;
  self->calls++;
  if (!input_is_sane(self, in, out, capacity)) {
    self->bad_inputs++;
    return VEGAS_ERR_INVALID_ARGUMENT;
  }
  self->last_n[in->layer] = in->n_candidates;
  for (pos = in->n_candidates - in->n_candidates / 2; pos < in->n_candidates; ++pos)
    out[count++] = pos;
  return count;
}

static void recent_half_reset(int32_t seq_id, void *user_data) {
  recent_half *self = (recent_half *)user_data;
  self->resets++;
  self->reset_seq = seq_id;
}

static void recent_half_destroy(void *user_data) {
  ((recent_half *)user_data)->destroys++;
}

static const char *const kPrompt =
    "import os\n"
    "import sys\n"
    "\n"
    "\n"
    "class Inventory:\n"
    "    \"\"\"A small in-memory inventory of named items and their counts.\"\"\"\n"
    "\n"
    "    def __init__(self):\n"
    "        self.items = {}\n"
    "\n"
    "    def add(self, name, count=1):\n"
    "        if count <= 0:\n"
    "            raise ValueError('count must be positive')\n"
    "        self.items[name] = self.items.get(name, 0) + count\n"
    "\n"
    "    def remove(self, name, count=1):\n"
    "        if name not in self.items:\n"
    "            raise KeyError(name)\n"
    "        if self.items[name] < count:\n"
    "            raise ValueError('not enough items')\n"
    "        self.items[name] -= count\n"
    "        if self.items[name] == 0:\n"
    "            del self.items[name]\n"
    "\n"
    "    def total(self):\n"
    "        return sum(self.items.values())\n"
    "\n"
    "    def names(self):\n"
    "        return sorted(self.items)\n"
    "\n"
    "\n"
    "def load_inventory(path):\n"
    "    inventory = Inventory()\n"
    "    with open(path) as f:\n"
    "        for line in f:\n"
    "            line = line.strip()\n"
    "            if not line or line.startswith('#'):\n"
    "                continue\n"
    "            name, count = line.split(',')\n"
    "            inventory.add(name, int(count))\n"
    "    return inventory\n"
    "\n"
    "\n"
    "def save_inventory(inventory, path):\n"
    "    with open(path, 'w') as f:\n"
    "        for name in inventory.names():\n";

/* Generates MAX_TOKENS tokens greedily; `options` NULL = vanilla. */
static size_t generate(vegas_model *model, const vegas_session_options *options,
                       const int32_t *prompt, size_t n_prompt, int32_t *tokens,
                       vegas_sequence_info *info, vegas_session_stats *stats) {
  vegas_session *session = NULL;
  vegas_request req;
  int32_t seq = -1;
  size_t n = 0;
  CHECK(vegas_session_create(model, options, &session));
  vegas_request_init(&req);
  req.prompt = prompt;
  req.n_prompt = n_prompt;
  req.max_tokens = MAX_TOKENS;
  req.ignore_eos = 1;
  CHECK(vegas_session_submit(session, &req, &seq));
  CHECK(vegas_session_run(session));
  CHECK(vegas_sequence_tokens(session, seq, tokens, MAX_TOKENS, &n));
  info->struct_size = sizeof *info;
  CHECK(vegas_sequence_get_info(session, seq, info));
  stats->struct_size = sizeof *stats;
  CHECK(vegas_session_get_stats(session, stats));
  vegas_session_free(session);
  return n;
}

int main(int argc, char **argv) {
  const char *dir = argc > 1 ? argv[1] : "models/vegas-code-22m";
  vegas_model_options mo;
  vegas_model *model = NULL;
  vegas_model_info mi;
  vegas_session_options so;
  vegas_select_policy policy;
  recent_half state;
  vegas_sequence_info info;
  vegas_session_stats stats;
  int32_t prompt[2048], vanilla[MAX_TOKENS], vegas_tokens[MAX_TOKENS];
  size_t n_prompt = 0, n_vanilla, n_vegas, i;

  vegas_model_options_init(&mo);
  mo.backend = VEGAS_BACKEND_CPU;
  CHECK(vegas_model_load(dir, &mo, &model));
  mi.struct_size = sizeof mi;
  CHECK(vegas_model_get_info(model, &mi));
  CHECK(vegas_tokenize(vegas_model_tokenizer(model), kPrompt, strlen(kPrompt), NULL, prompt,
                       sizeof prompt / sizeof prompt[0], &n_prompt));

  n_vanilla = generate(model, NULL, prompt, n_prompt, vanilla, &info, &stats);
  EXPECT(n_vanilla == MAX_TOKENS);

  memset(&state, 0, sizeof state);
  state.n_layers = mi.n_layers;
  state.n_prompt = (int32_t)n_prompt;
  state.reset_seq = -1;
  memset(&policy, 0, sizeof policy);
  policy.struct_size = sizeof policy;
  policy.user_data = &state;
  policy.select = recent_half_select;
  policy.reset = recent_half_reset;
  policy.destroy = recent_half_destroy;
  vegas_session_options_init(&so);
  so.mode = VEGAS_MODE_VEGAS;
  so.policy = "user";
  so.select_policy = &policy;
  so.gamma = 6;
  so.min_tokens = 16; /* the budget only informs the policy; it keeps half anyway */
  n_vegas = generate(model, &so, prompt, n_prompt, vegas_tokens, &info, &stats);

  EXPECT(n_vegas == n_vanilla);
  for (i = 0; i < n_vegas && i < n_vanilla; ++i) {
    if (vegas_tokens[i] != vanilla[i]) {
      fprintf(stderr, "token %u differs: vegas %d, vanilla %d\n", (unsigned)i, (int)vegas_tokens[i],
              (int)vanilla[i]);
      failures++;
      break;
    }
  }
  EXPECT(info.status == VEGAS_OK);
  EXPECT(info.rounds > 0 && stats.rounds == info.rounds);
  EXPECT(state.bad_inputs == 0);
  EXPECT(state.calls == (int32_t)info.rounds * mi.n_layers);
  EXPECT(state.resets == 1 && state.reset_seq == 0);
  EXPECT(state.destroys == 1);
  EXPECT(fabs(info.tokens_per_round - (double)stats.committed / (double)stats.rounds) < 1e-12);
  printf(
      "user policy (recent half): %u prompt tokens, %d select calls, tau %.2f, %lld of %lld "
      "drafts accepted\n",
      (unsigned)n_prompt, (int)state.calls, info.tokens_per_round, (long long)info.accepted,
      (long long)info.drafted);
  vegas_model_free(model);
  if (failures != 0) {
    fprintf(stderr, "%d failure(s)\n", failures);
    return 1;
  }
  return 0;
}

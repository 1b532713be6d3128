/* Proves the struct_size contract of vegas.h ("Structs that grow") from the
 * caller's side of the ABI:
 *  - an OLDER caller (a struct shorter than the library's, followed by canary
 *    bytes): the *_init_sized functions and the output getters never write
 *    past the caller's size, at every size from 0 to past the library's; the
 *    fields inside get the library's defaults / values; input structs are read
 *    only as far as struct_size (a field past it, even an invalid one, is
 *    ignored and its default used);
 *  - a NEWER caller (a struct with unknown trailing fields): init_sized zeroes
 *    them and such a struct is accepted; a non-zero unknown field fails with
 *    VEGAS_ERR_UNSUPPORTED and changes nothing; outputs zero the unknown bytes
 *    and keep the caller's struct_size. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "vegas.h"

#define CANARY 0xA5
#define PAST 64 /* canary bytes checked past the library's struct */

static int g_failures = 0;
static int g_checks = 0;

static void expect_true(int cond, const char *what, size_t size) {
  g_checks++;
  if (!cond) {
    fprintf(stderr, "FAIL %s (size %u): %s\n", what, (unsigned)size, vegas_last_error());
    g_failures++;
  }
}

/* Caller memory: aligned for every field, large enough for any struct + PAST. */
typedef union block {
  uint64_t align;
  unsigned char bytes[1024];
} block;

static void fill(block *b, unsigned char value) {
  memset(b->bytes, value, sizeof b->bytes);
}

static int all_equal(const block *b, size_t from, size_t to, unsigned char value) {
  size_t i;
  for (i = from; i < to; ++i)
    if (b->bytes[i] != value) return 0;
  return 1;
}

static uint32_t struct_size_of(const block *b) {
  uint32_t size;
  memcpy(&size, b->bytes, sizeof size);
  return size;
}

/* One init_sized function, type-erased, with its library struct size. */
typedef void (*init_fn)(void *options, size_t size);
typedef struct init_case {
  const char *name;
  init_fn init;
  size_t size; /* sizeof the struct in the vegas.h this test is built with */
} init_case;

/* Wrappers rather than casts: a function must be called through its own type. */
static void init_tokenize(void *o, size_t n) {
  vegas_tokenize_options_init_sized(o, n);
}
static void init_model(void *o, size_t n) {
  vegas_model_options_init_sized(o, n);
}
static void init_session(void *o, size_t n) {
  vegas_session_options_init_sized(o, n);
}
static void init_sampling(void *o, size_t n) {
  vegas_sampling_options_init_sized(o, n);
}
static void init_request(void *o, size_t n) {
  vegas_request_init_sized(o, n);
}
static void init_generate(void *o, size_t n) {
  vegas_generate_options_init_sized(o, n);
}

/* Every size from 0 to past the library's struct: nothing is written past the
 * caller's size, struct_size says the caller's size, the bytes the caller's
 * struct shares with the library's hold the defaults, and bytes past the
 * library's struct (a newer caller's fields) are zeroed. */
static void check_init_sizes(const init_case *c) {
  block full, b;
  size_t size;
  fill(&full, 0);
  c->init(full.bytes, c->size);
  expect_true(struct_size_of(&full) == c->size, c->name, c->size);
  for (size = 0; size <= c->size + PAST; ++size) {
    const size_t known = size < c->size ? size : c->size;
    fill(&b, CANARY);
    c->init(b.bytes, size);
    if (size < sizeof(uint32_t)) {
      expect_true(all_equal(&b, 0, sizeof b.bytes, CANARY), "init of a tiny size writes nothing",
                  size);
      continue;
    }
    expect_true(struct_size_of(&b) == size, "init sets struct_size to the caller's size", size);
    expect_true(memcmp(b.bytes + 4, full.bytes + 4, known - 4) == 0,
                "init writes the defaults within the caller's size", size);
    expect_true(all_equal(&b, c->size, size, 0), "init zeroes a newer caller's unknown fields",
                size);
    expect_true(all_equal(&b, size, sizeof b.bytes, CANARY), "init writes nothing past the size",
                size);
  }
}

/* One output getter, type-erased. */
typedef vegas_status (*get_fn)(void *ctx, void *out);
typedef struct get_case {
  const char *name;
  get_fn get;
  void *ctx;
  size_t size;
} get_case;

typedef struct session_ref {
  vegas_session *session;
  int32_t seq;
} session_ref;

static vegas_status get_model_info(void *ctx, void *out) {
  return vegas_model_get_info((const vegas_model *)ctx, out);
}
static vegas_status get_special_tokens(void *ctx, void *out) {
  return vegas_tokenizer_special_tokens((const vegas_tokenizer *)ctx, out);
}
static vegas_status get_session_stats(void *ctx, void *out) {
  return vegas_session_get_stats(((session_ref *)ctx)->session, out);
}
static vegas_status get_sequence_info(void *ctx, void *out) {
  const session_ref *r = (const session_ref *)ctx;
  return vegas_sequence_get_info(r->session, r->seq, out);
}

/* Every struct_size from 8 to past the library's struct: the getter fills the
 * bytes it shares with the full answer, zeroes bytes past its struct, keeps
 * struct_size and writes nothing past it. Sizes below 8 fail untouched. */
static void check_get_sizes(const get_case *c) {
  block full, b;
  uint32_t size;
  fill(&full, 0);
  memcpy(full.bytes, &(uint32_t){(uint32_t)c->size}, sizeof(uint32_t));
  expect_true(c->get(c->ctx, full.bytes) == VEGAS_OK, c->name, c->size);
  for (size = 0; size <= c->size + PAST; ++size) {
    const size_t known = size < c->size ? size : c->size;
    fill(&b, CANARY);
    memcpy(b.bytes, &size, sizeof size);
    if (size < 8) {
      expect_true(c->get(c->ctx, b.bytes) == VEGAS_ERR_STRUCT_SIZE, "tiny struct_size refused",
                  size);
      expect_true(all_equal(&b, 4, sizeof b.bytes, CANARY), "refused output untouched", size);
      continue;
    }
    expect_true(c->get(c->ctx, b.bytes) == VEGAS_OK, c->name, size);
    expect_true(struct_size_of(&b) == size, "getter keeps the caller's struct_size", size);
    expect_true(memcmp(b.bytes + 4, full.bytes + 4, known - 4) == 0,
                "getter fills the caller's part", size);
    expect_true(all_equal(&b, c->size, size, 0), "getter zeroes unknown trailing bytes", size);
    expect_true(all_equal(&b, size, sizeof b.bytes, CANARY), "getter writes nothing past the size",
                size);
  }
}

static int32_t select_nothing(const vegas_select_input *in, int32_t *out, int32_t cap, void *u) {
  (void)in;
  (void)out;
  (void)cap;
  (void)u;
  return 0;
}

/* Input structs from an older and a newer caller. */
static void check_inputs(vegas_model *model, const int32_t *prompt, size_t n_prompt) {
  vegas_session *s = NULL;
  session_ref ref;
  block b;
  int32_t ids[16];
  size_t n = 0;
  int32_t seq = -1;
  vegas_request *req;
  struct {
    vegas_session_options base;
    uint64_t future[4];
  } newer;
  struct {
    vegas_select_policy base;
    uint64_t future[2];
  } newer_policy;

  /* Older session options (no `schedule`): the invalid value lying past
   * struct_size is never read. With the full size it is refused. */
  fill(&b, CANARY);
  vegas_session_options_init_sized((vegas_session_options *)b.bytes,
                                   offsetof(vegas_session_options, schedule));
  ((vegas_session_options *)b.bytes)->kv_bytes = 4u << 20;
  expect_true(vegas_session_create(model, (vegas_session_options *)b.bytes, &s) == VEGAS_OK,
              "older session_options: fields past struct_size are not read",
              offsetof(vegas_session_options, schedule));
  vegas_session_free(s);
  s = NULL;
  ((vegas_session_options *)b.bytes)->struct_size = sizeof(vegas_session_options);
  expect_true(vegas_session_create(model, (vegas_session_options *)b.bytes, &s) ==
                      VEGAS_ERR_INVALID_ARGUMENT &&
                  s == NULL,
              "the same struct at full size has its (invalid) schedule read",
              sizeof(vegas_session_options));

  /* Older request: n_stop_ids past struct_size would need stop_ids != NULL. */
  expect_true(vegas_session_create(model, NULL, &s) == VEGAS_OK, "session", 0);
  fill(&b, 0);
  req = (vegas_request *)b.bytes;
  vegas_request_init_sized(req, offsetof(vegas_request, stop_ids));
  req->prompt = prompt;
  req->n_prompt = n_prompt;
  req->max_tokens = 4;
  req->n_stop_ids = 5; /* past struct_size: must not be read */
  expect_true(vegas_session_submit(s, req, &seq) == VEGAS_OK && seq >= 0,
              "older request: n_stop_ids past struct_size is not read",
              offsetof(vegas_request, stop_ids));
  expect_true(vegas_session_run(s) == VEGAS_OK, "run", 0);
  expect_true(vegas_sequence_tokens(s, seq, ids, 16, &n) == VEGAS_OK && n == 4,
              "older request generates max_tokens", n);

  /* Newer session options and policy: zero unknown fields accepted, a
   * non-zero one refused with nothing created. */
  vegas_session_options_init_sized(&newer.base, sizeof newer);
  expect_true(newer.base.struct_size == sizeof newer, "newer struct_size", sizeof newer);
  newer.base.kv_bytes = 4u << 20;
  {
    vegas_session *t = NULL;
    expect_true(vegas_session_create(model, &newer.base, &t) == VEGAS_OK,
                "newer session_options with zero unknown fields", sizeof newer);
    vegas_session_free(t);
    t = NULL;
    newer.future[2] = 1;
    expect_true(vegas_session_create(model, &newer.base, &t) == VEGAS_ERR_UNSUPPORTED && t == NULL,
                "newer session_options with a non-zero unknown field", sizeof newer);
    expect_true(strstr(vegas_last_error(), "vegas_session_options") != NULL,
                "the message names the struct", sizeof newer);
    newer.future[2] = 0;

    memset(&newer_policy, 0, sizeof newer_policy);
    newer_policy.base.struct_size = sizeof newer_policy;
    newer_policy.base.select = select_nothing;
    newer.base.mode = VEGAS_MODE_VEGAS;
    newer.base.policy = "user";
    newer.base.select_policy = &newer_policy.base;
    expect_true(vegas_session_create(model, &newer.base, &t) == VEGAS_OK,
                "newer select_policy with zero unknown fields", sizeof newer_policy);
    vegas_session_free(t);
    t = NULL;
    newer_policy.future[1] = 3;
    expect_true(vegas_session_create(model, &newer.base, &t) == VEGAS_ERR_UNSUPPORTED && t == NULL,
                "newer select_policy with a non-zero unknown field", sizeof newer_policy);
  }

  ref.session = s;
  ref.seq = seq;
  {
    const get_case gets[] = {
        {"vegas_model_info", get_model_info, model, sizeof(vegas_model_info)},
        {"vegas_special_tokens", get_special_tokens, (void *)vegas_model_tokenizer(model),
         sizeof(vegas_special_tokens)},
        {"vegas_session_stats", get_session_stats, &ref, sizeof(vegas_session_stats)},
        {"vegas_sequence_info", get_sequence_info, &ref, sizeof(vegas_sequence_info)},
    };
    size_t i;
    for (i = 0; i < sizeof gets / sizeof gets[0]; ++i) check_get_sizes(&gets[i]);
  }
  vegas_session_free(s);
}

int main(int argc, char **argv) {
  const char *dir = argc > 1 ? argv[1] : "models/vegas-code-22m";
  const init_case inits[] = {
      {"vegas_tokenize_options", init_tokenize, sizeof(vegas_tokenize_options)},
      {"vegas_model_options", init_model, sizeof(vegas_model_options)},
      {"vegas_session_options", init_session, sizeof(vegas_session_options)},
      {"vegas_sampling_options", init_sampling, sizeof(vegas_sampling_options)},
      {"vegas_request", init_request, sizeof(vegas_request)},
      {"vegas_generate_options", init_generate, sizeof(vegas_generate_options)},
  };
  vegas_model_options mo;
  vegas_model *model = NULL;
  int32_t prompt[64];
  size_t n_prompt = 0, i;

  for (i = 0; i < sizeof inits / sizeof inits[0]; ++i) check_init_sizes(&inits[i]);
  vegas_session_options_init_sized(NULL, sizeof(vegas_session_options)); /* NULL: no-op */

  vegas_model_options_init(&mo);
  mo.backend = VEGAS_BACKEND_CPU;
  mo.n_threads = 1;
  if (vegas_model_load(dir, &mo, &model) != VEGAS_OK) {
    fprintf(stderr, "cannot load %s: %s\n", dir, vegas_last_error());
    return 1;
  }
  if (vegas_tokenize(vegas_model_tokenizer(model), "def f(x):", 9, NULL, prompt, 64, &n_prompt) !=
      VEGAS_OK) {
    fprintf(stderr, "tokenize: %s\n", vegas_last_error());
    return 1;
  }
  check_inputs(model, prompt, n_prompt);
  vegas_model_free(model);

  printf("struct_size_contract: %d checks, %d failures\n", g_checks, g_failures);
  return g_failures == 0 ? 0 : 1;
}

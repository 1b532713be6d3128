/* Proves that a C99 program written against vegas.h alone can load the
 * embedded model, submit two sequences into one session, and stream both:
 * each callback's pieces concatenate to the sequence's final text, both
 * sequences produce tokens, and they are decoded in the same steps (batched). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vegas.h"

#define CHECK(call)                                                                     \
  do {                                                                                  \
    vegas_status s_ = (call);                                                           \
    if (s_ != VEGAS_OK) {                                                               \
      fprintf(stderr, "%s:%d: %s -> %s: %s\n", __FILE__, __LINE__, #call,               \
              vegas_status_name(s_), vegas_last_error());                               \
      exit(1);                                                                          \
    }                                                                                   \
  } while (0)

typedef struct stream {
  char text[8192];
  size_t len;
  int32_t n_tokens;
  int32_t last_step; /* step number of the latest token */
} stream;

static int32_t g_step = 0;

static int32_t on_token(int32_t seq_id, int32_t token, const char *piece, size_t len, void *user) {
  stream *s = (stream *)user;
  (void)seq_id;
  (void)token;
  if (s->len + len < sizeof s->text) {
    memcpy(s->text + s->len, piece, len);
    s->len += len;
  }
  s->n_tokens++;
  s->last_step = g_step;
  return 0;
}

static void tokenize(const vegas_tokenizer *tok, const char *text, int32_t *ids, size_t cap,
                     size_t *n) {
  CHECK(vegas_tokenize(tok, text, strlen(text), NULL, ids, cap, n));
}

int main(int argc, char **argv) {
  const char *dir = argc > 1 ? argv[1] : "models/vegas-code-22m";
  vegas_model_options mo;
  vegas_model *model = NULL;
  vegas_session *session = NULL;
  vegas_request req;
  int32_t ids_a[256], ids_b[256];
  size_t n_a = 0, n_b = 0;
  int32_t seq_a = -1, seq_b = -1, active = 1, steps_with_both = 0;
  stream sa, sb;
  char text[8192];
  size_t n_text = 0;

  if (vegas_version_number() != VEGAS_VERSION_NUMBER) {
    fprintf(stderr, "header/library version mismatch\n");
    return 1;
  }
  memset(&sa, 0, sizeof sa);
  memset(&sb, 0, sizeof sb);
  vegas_model_options_init(&mo);
  mo.backend = VEGAS_BACKEND_CPU;
  CHECK(vegas_model_load(dir, &mo, &model));
  tokenize(vegas_model_tokenizer(model), "import os\n\ndef list_files(path):\n", ids_a, 256, &n_a);
  tokenize(vegas_model_tokenizer(model), "class Stack:\n    def __init__(self):\n", ids_b, 256,
           &n_b);

  CHECK(vegas_session_create(model, NULL, &session));
  vegas_model_free(model); /* the session keeps the model alive */

  vegas_request_init(&req);
  req.prompt = ids_a;
  req.n_prompt = n_a;
  req.max_tokens = 24;
  req.ignore_eos = 1;
  req.on_token = on_token;
  req.user_data = &sa;
  CHECK(vegas_session_submit(session, &req, &seq_a));
  req.prompt = ids_b;
  req.n_prompt = n_b;
  req.max_tokens = 16;
  req.user_data = &sb;
  CHECK(vegas_session_submit(session, &req, &seq_b));

  while (active > 0) {
    int32_t before_a = sa.n_tokens, before_b = sb.n_tokens;
    g_step++;
    CHECK(vegas_session_step(session, &active));
    if (sa.n_tokens > before_a && sb.n_tokens > before_b) steps_with_both++;
  }
  if (sa.n_tokens != 24 || sb.n_tokens != 16) {
    fprintf(stderr, "expected 24 and 16 tokens, got %d and %d\n", sa.n_tokens, sb.n_tokens);
    return 1;
  }
  if (steps_with_both < 15) {
    fprintf(stderr, "the sequences were not decoded together (%d shared steps)\n", steps_with_both);
    return 1;
  }
  CHECK(vegas_sequence_text(session, seq_a, text, sizeof text, &n_text));
  if (n_text != sa.len || memcmp(text, sa.text, n_text) != 0) {
    fprintf(stderr, "streamed text of A differs from its final text\n");
    return 1;
  }
  CHECK(vegas_sequence_text(session, seq_b, text, sizeof text, &n_text));
  if (n_text != sb.len || memcmp(text, sb.text, n_text) != 0) {
    fprintf(stderr, "streamed text of B differs from its final text\n");
    return 1;
  }
  printf("A: %.*s\n---\nB: %.*s\n", (int)sa.len, sa.text, (int)sb.len, sb.text);
  vegas_session_free(session);
  return 0;
}

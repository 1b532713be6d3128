/* Proves a host program loads a GGUF file through the plain C ABI as it loads
 * a model directory: vegas_model_load and vegas_tokenizer_load take the path,
 * the model's tokenizer gives the ids of the directory's tokenizer.json (the
 * tiny qwen3 file carries the embedded model's tokenizer, as llama.cpp's
 * converter wrote it), and it generates; a GGUF cut short or with a wrong
 * magic is VEGAS_ERR_FORMAT with a message, not a crash.
 * argv[1]: the embedded model directory; VEGAS_GGUF_TINY_DIR: where CMake
 * unpacked tests/fixtures/gguf/tiny-models.tar.xz. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vegas.h"

static int g_failures = 0;

static void expect(vegas_status status, vegas_status want, const char *what) {
  if (status != want || (want != VEGAS_OK && vegas_last_error()[0] == '\0')) {
    fprintf(stderr, "FAIL %s: got %s, want %s (%s)\n", what, vegas_status_name(status),
            vegas_status_name(want), vegas_last_error());
    g_failures++;
  }
}

/* Writes the first `keep` bytes of `from` to `to`, the first four replaced by
 * `magic` when it is not NULL. */
static int copy_prefix(const char *from, const char *to, long keep, const char *magic) {
  FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
  char buf[65536];
  long total = 0;
  size_t n;
  if (!in || !out) return -1;
  while (total < keep && (n = fread(buf, 1, sizeof buf, in)) > 0) {
    if (total + (long)n > keep) n = (size_t)(keep - total);
    if (total == 0 && magic != NULL && n >= 4) memcpy(buf, magic, 4);
    fwrite(buf, 1, n, out);
    total += (long)n;
  }
  fclose(in);
  fclose(out);
  return 0;
}

static size_t encode(const vegas_tokenizer *tok, const char *text, int32_t *ids, size_t cap) {
  size_t n = 0;
  expect(vegas_tokenize(tok, text, strlen(text), NULL, ids, cap, &n), VEGAS_OK, "tokenize");
  return n;
}

int main(int argc, char **argv) {
  const char *dir = argc > 1 ? argv[1] : "models/vegas-code-22m";
  const char *tiny = getenv("VEGAS_GGUF_TINY_DIR");
  const char *text = "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n";
  char path[4096], cut[] = "/tmp/vegas_abi_gguf_XXXXXX";
  vegas_model *model = NULL, *bad = NULL;
  vegas_tokenizer *dir_tok = NULL, *file_tok = NULL;
  vegas_model_options mo;
  vegas_generate_options go;
  int32_t a[256], b[256], c[256];
  size_t na, nb, nc, n = 0;
  char out[512];
  int fd;
  if (tiny == NULL) {
    fprintf(stderr, "VEGAS_GGUF_TINY_DIR is not set\n");
    return 1;
  }
  snprintf(path, sizeof path, "%s/qwen3-bf16.gguf", tiny);
  vegas_model_options_init(&mo);
  mo.backend = VEGAS_BACKEND_CPU;
  expect(vegas_model_load(path, &mo, &model), VEGAS_OK, "vegas_model_load(gguf)");
  expect(vegas_tokenizer_load(dir, &dir_tok), VEGAS_OK, "vegas_tokenizer_load(dir)");
  expect(vegas_tokenizer_load(path, &file_tok), VEGAS_OK, "vegas_tokenizer_load(gguf)");
  if (model != NULL && dir_tok != NULL && file_tok != NULL) {
    na = encode(vegas_model_tokenizer(model), text, a, 256);
    nb = encode(dir_tok, text, b, 256);
    nc = encode(file_tok, text, c, 256);
    if (na == 0 || na != nb || nb != nc || memcmp(a, b, na * 4) != 0 || memcmp(b, c, nb * 4) != 0) {
      fprintf(stderr, "FAIL the GGUF tokenizers' ids differ from tokenizer.json's\n");
      g_failures++;
    }
    vegas_generate_options_init(&go);
    go.max_tokens = 8;
    expect(vegas_generate(model, "def quicksort(xs):\n", &go, out, sizeof out, &n), VEGAS_OK,
           "vegas_generate(gguf)");
  }
  fd = mkstemp(cut);
  if (fd < 0) return 1;
  close(fd);
  copy_prefix(path, cut, 100000, NULL);
  expect(vegas_model_load(cut, &mo, &bad), VEGAS_ERR_FORMAT, "a GGUF cut at 100000 bytes");
  copy_prefix(path, cut, 1L << 30, "GGUX");
  expect(vegas_model_load(cut, &mo, &bad), VEGAS_ERR_FORMAT, "a GGUF with a wrong magic");
  if (bad != NULL) {
    fprintf(stderr, "FAIL a failed load handed out a model\n");
    g_failures++;
  }
  unlink(cut);
  vegas_tokenizer_free(dir_tok);
  vegas_tokenizer_free(file_tok);
  vegas_model_free(model);
  if (g_failures == 0) printf("gguf_model: ok\n");
  return g_failures == 0 ? 0 : 1;
}

/* Proves that every error path of the ABI returns a status and a message and
 * never crashes: NULL handles and pointers, wrong struct_size, bad paths, a
 * corrupt safetensors file, token ids out of range, short buffers, a callback
 * that stops its sequence, cancellation, and a KV pool that is too small at
 * submit and that fills up mid-generation (the sequence keeps its tokens). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vegas.h"

static int g_failures = 0;
static int g_checks = 0;

/* Expects `status` == `want` and, for errors, a non-empty message. */
static void expect(vegas_status status, vegas_status want, const char *what) {
  g_checks++;
  if (status != want) {
    fprintf(stderr, "FAIL %s: got %s, want %s (%s)\n", what, vegas_status_name(status),
            vegas_status_name(want), vegas_last_error());
    g_failures++;
  } else if (want != VEGAS_OK && vegas_last_error()[0] == '\0') {
    fprintf(stderr, "FAIL %s: %s without a message\n", what, vegas_status_name(status));
    g_failures++;
  }
}

static void expect_true(int cond, const char *what) {
  g_checks++;
  if (!cond) {
    fprintf(stderr, "FAIL %s\n", what);
    g_failures++;
  }
}

static int copy_file(const char *from, const char *to, long truncate_to) {
  FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
  char buf[65536];
  long total = 0;
  size_t n;
  if (!in || !out) return -1;
  while ((n = fread(buf, 1, sizeof buf, in)) > 0) {
    if (truncate_to >= 0 && total + (long)n > truncate_to) n = (size_t)(truncate_to - total);
    fwrite(buf, 1, n, out);
    total += (long)n;
    if (truncate_to >= 0 && total >= truncate_to) break;
  }
  fclose(in);
  fclose(out);
  return 0;
}

static int32_t stop_after_three(int32_t seq, int32_t tok, const char *p, size_t n, void *user) {
  int *count = (int *)user;
  (void)seq;
  (void)tok;
  (void)p;
  (void)n;
  return ++*count >= 3;
}

static int32_t cancel_progress(float progress, void *user) {
  (void)user;
  return progress > 0.1f;
}

int main(int argc, char **argv) {
  const char *dir = argc > 1 ? argv[1] : "models/vegas-code-22m";
  char path[4096], tmpl[] = "/tmp/vegas_abi_XXXXXX", *tmp;
  vegas_model *model = NULL, *bad = NULL;
  vegas_session *session = NULL;
  vegas_model_options mo;
  vegas_session_options so;
  vegas_request req;
  vegas_sequence_info info;
  int32_t ids[64], seq = -1, active = 0, small_prompt[600], big = 0, count = 0, out_ids[4];
  size_t n = 0, need = 0;
  char text[16];
  int i;

  /* NULL everywhere. */
  expect(vegas_model_load(NULL, NULL, &model), VEGAS_ERR_INVALID_ARGUMENT, "load NULL dir");
  expect(vegas_model_load(dir, NULL, NULL), VEGAS_ERR_INVALID_ARGUMENT, "load NULL out");
  expect(vegas_session_create(NULL, NULL, &session), VEGAS_ERR_INVALID_ARGUMENT, "session NULL model");
  expect(vegas_session_step(NULL, &active), VEGAS_ERR_INVALID_ARGUMENT, "step NULL session");
  expect(vegas_session_run(NULL), VEGAS_ERR_INVALID_ARGUMENT, "run NULL session");
  expect(vegas_session_cancel(NULL, 0), VEGAS_ERR_INVALID_ARGUMENT, "cancel NULL session");
  expect(vegas_session_submit(NULL, &req, &seq), VEGAS_ERR_INVALID_ARGUMENT, "submit NULL session");
  expect(vegas_tokenize(NULL, "a", 1, NULL, ids, 64, &n), VEGAS_ERR_INVALID_ARGUMENT, "tokenize NULL");
  expect(vegas_detokenize(NULL, ids, 1, 0, text, sizeof text, &n), VEGAS_ERR_INVALID_ARGUMENT,
         "detokenize NULL");
  expect(vegas_tokenizer_load(NULL, NULL), VEGAS_ERR_INVALID_ARGUMENT, "tokenizer_load NULL");
  expect_true(vegas_model_tokenizer(NULL) == NULL, "model_tokenizer(NULL) is NULL");
  vegas_model_free(NULL);
  vegas_session_free(NULL);
  vegas_tokenizer_free(NULL);
  vegas_detokenizer_free(NULL);

  /* Bad paths and a corrupt checkpoint. */
  expect(vegas_model_load("/nonexistent/model", NULL, &model), VEGAS_ERR_IO, "load missing dir");
  expect_true(strstr(vegas_last_error(), "/nonexistent/model") != NULL, "message names the path");
  tmp = mkdtemp(tmpl);
  expect_true(tmp != NULL, "mkdtemp");
  {
    const char *files[] = {"config.json", "tokenizer.json", "tokenizer_config.json"};
    char from[4096];
    for (i = 0; i < 3; i++) {
      snprintf(from, sizeof from, "%s/%s", dir, files[i]);
      snprintf(path, sizeof path, "%s/%s", tmp, files[i]);
      copy_file(from, path, -1);
    }
    snprintf(from, sizeof from, "%s/model.safetensors", dir);
    snprintf(path, sizeof path, "%s/model.safetensors", tmp);
    copy_file(from, path, 100000); /* header intact, tensor data cut off */
  }
  expect(vegas_model_load(tmp, NULL, &bad), VEGAS_ERR_FORMAT, "load truncated safetensors");
  expect_true(bad == NULL, "out untouched on error");
  expect_true(strstr(vegas_last_error(), "model.safetensors") != NULL, "message names the file");
  remove(path);
  snprintf(path, sizeof path, "%s/config.json", tmp);
  remove(path);
  snprintf(path, sizeof path, "%s/tokenizer.json", tmp);
  remove(path);
  snprintf(path, sizeof path, "%s/tokenizer_config.json", tmp);
  remove(path);
  rmdir(tmp);

  /* Option structs with a broken struct_size. */
  vegas_model_options_init(&mo);
  mo.struct_size = 2;
  expect(vegas_model_load(dir, &mo, &model), VEGAS_ERR_STRUCT_SIZE, "struct_size too small");
  vegas_model_options_init(&mo);
  mo.backend = 42;
  expect(vegas_model_load(dir, &mo, &model), VEGAS_ERR_INVALID_ARGUMENT, "unknown backend");
  vegas_model_options_init(&mo);
  mo.progress = cancel_progress;
  expect(vegas_model_load(dir, &mo, &model), VEGAS_ERR_CANCELLED, "progress callback cancels");

  vegas_model_options_init(&mo);
  mo.backend = VEGAS_BACKEND_CPU;
  {
    /* Synthetic models exist only on CUDA: the CPU backend is refused, with
     * NOT_BUILT instead when the library has no CUDA at all. */
    char config_path[4096];
    vegas_model *syn = NULL;
    vegas_status st;
    snprintf(config_path, sizeof config_path, "%s/config.json", dir);
    expect(vegas_model_load_synthetic(NULL, 1, NULL, &syn), VEGAS_ERR_INVALID_ARGUMENT,
           "synthetic NULL config");
    st = vegas_model_load_synthetic(config_path, 1, &mo, &syn);
    expect_true(st == VEGAS_ERR_UNSUPPORTED || st == VEGAS_ERR_NOT_BUILT,
                "synthetic on the CPU backend is UNSUPPORTED or NOT_BUILT");
    expect_true(syn == NULL, "no synthetic model on error");
  }
  expect(vegas_model_load(dir, &mo, &model), VEGAS_OK, "load");
  if (model == NULL) return 1;

  /* Tokenizer errors. */
  expect(vegas_tokenize(vegas_model_tokenizer(model), "hello world, hello", 18, NULL, ids, 1, &n),
         VEGAS_ERR_BUFFER_TOO_SMALL, "tokenize short buffer");
  expect_true(n > 1, "tokenize reports the needed size");
  ids[0] = 99999;
  expect(vegas_detokenize(vegas_model_tokenizer(model), ids, 1, 0, text, sizeof text, &n),
         VEGAS_ERR_TOKEN_OUT_OF_RANGE, "detokenize bad id");

  /* Session errors. */
  vegas_session_options_init(&so);
  so.page_size = 0;
  expect(vegas_session_create(model, &so, &session), VEGAS_ERR_INVALID_ARGUMENT, "page_size 0");
  vegas_session_options_init(&so);
  so.kv_bytes = 100;
  expect(vegas_session_create(model, &so, &session), VEGAS_ERR_INVALID_ARGUMENT, "kv_bytes < page");
  vegas_session_options_init(&so);
  so.mode = 7;
  expect(vegas_session_create(model, &so, &session), VEGAS_ERR_INVALID_ARGUMENT, "unknown mode");

  /* A pool of 512 tokens. */
  vegas_session_options_init(&so);
  {
    vegas_model_info mi;
    mi.struct_size = sizeof mi;
    double bw = 0.0;
    expect(vegas_model_get_info(model, &mi), VEGAS_OK, "model info");
    /* The floor's bandwidth: NULL arguments are refused, a real measurement is
     * a positive rate well above 100 MB/s on any machine this runs on. */
    expect(vegas_model_measure_bandwidth(NULL, &bw), VEGAS_ERR_INVALID_ARGUMENT, "bandwidth NULL model");
    expect(vegas_model_measure_bandwidth(model, NULL), VEGAS_ERR_INVALID_ARGUMENT, "bandwidth NULL out");
    expect(vegas_model_measure_bandwidth(model, &bw), VEGAS_OK, "measure bandwidth");
    expect_true(bw > 1e8, "measured copy bandwidth above 100 MB/s");
    so.kv_bytes = 512u * mi.kv_bytes_per_token; /* 32 pages of 16 tokens */
  }
  expect(vegas_session_create(model, &so, &session), VEGAS_OK, "create small session");
  if (session == NULL) return 1;
  vegas_request_init(&req);
  expect(vegas_session_submit(session, &req, &seq), VEGAS_ERR_INVALID_ARGUMENT, "empty prompt");
  ids[0] = 10;
  ids[1] = 8192;
  req.prompt = ids;
  req.n_prompt = 2;
  expect(vegas_session_submit(session, &req, &seq), VEGAS_ERR_TOKEN_OUT_OF_RANGE, "prompt id 8192");
  ids[1] = -1;
  expect(vegas_session_submit(session, &req, &seq), VEGAS_ERR_TOKEN_OUT_OF_RANGE, "prompt id -1");
  for (i = 0; i < 600; i++) small_prompt[i] = 100 + i % 50;
  req.prompt = small_prompt;
  req.n_prompt = 600;
  expect(vegas_session_submit(session, &req, &seq), VEGAS_ERR_KV_FULL, "prompt larger than pool");
  req.struct_size = 3;
  expect(vegas_session_submit(session, &req, &seq), VEGAS_ERR_STRUCT_SIZE, "request struct_size");
  vegas_request_init(&req);
  expect(vegas_session_submit(session, &req, NULL), VEGAS_ERR_INVALID_ARGUMENT, "NULL seq_id");
  expect(vegas_session_cancel(session, 12345), VEGAS_ERR_NOT_FOUND, "cancel unknown sequence");
  info.struct_size = sizeof info;
  expect(vegas_sequence_get_info(session, 777, &info), VEGAS_ERR_NOT_FOUND, "info unknown sequence");

  /* The pool fills up mid-generation: the sequence stops with KV_FULL and keeps its tokens. */
  vegas_request_init(&req);
  req.prompt = small_prompt;
  req.n_prompt = 480;
  req.max_tokens = 100;
  req.ignore_eos = 1;
  expect(vegas_session_submit(session, &req, &big), VEGAS_OK, "submit filling prompt");
  expect(vegas_session_run(session), VEGAS_OK, "run until the pool is full");
  info.struct_size = sizeof info;
  expect(vegas_sequence_get_info(session, big, &info), VEGAS_OK, "info");
  expect_true(info.finish_reason == VEGAS_FINISH_ERROR && info.status == VEGAS_ERR_KV_FULL,
              "finish reason ERROR with status KV_FULL");
  expect_true(info.n_generated >= 31 && info.n_generated <= 33, "kept the tokens that fit (~32)");
  expect(vegas_sequence_tokens(session, big, out_ids, 4, &need), VEGAS_ERR_BUFFER_TOO_SMALL,
         "tokens short buffer");
  expect_true(need == (size_t)info.n_generated, "needed size reported");
  expect(vegas_sequence_release(session, big), VEGAS_OK, "release");

  /* A callback that stops its sequence; a cancelled sequence. */
  req.n_prompt = 20;
  req.max_tokens = 50;
  req.on_token = stop_after_three;
  req.user_data = &count;
  expect(vegas_session_submit(session, &req, &seq), VEGAS_OK, "submit with stopping callback");
  expect(vegas_session_run(session), VEGAS_OK, "run");
  expect(vegas_sequence_get_info(session, seq, &info), VEGAS_OK, "info");
  expect_true(info.finish_reason == VEGAS_FINISH_CALLBACK && info.n_generated == 3,
              "callback stopped after 3 tokens");
  req.on_token = NULL;
  expect(vegas_session_submit(session, &req, &seq), VEGAS_OK, "submit to cancel");
  expect(vegas_session_step(session, &active), VEGAS_OK, "one step");
  expect(vegas_session_cancel(session, seq), VEGAS_OK, "cancel");
  expect(vegas_session_run(session), VEGAS_OK, "run after cancel");
  expect(vegas_sequence_get_info(session, seq, &info), VEGAS_OK, "info");
  expect_true(info.finish_reason == VEGAS_FINISH_CANCELLED, "finish reason CANCELLED");

  vegas_session_free(session);
  vegas_model_free(model);
  printf("%d checks, %d failures\n", g_checks, g_failures);
  return g_failures == 0 ? 0 : 1;
}

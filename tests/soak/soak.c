/* Soak run (not part of ctest; run by hand or under LeakSanitizer with the
 * ASan build): N short requests (default 10000) through ONE session on the CPU
 * with random prompts, sampling options, stop strings, token callbacks that
 * stop, and cancellations between steps. Every call must succeed (or fail with
 * the one status the case provokes), and the resident memory after the run
 * must stay within 32 MiB of what it was after a warm-up of 200 requests (in
 * an ASan build, LeakSanitizer checks for leaks at exit instead).
 * Usage: soak <model_dir> [n_requests] [seed] */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vegas.h"

static unsigned long long g_rng = 88172645463325252ull;
static unsigned rnd(unsigned n) { /* xorshift64, uniform enough for a soak */
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return (unsigned)(g_rng % n);
}

static long rss_kib(void) {
  long pages = 0, resident = 0;
  FILE *f = fopen("/proc/self/statm", "r");
  if (f == NULL) return -1;
  if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = -1;
  fclose(f);
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static int32_t maybe_stop(int32_t seq, int32_t tok, const char *p, size_t n, void *user) {
  (void)seq;
  (void)tok;
  (void)p;
  (void)n;
  (void)user;
  return rnd(8) == 0;
}

#define CHECK(call)                                                               \
  do {                                                                            \
    vegas_status s_ = (call);                                                     \
    if (s_ != VEGAS_OK) {                                                         \
      fprintf(stderr, "soak: %s failed: %s (%s)\n", #call, vegas_status_name(s_), \
              vegas_last_error());                                                \
      exit(1);                                                                    \
    }                                                                             \
  } while (0)

int main(int argc, char **argv) {
  const char *dir = argc > 1 ? argv[1] : "models/vegas-code-22m";
  const long total = argc > 2 ? atol(argv[2]) : 10000;
  const char *stops[] = {"\n", "return", "))"};
  vegas_model_options mo;
  vegas_session_options so;
  vegas_model *model = NULL;
  vegas_session *session = NULL;
  long done = 0, rss_start = 0, rss_end = 0, cancelled = 0, by_callback = 0;
  int32_t vocab;
  if (argc > 3) g_rng ^= (unsigned long long)atoll(argv[3]) * 0x9E3779B97F4A7C15ull;
  vegas_model_options_init(&mo);
  mo.backend = VEGAS_BACKEND_CPU;
  CHECK(vegas_model_load(dir, &mo, &model));
  vocab = vegas_tokenizer_vocab_size(vegas_model_tokenizer(model));
  vegas_session_options_init(&so);
  so.kv_bytes = 32u << 20;
  so.max_batch = 8;
  CHECK(vegas_session_create(model, &so, &session));
  while (done < total) {
    int32_t seqs[4], prompts[4][16], n_batch = 1 + (int32_t)rnd(4), i, active = 1;
    vegas_sampling_options sp[4];
    for (i = 0; i < n_batch; ++i) {
      vegas_request req;
      size_t j, len = 1 + rnd(16);
      for (j = 0; j < len; ++j) prompts[i][j] = (int32_t)rnd((unsigned)vocab);
      vegas_sampling_options_init(&sp[i]);
      sp[i].temperature = (float)rnd(150) / 100.0f;
      sp[i].top_k = (int32_t)rnd(50);
      sp[i].top_p = 0.5f + (float)rnd(51) / 100.0f;
      sp[i].repetition_penalty = 1.0f + (float)rnd(3) / 10.0f;
      sp[i].seed = rnd(1000000);
      vegas_request_init(&req);
      req.prompt = prompts[i];
      req.n_prompt = len;
      req.sampling = &sp[i];
      req.max_tokens = 1 + (int32_t)rnd(8);
      req.ignore_eos = (int32_t)rnd(2);
      if (rnd(3) == 0) {
        req.stop_strings = stops;
        req.n_stop_strings = 1 + rnd(3);
      }
      if (rnd(4) == 0) req.on_token = maybe_stop;
      CHECK(vegas_session_submit(session, &req, &seqs[i]));
    }
    while (active > 0) {
      if (rnd(10) == 0) CHECK(vegas_session_cancel(session, seqs[rnd((unsigned)n_batch)]));
      CHECK(vegas_session_step(session, &active));
    }
    for (i = 0; i < n_batch; ++i) {
      vegas_sequence_info info;
      char text[512];
      size_t n = 0;
      info.struct_size = sizeof info;
      CHECK(vegas_sequence_get_info(session, seqs[i], &info));
      if (info.finish_reason == VEGAS_FINISH_ERROR || info.finish_reason == VEGAS_FINISH_NONE) {
        fprintf(stderr, "soak: request %ld finished with %d (%s)\n", done, info.finish_reason,
                vegas_status_name((vegas_status)info.status));
        return 1;
      }
      cancelled += info.finish_reason == VEGAS_FINISH_CANCELLED;
      by_callback += info.finish_reason == VEGAS_FINISH_CALLBACK;
      CHECK(vegas_sequence_text(session, seqs[i], text, sizeof text, &n));
      CHECK(vegas_sequence_release(session, seqs[i]));
      if (++done == 200) rss_start = rss_kib();
    }
  }
  rss_end = rss_kib();
  printf(
      "soak: %ld requests (%ld cancelled, %ld stopped by callback); RSS after warm-up %ld KiB, "
      "at end %ld KiB\n",
      done, cancelled, by_callback, rss_start, rss_end);
  vegas_session_free(session);
  vegas_model_free(model);
#if defined(__SANITIZE_ADDRESS__)
  /* ASan's quarantine keeps freed memory resident: RSS says nothing here;
   * LeakSanitizer checks for leaks at exit instead. */
  rss_start = rss_end;
#endif
  if (rss_start > 0 && rss_end - rss_start > 32 * 1024) {
    fprintf(stderr, "soak: resident memory grew by %ld KiB\n", rss_end - rss_start);
    return 1;
  }
  return 0;
}

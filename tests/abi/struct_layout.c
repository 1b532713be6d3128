/* Pins the layout of every public struct of vegas.h on x86-64 (LP64): sizeof and
 * offsetof of every field. A field inserted, removed, reordered or retyped changes
 * a number here and fails this test, so an accidental ABI break cannot go
 * unnoticed; an intended one (fields are only ever appended) updates the
 * numbers in the same commit. The values were measured once (gcc, x86-64) and
 * written down here as literals. */
#include <stddef.h>
#include <stdio.h>

#include "vegas.h"

static int g_failures = 0;

static void pin(const char *what, size_t got, size_t want) {
  if (got != want) {
    fprintf(stderr, "FAIL %s: %lu, pinned %lu\n", what, (unsigned long)got, (unsigned long)want);
    g_failures++;
  }
}

#define PIN_SIZE(type, size) pin("sizeof(" #type ")", sizeof(type), size)
#define PIN_OFFSET(type, field, offset) \
  pin("offsetof(" #type ", " #field ")", offsetof(type, field), offset)

int main(void) {
#if !defined(__x86_64__) || !defined(__LP64__)
  printf("struct_layout: the pinned values are for x86-64 LP64; nothing checked here\n");
  return 0;
#else
  /* Enums are passed and stored as 32-bit integers. */
  PIN_SIZE(vegas_status, 4);
  PIN_SIZE(vegas_backend_kind, 4);
  PIN_SIZE(vegas_decode_mode, 4);
  PIN_SIZE(vegas_finish_reason, 4);
  PIN_SIZE(vegas_score_kind, 4);

  PIN_SIZE(vegas_tokenize_options, 12);
  PIN_OFFSET(vegas_tokenize_options, struct_size, 0);
  PIN_OFFSET(vegas_tokenize_options, parse_special, 4);
  PIN_OFFSET(vegas_tokenize_options, add_special, 8);
  PIN_SIZE(vegas_special_tokens, 44);
  PIN_OFFSET(vegas_special_tokens, struct_size, 0);
  PIN_OFFSET(vegas_special_tokens, bos, 4);
  PIN_OFFSET(vegas_special_tokens, eos, 8);
  PIN_OFFSET(vegas_special_tokens, pad, 12);
  PIN_OFFSET(vegas_special_tokens, fim_prefix, 16);
  PIN_OFFSET(vegas_special_tokens, fim_middle, 20);
  PIN_OFFSET(vegas_special_tokens, fim_suffix, 24);
  PIN_OFFSET(vegas_special_tokens, fim_pad, 28);
  PIN_OFFSET(vegas_special_tokens, file_sep, 32);
  PIN_OFFSET(vegas_special_tokens, im_start, 36);
  PIN_OFFSET(vegas_special_tokens, im_end, 40);
  PIN_SIZE(vegas_model_options, 32);
  PIN_OFFSET(vegas_model_options, struct_size, 0);
  PIN_OFFSET(vegas_model_options, backend, 4);
  PIN_OFFSET(vegas_model_options, device_index, 8);
  PIN_OFFSET(vegas_model_options, n_threads, 12);
  PIN_OFFSET(vegas_model_options, progress, 16);
  PIN_OFFSET(vegas_model_options, progress_user_data, 24);
  PIN_SIZE(vegas_model_info, 128);
  PIN_OFFSET(vegas_model_info, struct_size, 0);
  PIN_OFFSET(vegas_model_info, backend, 4);
  PIN_OFFSET(vegas_model_info, n_layers, 8);
  PIN_OFFSET(vegas_model_info, hidden_size, 12);
  PIN_OFFSET(vegas_model_info, n_heads, 16);
  PIN_OFFSET(vegas_model_info, n_kv_heads, 20);
  PIN_OFFSET(vegas_model_info, head_dim, 24);
  PIN_OFFSET(vegas_model_info, vocab_size, 28);
  PIN_OFFSET(vegas_model_info, max_context, 32);
  PIN_OFFSET(vegas_model_info, n_params, 40);
  PIN_OFFSET(vegas_model_info, weight_bytes, 48);
  PIN_OFFSET(vegas_model_info, kv_bytes_per_token, 56);
  PIN_OFFSET(vegas_model_info, architecture, 64);
  PIN_SIZE(vegas_session_options, 128);
  PIN_OFFSET(vegas_session_options, struct_size, 0);
  PIN_OFFSET(vegas_session_options, kv_bytes, 8);
  PIN_OFFSET(vegas_session_options, page_size, 16);
  PIN_OFFSET(vegas_session_options, max_batch, 20);
  PIN_OFFSET(vegas_session_options, prefill_chunk, 24);
  PIN_OFFSET(vegas_session_options, mode, 28);
  PIN_OFFSET(vegas_session_options, policy, 32);
  PIN_OFFSET(vegas_session_options, gamma, 40);
  PIN_OFFSET(vegas_session_options, ratio, 44);
  PIN_OFFSET(vegas_session_options, min_tokens, 48);
  PIN_OFFSET(vegas_session_options, window_share, 52);
  PIN_OFFSET(vegas_session_options, score_kind, 56);
  PIN_OFFSET(vegas_session_options, sink, 60);
  PIN_OFFSET(vegas_session_options, top_p_mass, 64);
  PIN_OFFSET(vegas_session_options, select_policy, 72);
  PIN_OFFSET(vegas_session_options, schedule, 80);
  PIN_OFFSET(vegas_session_options, profile_path, 88);
  PIN_OFFSET(vegas_session_options, prefix_cache, 96);
  PIN_OFFSET(vegas_session_options, kv_type, 100);
  PIN_OFFSET(vegas_session_options, tree_branches, 104);
  PIN_OFFSET(vegas_session_options, tree_depth, 108);
  PIN_OFFSET(vegas_session_options, draft_model, 112);
  PIN_OFFSET(vegas_session_options, draft_window, 120);
  PIN_SIZE(vegas_sampling_options, 48);
  PIN_OFFSET(vegas_sampling_options, struct_size, 0);
  PIN_OFFSET(vegas_sampling_options, temperature, 4);
  PIN_OFFSET(vegas_sampling_options, top_k, 8);
  PIN_OFFSET(vegas_sampling_options, top_p, 12);
  PIN_OFFSET(vegas_sampling_options, min_p, 16);
  PIN_OFFSET(vegas_sampling_options, repetition_penalty, 20);
  PIN_OFFSET(vegas_sampling_options, presence_penalty, 24);
  PIN_OFFSET(vegas_sampling_options, frequency_penalty, 28);
  PIN_OFFSET(vegas_sampling_options, penalty_last_n, 32);
  PIN_OFFSET(vegas_sampling_options, seed, 40);
  PIN_SIZE(vegas_request, 96);
  PIN_OFFSET(vegas_request, struct_size, 0);
  PIN_OFFSET(vegas_request, prompt, 8);
  PIN_OFFSET(vegas_request, n_prompt, 16);
  PIN_OFFSET(vegas_request, sampling, 24);
  PIN_OFFSET(vegas_request, max_tokens, 32);
  PIN_OFFSET(vegas_request, ignore_eos, 36);
  PIN_OFFSET(vegas_request, stop_ids, 40);
  PIN_OFFSET(vegas_request, n_stop_ids, 48);
  PIN_OFFSET(vegas_request, stop_strings, 56);
  PIN_OFFSET(vegas_request, n_stop_strings, 64);
  PIN_OFFSET(vegas_request, on_token, 72);
  PIN_OFFSET(vegas_request, user_data, 80);
  PIN_OFFSET(vegas_request, logprobs, 88);
  PIN_OFFSET(vegas_request, top_logprobs, 92);
  PIN_SIZE(vegas_sequence_info, 88);
  PIN_OFFSET(vegas_sequence_info, struct_size, 0);
  PIN_OFFSET(vegas_sequence_info, finish_reason, 4);
  PIN_OFFSET(vegas_sequence_info, status, 8);
  PIN_OFFSET(vegas_sequence_info, n_prompt, 12);
  PIN_OFFSET(vegas_sequence_info, n_generated, 16);
  PIN_OFFSET(vegas_sequence_info, rounds, 24);
  PIN_OFFSET(vegas_sequence_info, drafted, 32);
  PIN_OFFSET(vegas_sequence_info, accepted, 40);
  PIN_OFFSET(vegas_sequence_info, tokens_per_round, 48);
  PIN_OFFSET(vegas_sequence_info, prefill_seconds, 56);
  PIN_OFFSET(vegas_sequence_info, decode_seconds, 64);
  PIN_OFFSET(vegas_sequence_info, gamma, 72);
  PIN_OFFSET(vegas_sequence_info, ratio, 76);
  PIN_OFFSET(vegas_sequence_info, switches, 80);
  PIN_SIZE(vegas_select_input, 48);
  PIN_OFFSET(vegas_select_input, struct_size, 0);
  PIN_OFFSET(vegas_select_input, seq_id, 4);
  PIN_OFFSET(vegas_select_input, layer, 8);
  PIN_OFFSET(vegas_select_input, n_layers, 12);
  PIN_OFFSET(vegas_select_input, n_candidates, 16);
  PIN_OFFSET(vegas_select_input, budget, 20);
  PIN_OFFSET(vegas_select_input, score_kind, 24);
  PIN_OFFSET(vegas_select_input, scores_on_device, 28);
  PIN_OFFSET(vegas_select_input, scores, 32);
  PIN_OFFSET(vegas_select_input, stream, 40);
  PIN_SIZE(vegas_select_policy, 40);
  PIN_OFFSET(vegas_select_policy, struct_size, 0);
  PIN_OFFSET(vegas_select_policy, user_data, 8);
  PIN_OFFSET(vegas_select_policy, select, 16);
  PIN_OFFSET(vegas_select_policy, reset, 24);
  PIN_OFFSET(vegas_select_policy, destroy, 32);
  PIN_SIZE(vegas_session_stats, 592);
  PIN_OFFSET(vegas_session_stats, struct_size, 0);
  PIN_OFFSET(vegas_session_stats, gamma, 4);
  PIN_OFFSET(vegas_session_stats, rounds, 8);
  PIN_OFFSET(vegas_session_stats, drafted, 16);
  PIN_OFFSET(vegas_session_stats, accepted, 24);
  PIN_OFFSET(vegas_session_stats, committed, 32);
  PIN_OFFSET(vegas_session_stats, tokens_per_round, 40);
  PIN_OFFSET(vegas_session_stats, draft_seconds, 48);
  PIN_OFFSET(vegas_session_stats, verify_seconds, 56);
  PIN_OFFSET(vegas_session_stats, select_seconds, 64);
  PIN_OFFSET(vegas_session_stats, drafted_at, 72);
  PIN_OFFSET(vegas_session_stats, accepted_at, 328);
  PIN_OFFSET(vegas_session_stats, switches, 584);
  PIN_SIZE(vegas_switch_info, 40);
  PIN_OFFSET(vegas_switch_info, struct_size, 0);
  PIN_OFFSET(vegas_switch_info, seq_id, 4);
  PIN_OFFSET(vegas_switch_info, round, 8);
  PIN_OFFSET(vegas_switch_info, from_gamma, 16);
  PIN_OFFSET(vegas_switch_info, to_gamma, 20);
  PIN_OFFSET(vegas_switch_info, from_ratio, 24);
  PIN_OFFSET(vegas_switch_info, to_ratio, 28);
  PIN_OFFSET(vegas_switch_info, tau_ema, 32);
  PIN_SIZE(vegas_token_logprobs, 176);
  PIN_OFFSET(vegas_token_logprobs, struct_size, 0);
  PIN_OFFSET(vegas_token_logprobs, token, 4);
  PIN_OFFSET(vegas_token_logprobs, logprob, 8);
  PIN_OFFSET(vegas_token_logprobs, n_top, 12);
  PIN_OFFSET(vegas_token_logprobs, top_ids, 16);
  PIN_OFFSET(vegas_token_logprobs, top_logprobs, 96);
  PIN_SIZE(vegas_generate_options, 40);
  PIN_OFFSET(vegas_generate_options, struct_size, 0);
  PIN_OFFSET(vegas_generate_options, max_tokens, 4);
  PIN_OFFSET(vegas_generate_options, sampling, 8);
  PIN_OFFSET(vegas_generate_options, session, 16);
  PIN_OFFSET(vegas_generate_options, on_token, 24);
  PIN_OFFSET(vegas_generate_options, user_data, 32);

  if (g_failures) {
    fprintf(stderr, "struct_layout: %d layout changes\n", g_failures);
    return 1;
  }
  printf("struct_layout: every public struct has its pinned layout\n");
  return 0;
#endif
}

/* Prints sizeof and offsetof of every vegas.h struct the C# binding mirrors, as
 * "struct size N" and "struct field offset" lines; the C# test compares them with
 * Marshal.SizeOf and Marshal.OffsetOf of the structs in src/Native.cs. */
#include <stddef.h>
#include <stdio.h>

#include "vegas.h"

#define SIZE(s) printf(#s " size %zu\n", sizeof(s))
#define FIELD(s, f) printf(#s " " #f " %zu\n", offsetof(s, f))

int main(void) {
  SIZE(vegas_tokenize_options);
  FIELD(vegas_tokenize_options, parse_special);
  FIELD(vegas_tokenize_options, add_special);

  SIZE(vegas_special_tokens);
  FIELD(vegas_special_tokens, bos);
  FIELD(vegas_special_tokens, eos);
  FIELD(vegas_special_tokens, pad);
  FIELD(vegas_special_tokens, fim_prefix);
  FIELD(vegas_special_tokens, fim_middle);
  FIELD(vegas_special_tokens, fim_suffix);
  FIELD(vegas_special_tokens, fim_pad);
  FIELD(vegas_special_tokens, file_sep);
  FIELD(vegas_special_tokens, im_start);
  FIELD(vegas_special_tokens, im_end);

  SIZE(vegas_model_options);
  FIELD(vegas_model_options, backend);
  FIELD(vegas_model_options, device_index);
  FIELD(vegas_model_options, n_threads);
  FIELD(vegas_model_options, progress);
  FIELD(vegas_model_options, progress_user_data);

  SIZE(vegas_model_info);
  FIELD(vegas_model_info, backend);
  FIELD(vegas_model_info, n_layers);
  FIELD(vegas_model_info, hidden_size);
  FIELD(vegas_model_info, n_heads);
  FIELD(vegas_model_info, n_kv_heads);
  FIELD(vegas_model_info, head_dim);
  FIELD(vegas_model_info, vocab_size);
  FIELD(vegas_model_info, max_context);
  FIELD(vegas_model_info, n_params);
  FIELD(vegas_model_info, weight_bytes);
  FIELD(vegas_model_info, kv_bytes_per_token);
  FIELD(vegas_model_info, architecture);

  SIZE(vegas_session_options);
  FIELD(vegas_session_options, kv_bytes);
  FIELD(vegas_session_options, page_size);
  FIELD(vegas_session_options, max_batch);
  FIELD(vegas_session_options, prefill_chunk);
  FIELD(vegas_session_options, mode);
  FIELD(vegas_session_options, policy);
  FIELD(vegas_session_options, gamma);
  FIELD(vegas_session_options, ratio);
  FIELD(vegas_session_options, min_tokens);
  FIELD(vegas_session_options, window_share);
  FIELD(vegas_session_options, score_kind);
  FIELD(vegas_session_options, sink);
  FIELD(vegas_session_options, top_p_mass);
  FIELD(vegas_session_options, select_policy);
  FIELD(vegas_session_options, schedule);
  FIELD(vegas_session_options, profile_path);
  FIELD(vegas_session_options, prefix_cache);
  FIELD(vegas_session_options, kv_type);
  FIELD(vegas_session_options, tree_branches);
  FIELD(vegas_session_options, tree_depth);
  FIELD(vegas_session_options, draft_model);
  FIELD(vegas_session_options, draft_window);

  SIZE(vegas_sampling_options);
  FIELD(vegas_sampling_options, temperature);
  FIELD(vegas_sampling_options, top_k);
  FIELD(vegas_sampling_options, top_p);
  FIELD(vegas_sampling_options, min_p);
  FIELD(vegas_sampling_options, repetition_penalty);
  FIELD(vegas_sampling_options, presence_penalty);
  FIELD(vegas_sampling_options, frequency_penalty);
  FIELD(vegas_sampling_options, penalty_last_n);
  FIELD(vegas_sampling_options, seed);

  SIZE(vegas_request);
  FIELD(vegas_request, prompt);
  FIELD(vegas_request, n_prompt);
  FIELD(vegas_request, sampling);
  FIELD(vegas_request, max_tokens);
  FIELD(vegas_request, ignore_eos);
  FIELD(vegas_request, stop_ids);
  FIELD(vegas_request, n_stop_ids);
  FIELD(vegas_request, stop_strings);
  FIELD(vegas_request, n_stop_strings);
  FIELD(vegas_request, on_token);
  FIELD(vegas_request, user_data);
  FIELD(vegas_request, logprobs);
  FIELD(vegas_request, top_logprobs);

  SIZE(vegas_sequence_info);
  FIELD(vegas_sequence_info, finish_reason);
  FIELD(vegas_sequence_info, status);
  FIELD(vegas_sequence_info, n_prompt);
  FIELD(vegas_sequence_info, n_generated);
  FIELD(vegas_sequence_info, rounds);
  FIELD(vegas_sequence_info, drafted);
  FIELD(vegas_sequence_info, accepted);
  FIELD(vegas_sequence_info, tokens_per_round);
  FIELD(vegas_sequence_info, prefill_seconds);
  FIELD(vegas_sequence_info, decode_seconds);
  FIELD(vegas_sequence_info, gamma);
  FIELD(vegas_sequence_info, ratio);
  FIELD(vegas_sequence_info, switches);

  SIZE(vegas_session_stats);
  FIELD(vegas_session_stats, gamma);
  FIELD(vegas_session_stats, rounds);
  FIELD(vegas_session_stats, drafted);
  FIELD(vegas_session_stats, accepted);
  FIELD(vegas_session_stats, committed);
  FIELD(vegas_session_stats, tokens_per_round);
  FIELD(vegas_session_stats, draft_seconds);
  FIELD(vegas_session_stats, verify_seconds);
  FIELD(vegas_session_stats, select_seconds);
  FIELD(vegas_session_stats, drafted_at);
  FIELD(vegas_session_stats, accepted_at);
  FIELD(vegas_session_stats, switches);
  return 0;
}

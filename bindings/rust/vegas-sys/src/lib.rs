//! Raw declarations of `include/vegas.h` (libvegas 0.1.0), written by hand: one item per
//! item of the header, in its order. Every function is `unsafe`; the `vegas` crate is the
//! safe API. Conventions (status codes, `struct_size`, buffer-filling calls) are those of
//! the header.
#![allow(non_camel_case_types)]

use std::os::raw::{c_char, c_int, c_void};

pub const VEGAS_VERSION_MAJOR: u32 = 0;
pub const VEGAS_VERSION_MINOR: u32 = 1;
pub const VEGAS_VERSION_PATCH: u32 = 0;
pub const VEGAS_VERSION_NUMBER: u32 =
    VEGAS_VERSION_MAJOR * 10000 + VEGAS_VERSION_MINOR * 100 + VEGAS_VERSION_PATCH;

/// `enum vegas_status` (an `int`). Kept as an integer so that an unknown code from a newer
/// library is representable.
pub type vegas_status = c_int;
pub const VEGAS_OK: vegas_status = 0;
pub const VEGAS_ERR_INVALID_ARGUMENT: vegas_status = -1;
pub const VEGAS_ERR_STRUCT_SIZE: vegas_status = -2;
pub const VEGAS_ERR_IO: vegas_status = -3;
pub const VEGAS_ERR_FORMAT: vegas_status = -4;
pub const VEGAS_ERR_UNSUPPORTED: vegas_status = -5;
pub const VEGAS_ERR_OUT_OF_MEMORY: vegas_status = -6;
pub const VEGAS_ERR_KV_FULL: vegas_status = -7;
pub const VEGAS_ERR_TOKEN_OUT_OF_RANGE: vegas_status = -8;
pub const VEGAS_ERR_BUFFER_TOO_SMALL: vegas_status = -9;
pub const VEGAS_ERR_CANCELLED: vegas_status = -10;
pub const VEGAS_ERR_BACKEND: vegas_status = -11;
pub const VEGAS_ERR_NOT_BUILT: vegas_status = -12;
pub const VEGAS_ERR_NOT_FOUND: vegas_status = -13;
pub const VEGAS_ERR_WRONG_STATE: vegas_status = -14;
pub const VEGAS_ERR_INTERNAL: vegas_status = -99;

pub type vegas_backend_kind = c_int;
pub const VEGAS_BACKEND_AUTO: vegas_backend_kind = 0;
pub const VEGAS_BACKEND_CPU: vegas_backend_kind = 1;
pub const VEGAS_BACKEND_CUDA: vegas_backend_kind = 2;

pub type vegas_decode_mode = c_int;
pub const VEGAS_MODE_VANILLA: vegas_decode_mode = 0;
pub const VEGAS_MODE_VEGAS: vegas_decode_mode = 1;
pub const VEGAS_MODE_AUTO: vegas_decode_mode = 2;

pub type vegas_schedule = c_int;
pub const VEGAS_SCHEDULE_INTERLEAVE: vegas_schedule = 0;
pub const VEGAS_SCHEDULE_PREFILL_FIRST: vegas_schedule = 1;

pub type vegas_kv_type = c_int;
pub const VEGAS_KV_DEFAULT: vegas_kv_type = 0;
pub const VEGAS_KV_FP8: vegas_kv_type = 1;

pub type vegas_finish_reason = c_int;
pub const VEGAS_FINISH_NONE: vegas_finish_reason = 0;
pub const VEGAS_FINISH_EOS: vegas_finish_reason = 1;
pub const VEGAS_FINISH_LENGTH: vegas_finish_reason = 2;
pub const VEGAS_FINISH_STOP: vegas_finish_reason = 3;
pub const VEGAS_FINISH_CALLBACK: vegas_finish_reason = 4;
pub const VEGAS_FINISH_CANCELLED: vegas_finish_reason = 5;
pub const VEGAS_FINISH_ERROR: vegas_finish_reason = 6;

pub type vegas_score_kind = c_int;
pub const VEGAS_SCORE_WEIGHT: vegas_score_kind = 0;
pub const VEGAS_SCORE_LOGIT: vegas_score_kind = 1;

pub const VEGAS_MAX_GAMMA: usize = 32;
pub const VEGAS_MAX_TOP_LOGPROBS: usize = 20;

/// Opaque handles.
#[repr(C)]
pub struct vegas_tokenizer {
    _private: [u8; 0],
}
#[repr(C)]
pub struct vegas_detokenizer {
    _private: [u8; 0],
}
#[repr(C)]
pub struct vegas_model {
    _private: [u8; 0],
}
#[repr(C)]
pub struct vegas_session {
    _private: [u8; 0],
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct vegas_tokenize_options {
    pub struct_size: u32,
    pub parse_special: i32,
    pub add_special: i32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct vegas_special_tokens {
    pub struct_size: u32,
    pub bos: i32,
    pub eos: i32,
    pub pad: i32,
    pub fim_prefix: i32,
    pub fim_middle: i32,
    pub fim_suffix: i32,
    pub fim_pad: i32,
    pub file_sep: i32,
    pub im_start: i32,
    pub im_end: i32,
}

pub type vegas_progress_fn =
    Option<unsafe extern "C" fn(progress: f32, user_data: *mut c_void) -> i32>;

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct vegas_model_options {
    pub struct_size: u32,
    pub backend: i32,
    pub device_index: i32,
    pub n_threads: i32,
    pub progress: vegas_progress_fn,
    pub progress_user_data: *mut c_void,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct vegas_model_info {
    pub struct_size: u32,
    pub backend: i32,
    pub n_layers: i32,
    pub hidden_size: i32,
    pub n_heads: i32,
    pub n_kv_heads: i32,
    pub head_dim: i32,
    pub vocab_size: i32,
    pub max_context: i32,
    pub n_params: u64,
    pub weight_bytes: u64,
    pub kv_bytes_per_token: u64,
    pub architecture: [c_char; 64],
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct vegas_session_options {
    pub struct_size: u32,
    pub kv_bytes: u64,
    pub page_size: i32,
    pub max_batch: i32,
    pub prefill_chunk: i32,
    pub mode: i32,
    pub policy: *const c_char,
    pub gamma: i32,
    pub ratio: f32,
    pub min_tokens: i32,
    pub window_share: f32,
    pub score_kind: i32,
    pub sink: i32,
    pub top_p_mass: f32,
    pub select_policy: *const vegas_select_policy,
    pub schedule: i32,
    pub profile_path: *const c_char,
    pub prefix_cache: i32,
    pub kv_type: i32,
    pub tree_branches: i32,
    pub tree_depth: i32,
    pub draft_model: *const vegas_model,
    pub draft_window: i32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct vegas_sampling_options {
    pub struct_size: u32,
    pub temperature: f32,
    pub top_k: i32,
    pub top_p: f32,
    pub min_p: f32,
    pub repetition_penalty: f32,
    pub presence_penalty: f32,
    pub frequency_penalty: f32,
    pub penalty_last_n: i32,
    pub seed: u64,
}

pub type vegas_token_fn = Option<
    unsafe extern "C" fn(
        seq_id: i32,
        token: i32,
        piece: *const c_char,
        piece_len: usize,
        user_data: *mut c_void,
    ) -> i32,
>;

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct vegas_request {
    pub struct_size: u32,
    pub prompt: *const i32,
    pub n_prompt: usize,
    pub sampling: *const vegas_sampling_options,
    pub max_tokens: i32,
    pub ignore_eos: i32,
    pub stop_ids: *const i32,
    pub n_stop_ids: usize,
    pub stop_strings: *const *const c_char,
    pub n_stop_strings: usize,
    pub on_token: vegas_token_fn,
    pub user_data: *mut c_void,
    pub logprobs: i32,
    pub top_logprobs: i32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct vegas_token_logprobs {
    pub struct_size: u32,
    pub token: i32,
    pub logprob: f32,
    pub n_top: i32,
    pub top_ids: [i32; VEGAS_MAX_TOP_LOGPROBS],
    pub top_logprobs: [f32; VEGAS_MAX_TOP_LOGPROBS],
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct vegas_sequence_info {
    pub struct_size: u32,
    pub finish_reason: i32,
    pub status: i32,
    pub n_prompt: i32,
    pub n_generated: i32,
    pub rounds: i64,
    pub drafted: i64,
    pub accepted: i64,
    pub tokens_per_round: f64,
    pub prefill_seconds: f64,
    pub decode_seconds: f64,
    pub gamma: i32,
    pub ratio: f32,
    pub switches: i64,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct vegas_select_input {
    pub struct_size: u32,
    pub seq_id: i32,
    pub layer: i32,
    pub n_layers: i32,
    pub n_candidates: i32,
    pub budget: i32,
    pub score_kind: i32,
    pub scores_on_device: i32,
    pub scores: *const f32,
    pub stream: *mut c_void,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct vegas_select_policy {
    pub struct_size: u32,
    pub user_data: *mut c_void,
    pub select: Option<
        unsafe extern "C" fn(
            input: *const vegas_select_input,
            out_positions: *mut i32,
            capacity: i32,
            user_data: *mut c_void,
        ) -> i32,
    >,
    pub reset: Option<unsafe extern "C" fn(seq_id: i32, user_data: *mut c_void)>,
    pub destroy: Option<unsafe extern "C" fn(user_data: *mut c_void)>,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct vegas_session_stats {
    pub struct_size: u32,
    pub gamma: i32,
    pub rounds: i64,
    pub drafted: i64,
    pub accepted: i64,
    pub committed: i64,
    pub tokens_per_round: f64,
    pub draft_seconds: f64,
    pub verify_seconds: f64,
    pub select_seconds: f64,
    pub drafted_at: [i64; VEGAS_MAX_GAMMA],
    pub accepted_at: [i64; VEGAS_MAX_GAMMA],
    pub switches: i64,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct vegas_switch_info {
    pub struct_size: u32,
    pub seq_id: i32,
    pub round: i64,
    pub from_gamma: i32,
    pub to_gamma: i32,
    pub from_ratio: f32,
    pub to_ratio: f32,
    pub tau_ema: f64,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct vegas_generate_options {
    pub struct_size: u32,
    pub max_tokens: i32,
    pub sampling: *const vegas_sampling_options,
    pub session: *const vegas_session_options,
    pub on_token: vegas_token_fn,
    pub user_data: *mut c_void,
}

extern "C" {
    pub fn vegas_version_number() -> u32;
    pub fn vegas_version() -> *const c_char;

    pub fn vegas_status_name(status: vegas_status) -> *const c_char;
    pub fn vegas_last_error() -> *const c_char;

    pub fn vegas_tokenizer_load(
        path: *const c_char,
        out: *mut *mut vegas_tokenizer,
    ) -> vegas_status;
    pub fn vegas_tokenizer_free(tokenizer: *mut vegas_tokenizer);
    pub fn vegas_tokenizer_vocab_size(tokenizer: *const vegas_tokenizer) -> i32;
    pub fn vegas_tokenize_options_init_sized(options: *mut vegas_tokenize_options, size: usize);
    pub fn vegas_tokenize(
        tokenizer: *const vegas_tokenizer,
        text: *const c_char,
        text_len: usize,
        options: *const vegas_tokenize_options,
        ids: *mut i32,
        capacity: usize,
        n_ids: *mut usize,
    ) -> vegas_status;
    pub fn vegas_detokenize(
        tokenizer: *const vegas_tokenizer,
        ids: *const i32,
        n_ids: usize,
        skip_special: i32,
        text: *mut c_char,
        capacity: usize,
        n_bytes: *mut usize,
    ) -> vegas_status;
    pub fn vegas_token_to_piece(
        tokenizer: *const vegas_tokenizer,
        id: i32,
        bytes: *mut c_char,
        capacity: usize,
        n_bytes: *mut usize,
    ) -> vegas_status;
    pub fn vegas_token_by_name(
        tokenizer: *const vegas_tokenizer,
        name: *const c_char,
        id: *mut i32,
    ) -> vegas_status;
    pub fn vegas_token_is_special(tokenizer: *const vegas_tokenizer, id: i32) -> i32;
    pub fn vegas_tokenizer_special_tokens(
        tokenizer: *const vegas_tokenizer,
        out: *mut vegas_special_tokens,
    ) -> vegas_status;
    pub fn vegas_tokenizer_chat_format(tokenizer: *const vegas_tokenizer) -> *const c_char;
    pub fn vegas_chat_tokenize(
        tokenizer: *const vegas_tokenizer,
        roles: *const *const c_char,
        contents: *const *const c_char,
        n_messages: usize,
        add_generation_prompt: i32,
        ids: *mut i32,
        capacity: usize,
        n_ids: *mut usize,
    ) -> vegas_status;
    pub fn vegas_detokenizer_create(
        tokenizer: *const vegas_tokenizer,
        skip_special: i32,
        out: *mut *mut vegas_detokenizer,
    ) -> vegas_status;
    pub fn vegas_detokenizer_free(detokenizer: *mut vegas_detokenizer);
    pub fn vegas_detokenizer_push(
        detokenizer: *mut vegas_detokenizer,
        id: i32,
        text: *mut c_char,
        capacity: usize,
        n_bytes: *mut usize,
    ) -> vegas_status;
    pub fn vegas_detokenizer_flush(
        detokenizer: *mut vegas_detokenizer,
        text: *mut c_char,
        capacity: usize,
        n_bytes: *mut usize,
    ) -> vegas_status;

    pub fn vegas_model_options_init_sized(options: *mut vegas_model_options, size: usize);
    pub fn vegas_model_load(
        dir: *const c_char,
        options: *const vegas_model_options,
        out: *mut *mut vegas_model,
    ) -> vegas_status;
    pub fn vegas_model_free(model: *mut vegas_model);
    pub fn vegas_model_load_synthetic(
        config_json_path: *const c_char,
        seed: u64,
        options: *const vegas_model_options,
        out: *mut *mut vegas_model,
    ) -> vegas_status;
    pub fn vegas_model_tokenizer(model: *const vegas_model) -> *const vegas_tokenizer;
    pub fn vegas_model_get_info(
        model: *const vegas_model,
        out: *mut vegas_model_info,
    ) -> vegas_status;
    pub fn vegas_model_measure_bandwidth(
        model: *const vegas_model,
        bytes_per_second: *mut f64,
    ) -> vegas_status;
    pub fn vegas_model_quantize(
        model_dir: *const c_char,
        out_path: *const c_char,
        type_: *const c_char,
    ) -> vegas_status;

    pub fn vegas_session_options_init_sized(options: *mut vegas_session_options, size: usize);
    pub fn vegas_session_create(
        model: *mut vegas_model,
        options: *const vegas_session_options,
        out: *mut *mut vegas_session,
    ) -> vegas_status;
    pub fn vegas_session_free(session: *mut vegas_session);
    pub fn vegas_sampling_options_init_sized(options: *mut vegas_sampling_options, size: usize);
    pub fn vegas_request_init_sized(request: *mut vegas_request, size: usize);
    pub fn vegas_session_submit(
        session: *mut vegas_session,
        request: *const vegas_request,
        seq_id: *mut i32,
    ) -> vegas_status;
    pub fn vegas_session_step(session: *mut vegas_session, n_active: *mut i32) -> vegas_status;
    pub fn vegas_session_run(session: *mut vegas_session) -> vegas_status;
    pub fn vegas_session_cancel(session: *mut vegas_session, seq_id: i32) -> vegas_status;
    pub fn vegas_sequence_get_info(
        session: *const vegas_session,
        seq_id: i32,
        out: *mut vegas_sequence_info,
    ) -> vegas_status;
    pub fn vegas_sequence_tokens(
        session: *const vegas_session,
        seq_id: i32,
        ids: *mut i32,
        capacity: usize,
        n_ids: *mut usize,
    ) -> vegas_status;
    pub fn vegas_sequence_text(
        session: *const vegas_session,
        seq_id: i32,
        text: *mut c_char,
        capacity: usize,
        n_bytes: *mut usize,
    ) -> vegas_status;
    pub fn vegas_sequence_release(session: *mut vegas_session, seq_id: i32) -> vegas_status;

    pub fn vegas_session_get_stats(
        session: *const vegas_session,
        out: *mut vegas_session_stats,
    ) -> vegas_status;

    pub fn vegas_session_get_cache_stats(
        session: *const vegas_session,
        hit_tokens: *mut i64,
        evicted_pages: *mut i64,
    ) -> vegas_status;

    pub fn vegas_sequence_get_logprobs(
        session: *const vegas_session,
        seq_id: i32,
        index: i64,
        out: *mut vegas_token_logprobs,
    ) -> vegas_status;

    pub fn vegas_session_get_switch(
        session: *const vegas_session,
        index: i64,
        out: *mut vegas_switch_info,
    ) -> vegas_status;

    pub fn vegas_generate_options_init_sized(options: *mut vegas_generate_options, size: usize);
    pub fn vegas_generate(
        model: *mut vegas_model,
        prompt: *const c_char,
        options: *const vegas_generate_options,
        text: *mut c_char,
        capacity: usize,
        n_bytes: *mut usize,
    ) -> vegas_status;
}

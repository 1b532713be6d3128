/*
 * vegas.h — the public C ABI of libvegas, an LLM inference runtime with lossless
 * self-speculative decoding over verification-guided sparse attention.
 *
 * Conventions (DESIGN.md §8):
 *  - Every call returns a vegas_status; VEGAS_OK is 0, errors are negative.
 *    On error, vegas_last_error() holds a message (thread-local, valid until the
 *    next libvegas call on the same thread) and outputs are left untouched.
 *  - Structs that grow: every struct passed by pointer starts with uint32_t
 *    struct_size, the size of the struct as the CALLER's vegas.h declares it;
 *    fields are only ever appended. The library reads and writes only the
 *    first struct_size bytes, so a host built against an older, smaller
 *    vegas.h keeps working with a newer library and its memory is never
 *    touched past its own struct:
 *     - Inputs: fill them with vegas_X_init(&x), a static inline function that
 *       calls the exported vegas_X_init_sized(&x, sizeof x) with the size seen
 *       by the caller's compiler. init_sized writes the defaults into at most
 *       `size` bytes, zeroes the caller's bytes past the library's own struct,
 *       and sets struct_size = size. (Bindings that lay structs out themselves
 *       call init_sized with their own size.) Fields past struct_size keep the
 *       library's defaults.
 *     - Outputs (get_info, get_stats, special_tokens): set struct_size to the
 *       size of your struct; the library fills at most that many bytes, zeroes
 *       the ones past its own struct and leaves struct_size as you set it.
 *     - A struct from a NEWER vegas.h (larger than the library knows) is
 *       accepted when every byte past the library's struct is zero, so a new
 *       field's zero always means "as before" (that is its default or off); a
 *       non-zero one fails with VEGAS_ERR_UNSUPPORTED instead of being
 *       silently ignored. (A field appended into the tail padding of the
 *       library's struct cannot be told from padding and is ignored.)
 *     - struct_size below 8 fails with VEGAS_ERR_STRUCT_SIZE.
 *    There is deliberately no exported unsized init: it would have to write
 *    the library's whole struct into memory of unknown size.
 *  - No bool, no by-value structs: flags are int32_t (0 = false).
 *  - Buffer-filling calls take (buf, capacity, size_t *needed): when capacity is
 *    too small they return VEGAS_ERR_BUFFER_TOO_SMALL and store the required size
 *    in *needed, writing nothing else.
 *  - Free functions accept NULL. The library never aborts or exits the process
 *    and no C++ exception crosses this boundary.
 *
 * Threads: a vegas_model (and its tokenizer) is immutable after load and may be
 * used from any number of threads at once. A vegas_session is driven by one
 * thread at a time; only vegas_session_cancel() may be called concurrently from
 * another thread. Callbacks run on the thread that made the call that fires them.
 * In detail:
 *  - Any thread, any time: vegas_version*, vegas_status_name, vegas_last_error
 *    (per thread), the *_init functions, vegas_tokenizer_load, vegas_model_load.
 *  - Concurrently on one model or tokenizer: every function taking a const
 *    vegas_model* or const vegas_tokenizer* (tokenize, detokenize, token
 *    queries, get_info, measure_bandwidth), vegas_session_create and
 *    vegas_generate (each makes its own session).
 *  - One thread at a time per object: a vegas_session (submit, step, run,
 *    sequence queries, release, get_stats, free) and a vegas_detokenizer.
 *  - vegas_session_cancel: from any thread, also while another thread is inside
 *    step/run on the same session.
 *  - The *_free functions must not race with any other call on the same object.
 *  - Inside a vegas_token_fn: vegas_sequence_get_info/tokens/text,
 *    vegas_session_get_stats and vegas_session_cancel on the calling session
 *    are allowed; vegas_session_step/run/submit and vegas_sequence_release fail
 *    with VEGAS_ERR_WRONG_STATE; vegas_session_free is ignored (the reason is in
 *    vegas_last_error). Inside a vegas_progress_fn or a selection policy
 *    callback, call nothing on the object being loaded or driven.
 */
#ifndef VEGAS_H
#define VEGAS_H

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#if defined(VEGAS_BUILD)
#define VEGAS_API __declspec(dllexport)
#else
#define VEGAS_API __declspec(dllimport)
#endif
#elif defined(__GNUC__) || defined(__clang__)
#define VEGAS_API __attribute__((visibility("default")))
#else
#define VEGAS_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- version */

#define VEGAS_VERSION_MAJOR 0
#define VEGAS_VERSION_MINOR 1
#define VEGAS_VERSION_PATCH 0
/* One number: major * 10000 + minor * 100 + patch. Same major = ABI compatible
 * (from 1.0 on; during 0.x a minor bump may break the ABI). */
#define VEGAS_VERSION_NUMBER \
  (VEGAS_VERSION_MAJOR * 10000 + VEGAS_VERSION_MINOR * 100 + VEGAS_VERSION_PATCH)

/* The library's version number at run time; compare with VEGAS_VERSION_NUMBER. */
VEGAS_API uint32_t vegas_version_number(void);
/* The library's version as "MAJOR.MINOR.PATCH"; a static string, never freed. */
VEGAS_API const char *vegas_version(void);

/* ----------------------------------------------------------------- errors */

typedef enum vegas_status {
  VEGAS_OK = 0,
  VEGAS_ERR_INVALID_ARGUMENT = -1,   /* NULL where a pointer is required, bad value */
  VEGAS_ERR_STRUCT_SIZE = -2,        /* struct_size too small for the mandatory fields */
  VEGAS_ERR_IO = -3,                 /* a file could not be opened or read */
  VEGAS_ERR_FORMAT = -4,             /* a file is corrupt or malformed */
  VEGAS_ERR_UNSUPPORTED = -5,        /* valid input this build does not support */
  VEGAS_ERR_OUT_OF_MEMORY = -6,      /* host or device allocation failed */
  VEGAS_ERR_KV_FULL = -7,            /* the session's KV pool has no free page */
  VEGAS_ERR_TOKEN_OUT_OF_RANGE = -8, /* a token id outside [0, vocab_size) */
  VEGAS_ERR_BUFFER_TOO_SMALL = -9,   /* see *needed for the required size */
  VEGAS_ERR_CANCELLED = -10,         /* a callback or vegas_session_cancel stopped the work */
  VEGAS_ERR_BACKEND = -11,           /* the compute backend failed (e.g. a CUDA error) */
  VEGAS_ERR_NOT_BUILT = -12,         /* the feature was not compiled into this library */
  VEGAS_ERR_NOT_FOUND = -13,         /* no such sequence, token name, file */
  VEGAS_ERR_WRONG_STATE = -14,       /* the call is not allowed now (e.g. reentrancy) */
  VEGAS_ERR_INTERNAL = -99,          /* a bug in libvegas; please report it */
  VEGAS_STATUS_FORCE32 = 0x7FFFFFFF
} vegas_status;

/* A static English name for a status ("VEGAS_ERR_KV_FULL"); never NULL. */
VEGAS_API const char *vegas_status_name(vegas_status status);
/* The message of the last failed call on this thread, or "" if none. Owned by
 * the library, valid until the next libvegas call on this thread. */
VEGAS_API const char *vegas_last_error(void);

/* -------------------------------------------------------------- tokenizer */

typedef struct vegas_tokenizer vegas_tokenizer;

/* Loads a Hugging Face tokenizer.json (byte-level BPE). `path` is the file or a
 * directory holding tokenizer.json and, optionally, tokenizer_config.json (for
 * bos/eos and add_bos), or a GGUF model file (its tokenizer.ggml metadata). On success *out owns a
 * tokenizer; free it with vegas_tokenizer_free. Errors: IO, FORMAT (names what is wrong),
 * UNSUPPORTED (names the unsupported model/normalizer/pre-tokenizer type). Thread-safe. */
VEGAS_API vegas_status vegas_tokenizer_load(const char *path, vegas_tokenizer **out);
/* Frees a tokenizer from vegas_tokenizer_load. NULL is a no-op, and so is the
 * borrowed tokenizer of vegas_model_tokenizer, which lives until its model is
 * freed (after that the handle is dangling, like any freed handle). */
VEGAS_API void vegas_tokenizer_free(vegas_tokenizer *tokenizer);

/* Number of token ids (model vocabulary plus added tokens). */
VEGAS_API int32_t vegas_tokenizer_vocab_size(const vegas_tokenizer *tokenizer);

typedef struct vegas_tokenize_options {
  uint32_t struct_size;
  int32_t parse_special; /* 1 (default): special tokens in the text become their ids */
  int32_t add_special;   /* 1 (default): add bos when tokenizer_config says add_bos_token */
} vegas_tokenize_options;
VEGAS_API void vegas_tokenize_options_init_sized(vegas_tokenize_options *options, size_t size);
static inline void vegas_tokenize_options_init(vegas_tokenize_options *options) {
  vegas_tokenize_options_init_sized(options, sizeof(*options));
}

/* Encodes `text_len` bytes of UTF-8 as Hugging Face tokenizers would (invalid
 * UTF-8 becomes U+FFFD). Writes up to `capacity` ids to `ids`; the count goes to
 * *n_ids. If capacity is short: VEGAS_ERR_BUFFER_TOO_SMALL with the count in
 * *n_ids. `options` may be NULL (defaults). Thread-safe. */
VEGAS_API vegas_status vegas_tokenize(const vegas_tokenizer *tokenizer, const char *text,
                                      size_t text_len, const vegas_tokenize_options *options,
                                      int32_t *ids, size_t capacity, size_t *n_ids);

/* Decodes ids to UTF-8 text (byte sequences that are not valid UTF-8 become
 * U+FFFD, as Hugging Face does). skip_special != 0 drops special tokens. The
 * text is not NUL-terminated; its length goes to *n_bytes (also when the buffer
 * is short). Errors: TOKEN_OUT_OF_RANGE, BUFFER_TOO_SMALL. Thread-safe. */
VEGAS_API vegas_status vegas_detokenize(const vegas_tokenizer *tokenizer, const int32_t *ids,
                                        size_t n_ids, int32_t skip_special, char *text,
                                        size_t capacity, size_t *n_bytes);

/* The raw bytes one token stands for (may be part of a UTF-8 character). */
VEGAS_API vegas_status vegas_token_to_piece(const vegas_tokenizer *tokenizer, int32_t id,
                                            char *bytes, size_t capacity, size_t *n_bytes);

/* The id of a token given by its exact text, e.g. "<|fim_prefix|>".
 * VEGAS_ERR_NOT_FOUND if there is none. */
VEGAS_API vegas_status vegas_token_by_name(const vegas_tokenizer *tokenizer, const char *name,
                                           int32_t *id);

/* 1 if the token is a special (control) token, 0 otherwise or out of range. */
VEGAS_API int32_t vegas_token_is_special(const vegas_tokenizer *tokenizer, int32_t id);

/* Well-known token ids; -1 where the tokenizer has none. */
typedef struct vegas_special_tokens {
  uint32_t struct_size;
  int32_t bos;
  int32_t eos;
  int32_t pad;
  int32_t fim_prefix;
  int32_t fim_middle;
  int32_t fim_suffix;
  int32_t fim_pad;
  int32_t file_sep;
  int32_t im_start;
  int32_t im_end;
} vegas_special_tokens;
/* Fills `out` (set out->struct_size first). */
VEGAS_API vegas_status vegas_tokenizer_special_tokens(const vegas_tokenizer *tokenizer,
                                                      vegas_special_tokens *out);

/* Chat formatting. The model's chat template (tokenizer_config.json
 * chat_template, Jinja) is not executed: its family is recognized from the
 * markers it writes and that family's format is produced, as llama.cpp's
 * built-in templates do. Families: "chatml" (<|im_start|>role\ncontent
 * <|im_end|>\n a message; also when there is no template but the vocabulary
 * has <|im_start|> and <|im_end|>) and "llama3" (bos, then
 * <|start_header_id|>role<|end_header_id|>\n\ncontent<|eot_id|> a message,
 * content trimmed). A template that adds to its family's format (a default
 * system message, a date header, tools) gets the plain family format.
 *
 * The family's name, or "" when the tokenizer has none that is recognized; a
 * static string, never NULL. */
VEGAS_API const char *vegas_tokenizer_chat_format(const vegas_tokenizer *tokenizer);

/* The prompt ids of a chat of n_messages messages, message i with role
 * roles[i] and content contents[i] (NUL-terminated UTF-8), in the tokenizer's
 * chat format; add_generation_prompt != 0 appends the assistant's header. The
 * format's markers are special tokens; message text is tokenized with
 * special-token parsing off, so no message can forge a marker. No bos is
 * added beyond what the format writes. Buffer convention as vegas_tokenize.
 * Errors: UNSUPPORTED (no recognized chat format), INVALID_ARGUMENT (NULL
 * arrays or strings), BUFFER_TOO_SMALL. Thread-safe. */
VEGAS_API vegas_status vegas_chat_tokenize(const vegas_tokenizer *tokenizer,
                                           const char *const *roles, const char *const *contents,
                                           size_t n_messages, int32_t add_generation_prompt,
                                           int32_t *ids, size_t capacity, size_t *n_ids);

/* Streaming detokenizer: feed ids one at a time, get back only complete UTF-8
 * (a token can end in the middle of a character). One per stream; not
 * thread-safe; it borrows the tokenizer, which must outlive it. */
typedef struct vegas_detokenizer vegas_detokenizer;
VEGAS_API vegas_status vegas_detokenizer_create(const vegas_tokenizer *tokenizer,
                                                int32_t skip_special, vegas_detokenizer **out);
VEGAS_API void vegas_detokenizer_free(vegas_detokenizer *detokenizer);
/* Adds one token; writes the text that became complete (possibly none). */
VEGAS_API vegas_status vegas_detokenizer_push(vegas_detokenizer *detokenizer, int32_t id,
                                              char *text, size_t capacity, size_t *n_bytes);
/* Ends the stream: pending incomplete bytes come out as U+FFFD. Resets it. */
VEGAS_API vegas_status vegas_detokenizer_flush(vegas_detokenizer *detokenizer, char *text,
                                               size_t capacity, size_t *n_bytes);

/* ------------------------------------------------------------------ model */

typedef struct vegas_model vegas_model;

typedef enum vegas_backend_kind {
  VEGAS_BACKEND_AUTO = 0, /* CUDA when built and a device is present, else CPU */
  VEGAS_BACKEND_CPU = 1,
  VEGAS_BACKEND_CUDA = 2,
  VEGAS_BACKEND_FORCE32 = 0x7FFFFFFF
} vegas_backend_kind;

/* Progress of a long operation in [0, 1]. Return non-zero to cancel it (the call
 * then fails with VEGAS_ERR_CANCELLED and frees what it made). */
typedef int32_t (*vegas_progress_fn)(float progress, void *user_data);

typedef struct vegas_model_options {
  uint32_t struct_size;
  int32_t backend;            /* vegas_backend_kind, default AUTO */
  int32_t device_index;       /* CUDA device, default 0 */
  int32_t n_threads;          /* CPU threads, 0 (default) = all cores; at most 1024 */
  vegas_progress_fn progress; /* optional */
  void *progress_user_data;
} vegas_model_options;
VEGAS_API void vegas_model_options_init_sized(vegas_model_options *options, size_t size);
static inline void vegas_model_options_init(vegas_model_options *options) {
  vegas_model_options_init_sized(options, sizeof(*options));
}

/* Loads a Hugging Face model directory (config.json, *.safetensors or
 * model.safetensors.index.json, tokenizer.json; F32, F16 or BF16 tensors, or
 * FP8 E4M3 weights with their scales as quant_method "fp8" and
 * compressed-tensors "float-quantized" store them, dequantized to bf16 at
 * load), or a GGUF file (llama.cpp's
 * format: Qwen3, Qwen2, Llama/Mistral; tensors in F32, F16, BF16, Q8_0, Q4_0,
 * Q4_1, Q5_0, Q5_1, Q4_K, Q5_K or Q6_K, the quantized ones dequantized to bf16
 * at load; its byte-level BPE tokenizer and chat template from the metadata).
 * `options` may be NULL. On
 * success *out owns the model. Errors name the file, field or tensor at fault:
 * IO, FORMAT, UNSUPPORTED (architecture, dtype, rope type, quantization method), OUT_OF_MEMORY,
 * CANCELLED, NOT_BUILT (CUDA asked for in a CPU-only build). A tokenizer.json of
 * a kind not supported yet (SentencePiece-style BPE, WordPiece, Unigram) does
 * not fail the load: the model then has no tokenizer (vegas_model_tokenizer
 * returns NULL and says why) and works from token ids. */
VEGAS_API vegas_status vegas_model_load(const char *dir, const vegas_model_options *options,
                                        vegas_model **out);
/* Releases the caller's reference. Sessions keep their model alive: the memory
 * goes when the last session made from it is freed too. NULL is a no-op. */
VEGAS_API void vegas_model_free(vegas_model *model);

/* A model of config.json's shapes (any supported architecture) with
 * deterministic pseudo-random bf16 weights made directly in device memory, for
 * benchmarks of models not on disk: the same seed gives the same weights. It
 * has no tokenizer (vegas_model_tokenizer returns NULL; prompts are token ids,
 * completions carry no text). `options` may be NULL. Errors: IO, FORMAT and
 * UNSUPPORTED for the config, UNSUPPORTED when the backend would be the CPU,
 * NOT_BUILT in a CPU-only build, OUT_OF_MEMORY. */
VEGAS_API vegas_status vegas_model_load_synthetic(const char *config_json_path, uint64_t seed,
                                                  const vegas_model_options *options,
                                                  vegas_model **out);

/* The model's tokenizer, borrowed: valid while the model is. NULL (with a
 * message in vegas_last_error) for a synthetic model and for a model whose
 * tokenizer is of a kind not supported yet (the message names it). */
VEGAS_API const vegas_tokenizer *vegas_model_tokenizer(const vegas_model *model);

typedef struct vegas_model_info {
  uint32_t struct_size;
  int32_t backend; /* the backend actually used */
  int32_t n_layers;
  int32_t hidden_size;
  int32_t n_heads;
  int32_t n_kv_heads;
  int32_t head_dim;
  int32_t vocab_size;
  int32_t max_context;
  uint64_t n_params;
  uint64_t weight_bytes; /* as stored on the backend */
  uint64_t kv_bytes_per_token;
  char architecture[64]; /* NUL-terminated, e.g. "Qwen3ForCausalLM" */
} vegas_model_info;
/* Fills `out` (set out->struct_size first). */
VEGAS_API vegas_status vegas_model_get_info(const vegas_model *model, vegas_model_info *out);

/* Measures the copy bandwidth of the memory the model's weights live in (host
 * memcpy on CPU, device-to-device copy on CUDA), in bytes read + written per
 * second, median of several copies of 256 MiB (CPU) or 1 GiB (CUDA), into
 * *bytes_per_second. Takes a few tenths of a second and briefly needs that much
 * free memory (OUT_OF_MEMORY otherwise). The decode floor of a step is
 * bytes_read / (bytes_per_second / 2). */
VEGAS_API vegas_status vegas_model_measure_bandwidth(const vegas_model *model,
                                                     double *bytes_per_second);

/* Writes the model of a Hugging Face directory (config.json, safetensors,
 * tokenizer.json and tokenizer_config.json when present) to `out_path` as one
 * GGUF file, which libvegas (vegas_model_load) and llama.cpp both load. `type`
 * is what its matrices become: "q8_0", "q4_0", "q4_k", "q5_k", "q6_k",
 * "q4_k_m" or "q5_k_m" (llama.cpp's mixes: Q4_K or Q5_K, with Q6_K for the
 * head and for v and down in some layers), "bf16", "f16" or "f32"; norms and
 * biases stay f32. Qwen3,
 * Qwen2 and Llama (Mistral without a sliding window). Type "fp8" writes a
 * Hugging Face directory at `out_path` instead (created; it must not exist or
 * be empty): the layers' projection matrices as F8_E4M3 with a scale per
 * 128 x 128 block (the layout of Qwen's *-FP8 releases, which the CUDA backend
 * keeps in FP8), the rest as stored, the tokenizer files copied. Errors:
 * INVALID_ARGUMENT (NULL, unknown type), IO (unreadable model, unwritable
 * output), FORMAT (bad checkpoint), UNSUPPORTED (what GGUF cannot carry, named).
 * Encodes one tensor at a time as it writes; a failed write leaves no output.
 * Thread-safe. */
VEGAS_API vegas_status vegas_model_quantize(const char *model_dir, const char *out_path,
                                            const char *type);

/* ---------------------------------------------------------------- session */

typedef struct vegas_session vegas_session;
struct vegas_select_policy; /* defined in the selection policy section below */

typedef enum vegas_decode_mode {
  VEGAS_MODE_VANILLA = 0, /* one token per step with full attention */
  VEGAS_MODE_VEGAS = 1,   /* self-speculative decoding with sparse drafting */
  /* VEGAS's rounds while they pay, else vanilla steps: the session times both
   * kinds of decode step on its device, model and batch (tokens per second,
   * per power-of-two bucket of decoding sequences), runs the faster, and tries
   * the slower now and then, so rarely that the tries cost at most 2% of the
   * time. Where the tuning profile (profile_path) marks a bucket of context
   * and batch "mode": "vanilla" (`vegas tune` found that Vegas did not pay
   * there), the session starts it with vanilla steps and tries rounds only
   * every 1024 steps. What it learns lasts as long as the session. Output is distributed
   * as in the other modes (greedy: the same tokens); the speculative options
   * and statistics are VEGAS mode's (rounds only). */
  VEGAS_MODE_AUTO = 2,
  VEGAS_MODE_FORCE32 = 0x7FFFFFFF
} vegas_decode_mode;

/* How a step shares the device between prompts and decoding sequences. */
typedef enum vegas_schedule {
  /* Default: decoding sequences advance in every step, next to prompt chunks
   * (lowest latency for sequences already streaming). */
  VEGAS_SCHEDULE_INTERLEAVE = 0,
  /* No sequence decodes while another's prompt is still being prefilled, so
   * decoding runs at the full batch (throughput benchmarks, batch jobs). */
  VEGAS_SCHEDULE_PREFILL_FIRST = 1
} vegas_schedule;

/* How a session stores its KV cache (vegas_session_options.kv_type). */
typedef enum vegas_kv_type {
  /* The backend's own precision: bf16 on CUDA, f32 on the CPU. */
  VEGAS_KV_DEFAULT = 0,
  /* e4m3 with a power-of-two scale per token and KV head: half of bf16's
   * bytes on CUDA (twice the tokens for the same kv_bytes, and up to twice as
   * fast where decoding reads a long context), at a small cost in accuracy.
   * The CPU backend rounds its cache to the same values (same outputs as
   * CUDA's fp8 cache, no memory saved). CUDA needs a head_dim that is a
   * multiple of 16 (UNSUPPORTED otherwise). */
  VEGAS_KV_FP8 = 1
} vegas_kv_type;

typedef struct vegas_session_options {
  uint32_t struct_size;
  uint64_t kv_bytes;     /* KV pool budget; 0 (default) = 256 MiB on CPU, 4 GiB on CUDA */
  int32_t page_size;     /* tokens per KV page, default 16 */
  int32_t max_batch;     /* sequences decoded together, default 64 */
  int32_t prefill_chunk; /* prompt tokens per prefill chunk, default 512 */
  int32_t mode;          /* vegas_decode_mode, default VANILLA */
  /* Selection policy name for VEGAS mode, NULL = "vegas" (in VEGAS_MODE_AUTO
   * "vegas+lookup" unless a draft model or token trees are asked for); "auto": the tuning
   * profile's (see profile_path; with its window_share). "lookup" drafts
   * without the model: each round's drafts are the tokens that followed
   * earlier occurrences of the sequence's last 4 (else 3, 2, 1) tokens in its
   * own prompt and output, the latest 8 voting (prompt lookup), verified as
   * usual (on a GPU a lookup round of few sequences drafts up to 10 tokens,
   * more than gamma, while its verify rows stay within 128: they cost about
   * one row's pass there);
   * "P+lookup" (e.g. "vegas+lookup") drafts each round by lookup or by P,
   * whichever has committed more tokens per second at this batch size (in
   * VEGAS_MODE_AUTO weighed against vanilla steps by the same measure). */
  const char *policy;
  int32_t gamma;      /* draft length in [1, 32], default 6; 0 = auto (profile, then refined) */
  float ratio;        /* selected share of the KV in (0, 1], default 0.07; 0 = auto */
  int32_t min_tokens; /* selection floor, default 256 */
  float window_share; /* share of the budget kept for recent tokens, default 0.5 */
  int32_t score_kind; /* vegas_score_kind used by the score-driven policies, default WEIGHT */
  int32_t sink;       /* policy "streaming": leading tokens always kept, default 16 */
  float top_p_mass;   /* policy "topp": attention mass to cover, default 0.9 */
  /* Policy "user": the caller's vtable (see vegas_select_policy below); the
   * session copies it and owns user_data from a successful create on (it calls
   * destroy once when freed). Ignored by other policies. */
  const struct vegas_select_policy *select_policy;
  int32_t schedule; /* vegas_schedule, default INTERLEAVE */
  /* The tuning profile (JSON, format "vegas-profile/1", written by `vegas
   * tune`) that auto knobs (gamma 0, ratio 0, policy "auto") start from. NULL
   * (default): <model dir>/vegas-profile.json when the model was loaded from a
   * directory holding one made on the same backend, else the built-in table
   * (vegas, window 0.5, gamma 6, ratio 0.07). A named file that is missing
   * (IO), malformed (FORMAT) or made for another backend (INVALID_ARGUMENT)
   * fails vegas_session_create. Per sequence, the bucket of its prompt length
   * and of the sequences active when it starts gives gamma and ratio, which
   * are then refined from the observed acceptance and step times (a warm-up,
   * a hysteresis window, at most 4 switches per sequence; see
   * vegas_session_get_switch). The policy is one per session: the one most of
   * the profile's buckets name. Knobs set explicitly stay fixed. With a
   * draft_model, gamma 0 starts at a bucket's "draft_model" gamma where `vegas
   * tune --draft-model` measured one. In VEGAS_MODE_AUTO the profile is read as
   * well (for its "mode", or with a draft_model its "draft_model" speedup),
   * whatever the knobs. */
  const char *profile_path;
  /* 1 (default): full KV pages of earlier sequences (finished or running)
   * serve a new sequence whose prompt starts with the same tokens, which then
   * prefills only the rest (at least its last two tokens); cached pages no
   * sequence holds are taken back, least recently used first, when the pool
   * needs them. The output is what it would be without the cache (the same
   * K/V values, up to the backend's arithmetic). 0: off. */
  int32_t prefix_cache;
  int32_t kv_type; /* vegas_kv_type, default DEFAULT */
  /* Token trees (VEGAS mode; LongSpec): each round drafts a tree instead of a
   * chain. Each of the first tree_depth draft levels branches into
   * tree_branches drafts (greedy: the draft's top tokens; sampling: draws
   * without replacement), then every branch goes on as a chain to depth
   * gamma; one verify pass checks every node (each attends to its own
   * ancestors only) and the longest accepted path is kept, so a round commits
   * what a chain would at least as often, for more draft rows. The output is
   * still distributed exactly as vanilla's (recursive rejection sampling over
   * the branches). tree_branches in [1, 8], default 1 (a chain); tree_depth
   * in [0, 32], default 0; a tree of more than 256 nodes at the session's largest
   * gamma and a policy that selects inside draft passes (quest) or drafts by
   * lookup are refused at vegas_session_create. Both backends run trees. */
  int32_t tree_branches;
  int32_t tree_depth;
  /* A separate draft model (VEGAS and AUTO modes; LongSpec): when not NULL,
   * rounds draft with this model (a smaller one of the same tokenizer: the
   * same vocabulary, checked) instead of the model's sparse passes, then the
   * model verifies as usual, so the output is still distributed exactly as
   * vanilla's. No KV selection is made (policy is not used; "lookup" and
   * "P+lookup" are refused, as are token trees), unless policy is "P+model"
   * (e.g. "vegas+model"): then each round drafts by the draft model or by P's
   * sparse passes, whichever has committed more tokens per second at this
   * batch size (P selects after every round), or "P@model" (e.g.
   * "vegas@model", SpecAttn): every round drafts by P's sparse passes, on
   * the sets P selects from the draft model's attention (its newest row's,
   * each model layer and head reading the draft's at the same relative
   * depth and place) at the round's start, the verify pass capturing no
   * scores; P must select from scores (not "full" or "quest"). The session keeps the draft
   * model alive, gives it a KV store of its own with the pool's slots (memory
   * beyond kv_bytes: the draft's bytes per token times the pool's tokens),
   * runs each prompt chunk through it right after the model, and catches it
   * up at the start of each round on the tokens it has not seen. Default
   * NULL. */
  const vegas_model *draft_model;
  /* With draft_model: > 0 makes its draft passes attend to the first `sink`
   * tokens and the last draft_window ones only (a sliding window); 0
   * (default): every token. */
  int32_t draft_window;
} vegas_session_options;
VEGAS_API void vegas_session_options_init_sized(vegas_session_options *options, size_t size);
static inline void vegas_session_options_init(vegas_session_options *options) {
  vegas_session_options_init_sized(options, sizeof(*options));
}

/* Creates a session on `model` (which it keeps alive). `options` may be NULL.
 * Errors: OUT_OF_MEMORY (the KV budget could not be allocated), INVALID_ARGUMENT,
 * UNSUPPORTED (unknown policy), NOT_BUILT. */
VEGAS_API vegas_status vegas_session_create(vegas_model *model,
                                            const vegas_session_options *options,
                                            vegas_session **out);
/* Frees the session, its sequences and its KV pool. NULL is a no-op. */
VEGAS_API void vegas_session_free(vegas_session *session);

typedef struct vegas_sampling_options {
  uint32_t struct_size;
  float temperature;        /* 0 = greedy (default) */
  int32_t top_k;            /* 0 = off */
  float top_p;              /* 1 = off (default) */
  float min_p;              /* 0 = off (default) */
  float repetition_penalty; /* 1 = off (default); divides positive logits of seen tokens */
  float presence_penalty;   /* 0 = off */
  float frequency_penalty;  /* 0 = off */
  int32_t penalty_last_n;   /* tokens looked back for penalties; -1 = all, default 64 */
  uint64_t seed;            /* the sequence's RNG seed, default 0 */
} vegas_sampling_options;
VEGAS_API void vegas_sampling_options_init_sized(vegas_sampling_options *options, size_t size);
static inline void vegas_sampling_options_init(vegas_sampling_options *options) {
  vegas_sampling_options_init_sized(options, sizeof(*options));
}

/* Called once per committed token, on the thread driving the session. `piece`
 * is the text that became final with this token (complete UTF-8, with any text
 * held back for a possible stop string released later); it may be empty, lives
 * only during the call, and is not NUL-terminated. Return non-zero to stop the
 * sequence (finish reason CALLBACK). Calling vegas_session_step/run/free from
 * inside the callback fails with VEGAS_ERR_WRONG_STATE. */
typedef int32_t (*vegas_token_fn)(int32_t seq_id, int32_t token, const char *piece,
                                  size_t piece_len, void *user_data);

/* The most alternatives a generated token's log-probabilities report. */
#define VEGAS_MAX_TOP_LOGPROBS 20

/* Which distribution vegas_request.logprobs reports. */
typedef enum vegas_logprobs_kind {
  VEGAS_LOGPROBS_OFF = 0,
  /* log_softmax of the model's raw logits: before penalties, temperature and
   * truncation, the same in every decode mode and sampling setting (what
   * OpenAI and vLLM report by default) */
  VEGAS_LOGPROBS_RAW = 1,
  /* the distribution the token was drawn from, after penalties, temperature,
   * top-k, top-p and min-p (llama.cpp's post_sampling_probs); tokens outside
   * it have -inf, greedy decoding has its argmax at 0 */
  VEGAS_LOGPROBS_PROCESSED = 2,
  VEGAS_LOGPROBS_FORCE32 = 0x7FFFFFFF
} vegas_logprobs_kind;

typedef struct vegas_request {
  uint32_t struct_size;
  const int32_t *prompt;                  /* prompt token ids, copied at submit */
  size_t n_prompt;                        /* >= 1 */
  const vegas_sampling_options *sampling; /* NULL = greedy */
  int32_t max_tokens;                     /* tokens to generate, default 128 */
  int32_t ignore_eos;                     /* 1 = do not stop at eos, default 0 */
  const int32_t *stop_ids;                /* extra stop token ids */
  size_t n_stop_ids;
  const char *const *stop_strings; /* NUL-terminated; the match is not part of the output */
  size_t n_stop_strings;
  vegas_token_fn on_token; /* optional */
  void *user_data;
  /* A vegas_logprobs_kind other than OFF: record each generated token's
   * log-probability and its top_logprobs (0 .. VEGAS_MAX_TOP_LOGPROBS) most
   * probable alternatives, read with vegas_sequence_get_logprobs. The
   * sequence's logit rows then come to the host whole: on a GPU its steps
   * (and, in VEGAS mode, its rounds) run slower. */
  int32_t logprobs;
  int32_t top_logprobs;
} vegas_request;
VEGAS_API void vegas_request_init_sized(vegas_request *request, size_t size);
static inline void vegas_request_init(vegas_request *request) {
  vegas_request_init_sized(request, sizeof(*request));
}

/* Adds a sequence; it starts at the next step. Writes its id to *seq_id.
 * Errors: INVALID_ARGUMENT, TOKEN_OUT_OF_RANGE, KV_FULL (the prompt alone does
 * not fit the pool). */
VEGAS_API vegas_status vegas_session_submit(vegas_session *session, const vegas_request *request,
                                            int32_t *seq_id);

/* One decoding round for every active sequence: prefill chunks of new prompts,
 * then one token (vanilla) or one draft-verify round (vegas) each. Writes the
 * number of sequences still active to *n_active (may be NULL). A sequence that
 * fails (e.g. KV_FULL) finishes with its status and keeps its tokens; the step
 * itself still succeeds. */
VEGAS_API vegas_status vegas_session_step(vegas_session *session, int32_t *n_active);

/* Steps until no sequence is active. */
VEGAS_API vegas_status vegas_session_run(vegas_session *session);

/* Asks sequence `seq_id` (or, with -1, every sequence submitted before this
 * call) to stop at the next round boundary; safe from any thread while another
 * drives the session. */
VEGAS_API vegas_status vegas_session_cancel(vegas_session *session, int32_t seq_id);

typedef enum vegas_finish_reason {
  VEGAS_FINISH_NONE = 0,      /* still running */
  VEGAS_FINISH_EOS = 1,       /* an end-of-sequence token */
  VEGAS_FINISH_LENGTH = 2,    /* max_tokens reached */
  VEGAS_FINISH_STOP = 3,      /* a stop id or stop string */
  VEGAS_FINISH_CALLBACK = 4,  /* the token callback returned non-zero */
  VEGAS_FINISH_CANCELLED = 5, /* vegas_session_cancel */
  VEGAS_FINISH_ERROR = 6,     /* see vegas_sequence_info.status */
  VEGAS_FINISH_FORCE32 = 0x7FFFFFFF
} vegas_finish_reason;

typedef struct vegas_sequence_info {
  uint32_t struct_size;
  int32_t finish_reason; /* vegas_finish_reason */
  int32_t status;        /* vegas_status of a sequence that finished with an error */
  int32_t n_prompt;
  int32_t n_generated;
  /* Speculative statistics (zero in vanilla mode). */
  int64_t rounds;
  int64_t drafted;
  int64_t accepted;
  double tokens_per_round; /* tau: committed tokens per round, corrected/bonus included */
  double prefill_seconds;
  double decode_seconds;
  /* VEGAS mode: the draft length and selection ratio the sequence uses now
   * (auto knobs change at switches) and how many switches it made. */
  int32_t gamma;
  float ratio;
  int64_t switches;
} vegas_sequence_info;
VEGAS_API vegas_status vegas_sequence_get_info(const vegas_session *session, int32_t seq_id,
                                               vegas_sequence_info *out);

/* The generated token ids (stop tokens excluded). Buffer convention above. */
VEGAS_API vegas_status vegas_sequence_tokens(const vegas_session *session, int32_t seq_id,
                                             int32_t *ids, size_t capacity, size_t *n_ids);
/* The generated text (stop string excluded), not NUL-terminated. */
VEGAS_API vegas_status vegas_sequence_text(const vegas_session *session, int32_t seq_id, char *text,
                                           size_t capacity, size_t *n_bytes);
/* One generated token's log-probabilities (vegas_request.logprobs: of the raw
 * logits or of the processed distribution at that position; speculative
 * decoding reports what vanilla decoding does). */
typedef struct vegas_token_logprobs {
  uint32_t struct_size;
  int32_t token;                           /* the generated token */
  float logprob;                           /* its log-probability */
  int32_t n_top;                           /* entries below: the request's top_logprobs */
  int32_t top_ids[VEGAS_MAX_TOP_LOGPROBS]; /* most probable first; equal: lower id first */
  float top_logprobs[VEGAS_MAX_TOP_LOGPROBS];
} vegas_token_logprobs;
/* Fills `out` (set out->struct_size first) for generated token `index`, 0 <=
 * index < vegas_sequence_info.n_generated, in the order of
 * vegas_sequence_tokens. Callable from the token callback (the entry of the
 * token just committed is there; an eos or stop id ends the sequence without
 * one). Errors: NOT_FOUND (no such sequence or index), WRONG_STATE (the request
 * did not ask for logprobs). */
VEGAS_API vegas_status vegas_sequence_get_logprobs(const vegas_session *session, int32_t seq_id,
                                                   int64_t index, vegas_token_logprobs *out);
/* Forgets a finished sequence (a running one is cancelled) and frees its KV. */
VEGAS_API vegas_status vegas_sequence_release(vegas_session *session, int32_t seq_id);

/* ------------------------------------------------------- selection policy */

/* A custom KV selection policy (DESIGN.md §5, policy "user"). In VEGAS mode,
 * after each verification and for every layer of every sequence, the library
 * reduces the attention of the first and the last verify row to one score per
 * candidate position (the mean over both rows and all query heads, of the
 * softmax weight or of the logit, see vegas_score_kind) and asks the policy
 * which candidates the next drafting round attends to. Candidates are the
 * positions [0, n_candidates); positions from n_candidates on (tokens after the
 * selection point) are always attended and are never candidates. */

typedef enum vegas_score_kind {
  VEGAS_SCORE_WEIGHT = 0, /* softmax weight exp(logit - lse), in [0, 1] (default) */
  VEGAS_SCORE_LOGIT = 1,  /* pre-softmax logit, scale * q.k */
  VEGAS_SCORE_FORCE32 = 0x7FFFFFFF
} vegas_score_kind;

/* What the library hands to vegas_select_policy.select. Filled by the library;
 * a policy compiled against a newer vegas.h reads only the fields struct_size
 * covers. Every pointer is valid only during the call. */
typedef struct vegas_select_input {
  uint32_t struct_size; /* sizeof(vegas_select_input) as the library knows it */
  int32_t seq_id;       /* the sequence, as vegas_session_submit returned it */
  int32_t layer;        /* in [0, n_layers); one call per layer */
  int32_t n_layers;
  int32_t n_candidates;     /* candidate positions are [0, n_candidates) */
  int32_t budget;           /* the built-in policies' k = clamp(ceil(ratio * n), min_tokens, n) */
  int32_t score_kind;       /* vegas_score_kind of `scores` */
  int32_t scores_on_device; /* 0: host pointers; 1: `scores` and `out_positions` are CUDA
                               device memory, ordered on `stream` */
  const float *scores;      /* n_candidates scores, larger = more important */
  void *stream;             /* the cudaStream_t of device scores, NULL for host scores */
} vegas_select_input;

/* The vtable of a custom policy. The library copies the struct when it takes the
 * policy; user_data stays the caller's memory, and from then on the library
 * calls destroy(user_data) exactly once when it drops the policy (not at all if
 * taking the policy failed). Every callback runs on the thread that drives the
 * session, never two at once for one policy; callbacks must not call libvegas
 * functions on the same session. */
typedef struct vegas_select_policy {
  uint32_t struct_size; /* sizeof(vegas_select_policy) */
  void *user_data;      /* passed back to every callback */
  /* Required. Writes the chosen positions to out_positions in strictly
   * ascending order, each in [0, n_candidates); capacity >= n_candidates.
   * Returns how many it wrote (0 is allowed: drafting then attends only to the
   * tokens after the selection point), or a negative vegas_status to fail the
   * round (the sequence then finishes with that status). */
  int32_t (*select)(const vegas_select_input *input, int32_t *out_positions, int32_t capacity,
                    void *user_data);
  /* Optional (may be NULL). Sequence seq_id has ended: forget its state. */
  void (*reset)(int32_t seq_id, void *user_data);
  /* Optional (may be NULL). The library no longer uses the policy. */
  void (*destroy)(void *user_data);
} vegas_select_policy;

/* Speculative statistics of a session, summed over its sequences since it was
 * created (all zero in VANILLA mode). */
#define VEGAS_MAX_GAMMA 32
typedef struct vegas_session_stats {
  uint32_t struct_size;
  int32_t gamma;     /* the session's draft length; with gamma auto, the longest one used so far */
  int64_t rounds;    /* draft-verify rounds (one per sequence per step) */
  int64_t drafted;   /* draft tokens proposed */
  int64_t accepted;  /* draft tokens accepted */
  int64_t committed; /* tokens committed by rounds: accepted + corrected/bonus */
  double tokens_per_round; /* tau = committed / rounds */
  double draft_seconds;    /* wall time in drafting, verification and selection */
  double verify_seconds;
  double select_seconds;
  int64_t drafted_at[VEGAS_MAX_GAMMA];  /* rounds that drafted position i */
  int64_t accepted_at[VEGAS_MAX_GAMMA]; /* rounds whose draft i was accepted */
  int64_t switches;                     /* automatic gamma/ratio switches of all sequences */
} vegas_session_stats;
/* Fills `out` (set out->struct_size first). */
VEGAS_API vegas_status vegas_session_get_stats(const vegas_session *session,
                                               vegas_session_stats *out);
/* The prefix cache (vegas_session_options.prefix_cache) since the session was
 * made: prompt tokens served from cached pages instead of prefilled, and
 * cached pages taken back for new tokens. Either pointer may be NULL. */
VEGAS_API vegas_status vegas_session_get_cache_stats(const vegas_session *session,
                                                     int64_t *hit_tokens, int64_t *evicted_pages);

/* One automatic switch of a sequence's gamma or ratio (auto knobs, see
 * vegas_session_options.profile_path). */
typedef struct vegas_switch_info {
  uint32_t struct_size;
  int32_t seq_id;
  int64_t round; /* the sequence's rounds before the switch; the new setting drafts the next */
  int32_t from_gamma;
  int32_t to_gamma;
  float from_ratio;
  float to_ratio;
  double tau_ema; /* the sequence's moving average of tokens per round when it switched */
} vegas_switch_info;
/* Fills `out` (set out->struct_size first) with switch number `index`, in the
 * order they happened, 0 <= index < vegas_session_stats.switches. The session
 * keeps the last 4096: an older index fails with NOT_FOUND, as does one past
 * the end. */
VEGAS_API vegas_status vegas_session_get_switch(const vegas_session *session, int64_t index,
                                                vegas_switch_info *out);

/* ------------------------------------------------------------- one call */

typedef struct vegas_generate_options {
  uint32_t struct_size;
  int32_t max_tokens;                     /* default 128 */
  const vegas_sampling_options *sampling; /* NULL = greedy */
  const vegas_session_options *session;   /* NULL = defaults */
  vegas_token_fn on_token;                /* optional streaming */
  void *user_data;
} vegas_generate_options;
VEGAS_API void vegas_generate_options_init_sized(vegas_generate_options *options, size_t size);
static inline void vegas_generate_options_init(vegas_generate_options *options) {
  vegas_generate_options_init_sized(options, sizeof(*options));
}

/* Tokenizes `prompt` (special tokens parsed), generates in a private session and
 * writes the completion (not NUL-terminated) to `text`; its length goes to
 * *n_bytes. When the buffer is short the generation is kept nowhere: size the
 * buffer generously or use a session. */
VEGAS_API vegas_status vegas_generate(vegas_model *model, const char *prompt,
                                      const vegas_generate_options *options, char *text,
                                      size_t capacity, size_t *n_bytes);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* VEGAS_H */

package vegas

// #include <vegas.h>
import "C"

import (
	"strings"
	"unsafe"
)

// Mode is how a session decodes.
type Mode int32

// The decode modes of vegas.h.
const (
	ModeVanilla Mode = C.VEGAS_MODE_VANILLA // one token per step, full attention
	ModeVegas   Mode = C.VEGAS_MODE_VEGAS   // self-speculative decoding with sparse drafting
	ModeAuto    Mode = C.VEGAS_MODE_AUTO    // ModeVegas's rounds while they pay, else vanilla steps
)

// Schedule is how a step shares the device between prompts and decoding sequences.
type Schedule int32

// The schedules of vegas.h.
const (
	// ScheduleInterleave (default): decoding sequences advance in every step,
	// next to prompt chunks.
	ScheduleInterleave Schedule = C.VEGAS_SCHEDULE_INTERLEAVE
	// SchedulePrefillFirst: no sequence decodes while a prompt is being
	// prefilled, so decoding runs at the full batch.
	SchedulePrefillFirst Schedule = C.VEGAS_SCHEDULE_PREFILL_FIRST
)

// KVType is how a session stores its KV cache.
type KVType int32

// The KV cache types of vegas.h.
const (
	// KVDefault: the backend's own precision (bf16 on CUDA, f32 on the CPU).
	KVDefault KVType = C.VEGAS_KV_DEFAULT
	// KVFP8: e4m3 with a power-of-two scale per token and KV head, half of
	// bf16's bytes on CUDA.
	KVFP8 KVType = C.VEGAS_KV_FP8
)

// SessionOptions configures a session. Start from DefaultSessionOptions: the
// fields are passed as they are (a zero PageSize is an error, not a default).
type SessionOptions struct {
	KVBytes      uint64  // KV pool budget; 0 = 256 MiB on CPU, 4 GiB on CUDA
	PageSize     int32   // tokens per KV page
	MaxBatch     int32   // sequences decoded together
	PrefillChunk int32   // prompt tokens per prefill chunk
	Mode         Mode    // VANILLA or VEGAS
	Policy       string  // selection policy for ModeVegas ("vegas", "streaming", "quest", ...); "": the library's (vegas; ModeAuto: vegas+lookup)
	Gamma        int32   // draft length
	Ratio        float32 // selected share of the KV
	MinTokens    int32   // selection floor
	WindowShare  float32 // share of the budget kept for recent tokens
	ScoreKind    int32   // vegas_score_kind of the score-driven policies
	Sink         int32   // policy "streaming": leading tokens always kept
	TopPMass     float32 // policy "topp": attention mass to cover
	Schedule     Schedule
	KVType       KVType
	// Token trees: the first TreeDepth draft levels branch into TreeBranches
	// drafts (1 = a chain, the default); the CPU backend only, for now.
	TreeBranches int32
	TreeDepth    int32
}

// DefaultSessionOptions are the library's defaults.
func DefaultSessionOptions() SessionOptions {
	var a cArena
	defer a.free()
	c := (*C.vegas_session_options)(a.alloc(unsafe.Sizeof(C.vegas_session_options{})))
	C.vegas_session_options_init_sized(c, C.size_t(unsafe.Sizeof(*c)))
	policy := "" // the library's default
	if c.policy != nil {
		policy = C.GoString(c.policy)
	}
	return SessionOptions{
		KVBytes: uint64(c.kv_bytes), PageSize: int32(c.page_size), MaxBatch: int32(c.max_batch),
		PrefillChunk: int32(c.prefill_chunk), Mode: Mode(c.mode), Policy: policy, Gamma: int32(c.gamma),
		Ratio: float32(c.ratio), MinTokens: int32(c.min_tokens), WindowShare: float32(c.window_share),
		ScoreKind: int32(c.score_kind), Sink: int32(c.sink), TopPMass: float32(c.top_p_mass),
		Schedule: Schedule(c.schedule), KVType: KVType(c.kv_type),
		TreeBranches: int32(c.tree_branches), TreeDepth: int32(c.tree_depth),
	}
}

// toC writes the options into C memory owned by a.
func (o *SessionOptions) toC(a *cArena) (*C.vegas_session_options, error) {
	c := (*C.vegas_session_options)(a.alloc(unsafe.Sizeof(C.vegas_session_options{})))
	C.vegas_session_options_init_sized(c, C.size_t(unsafe.Sizeof(*c)))
	if o == nil {
		return c, nil
	}
	if strings.IndexByte(o.Policy, 0) >= 0 {
		return nil, &Error{Op: "vegas_session_create", Status: ErrInvalidArgument, Message: "policy contains a NUL byte"}
	}
	c.kv_bytes = C.uint64_t(o.KVBytes)
	c.page_size = C.int32_t(o.PageSize)
	c.max_batch = C.int32_t(o.MaxBatch)
	c.prefill_chunk = C.int32_t(o.PrefillChunk)
	c.mode = C.int32_t(o.Mode)
	if o.Policy != "" {
		c.policy = a.cstring(o.Policy)
	}
	c.gamma = C.int32_t(o.Gamma)
	c.ratio = C.float(o.Ratio)
	c.min_tokens = C.int32_t(o.MinTokens)
	c.window_share = C.float(o.WindowShare)
	c.score_kind = C.int32_t(o.ScoreKind)
	c.sink = C.int32_t(o.Sink)
	c.top_p_mass = C.float(o.TopPMass)
	c.schedule = C.int32_t(o.Schedule)
	c.kv_type = C.int32_t(o.KVType)
	c.tree_branches = C.int32_t(o.TreeBranches)
	c.tree_depth = C.int32_t(o.TreeDepth)
	return c, nil
}

// Sampling is how a sequence picks its tokens. Start from DefaultSampling
// (greedy); a nil *Sampling is greedy too.
type Sampling struct {
	Temperature       float32 // 0 = greedy
	TopK              int32   // 0 = off
	TopP              float32 // 1 = off
	MinP              float32 // 0 = off
	RepetitionPenalty float32 // 1 = off
	PresencePenalty   float32 // 0 = off
	FrequencyPenalty  float32 // 0 = off
	PenaltyLastN      int32   // tokens looked back for penalties; -1 = all
	Seed              uint64
}

// DefaultSampling is the library's default: greedy.
func DefaultSampling() Sampling {
	var a cArena
	defer a.free()
	c := (*C.vegas_sampling_options)(a.alloc(unsafe.Sizeof(C.vegas_sampling_options{})))
	C.vegas_sampling_options_init_sized(c, C.size_t(unsafe.Sizeof(*c)))
	return Sampling{
		Temperature: float32(c.temperature), TopK: int32(c.top_k), TopP: float32(c.top_p), MinP: float32(c.min_p),
		RepetitionPenalty: float32(c.repetition_penalty), PresencePenalty: float32(c.presence_penalty),
		FrequencyPenalty: float32(c.frequency_penalty), PenaltyLastN: int32(c.penalty_last_n), Seed: uint64(c.seed),
	}
}

func (s *Sampling) toC(a *cArena) *C.vegas_sampling_options {
	if s == nil {
		return nil
	}
	c := (*C.vegas_sampling_options)(a.alloc(unsafe.Sizeof(C.vegas_sampling_options{})))
	C.vegas_sampling_options_init_sized(c, C.size_t(unsafe.Sizeof(*c)))
	c.temperature = C.float(s.Temperature)
	c.top_k = C.int32_t(s.TopK)
	c.top_p = C.float(s.TopP)
	c.min_p = C.float(s.MinP)
	c.repetition_penalty = C.float(s.RepetitionPenalty)
	c.presence_penalty = C.float(s.PresencePenalty)
	c.frequency_penalty = C.float(s.FrequencyPenalty)
	c.penalty_last_n = C.int32_t(s.PenaltyLastN)
	c.seed = C.uint64_t(s.Seed)
	return c
}

// Request is one sequence to generate.
type Request struct {
	Prompt      []int32   // prompt token ids, at least one
	Sampling    *Sampling // nil = greedy
	MaxTokens   int32     // tokens to generate; 0 = the library's default (128)
	IgnoreEOS   bool      // do not stop at eos
	StopIDs     []int32   // extra stop token ids
	StopStrings []string  // the match is not part of the output
	// OnToken, if set, is called once per committed token on the goroutine
	// driving the session; returning true stops the sequence (FinishCallback),
	// as a non-zero return does in C and true in Python and Rust.
	// It may call the session's Cancel, Sequence, Tokens, Text and Stats.
	OnToken func(Token) bool
}

func (r *Request) toC(a *cArena) (*C.vegas_request, error) {
	for _, s := range r.StopStrings {
		if strings.IndexByte(s, 0) >= 0 {
			return nil, &Error{Op: "vegas_session_submit", Status: ErrInvalidArgument, Message: "a stop string contains a NUL byte"}
		}
	}
	c := (*C.vegas_request)(a.alloc(unsafe.Sizeof(C.vegas_request{})))
	C.vegas_request_init_sized(c, C.size_t(unsafe.Sizeof(*c)))
	c.prompt = a.int32s(r.Prompt)
	c.n_prompt = C.size_t(len(r.Prompt))
	c.sampling = r.Sampling.toC(a)
	if r.MaxTokens != 0 {
		c.max_tokens = C.int32_t(r.MaxTokens)
	}
	c.ignore_eos = cflag(r.IgnoreEOS)
	c.stop_ids = a.int32s(r.StopIDs)
	c.n_stop_ids = C.size_t(len(r.StopIDs))
	c.stop_strings = a.cstrings(r.StopStrings)
	c.n_stop_strings = C.size_t(len(r.StopStrings))
	return c, nil
}

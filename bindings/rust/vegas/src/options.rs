//! Option structs of vegas.h as plain Rust structs. `Default` takes the library's defaults
//! (from the matching `*_init_sized`), so a field left alone means what it means in C.
use vegas_sys as sys;

/// Which compute backend a model runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Backend {
    /// CUDA when built and a device is present, else CPU.
    Auto,
    Cpu,
    Cuda,
}

impl Backend {
    pub(crate) fn raw(self) -> i32 {
        match self {
            Backend::Auto => sys::VEGAS_BACKEND_AUTO,
            Backend::Cpu => sys::VEGAS_BACKEND_CPU,
            Backend::Cuda => sys::VEGAS_BACKEND_CUDA,
        }
    }

    pub(crate) fn from_raw(raw: i32) -> Backend {
        match raw {
            sys::VEGAS_BACKEND_CPU => Backend::Cpu,
            sys::VEGAS_BACKEND_CUDA => Backend::Cuda,
            _ => Backend::Auto,
        }
    }
}

/// How a session decodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    /// One token per step with full attention.
    Vanilla,
    /// Self-speculative decoding with sparse drafting (lossless).
    Vegas,
    /// Vegas rounds while they pay on this device, else vanilla steps (lossless).
    Auto,
}

/// How a step shares the device between prompts and decoding sequences.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Schedule {
    /// Decoding sequences advance in every step, next to prompt chunks (the default).
    Interleave,
    /// No sequence decodes while another's prompt is still being prefilled.
    PrefillFirst,
}

impl Schedule {
    pub(crate) fn raw(self) -> i32 {
        match self {
            Schedule::Interleave => sys::VEGAS_SCHEDULE_INTERLEAVE,
            Schedule::PrefillFirst => sys::VEGAS_SCHEDULE_PREFILL_FIRST,
        }
    }

    pub(crate) fn from_raw(raw: i32) -> Schedule {
        if raw == sys::VEGAS_SCHEDULE_PREFILL_FIRST {
            Schedule::PrefillFirst
        } else {
            Schedule::Interleave
        }
    }
}

/// How a session stores its KV cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KvType {
    /// The backend's own precision: bf16 on CUDA, f32 on the CPU (the default).
    Default,
    /// e4m3 with a power-of-two scale per token and KV head: half of bf16's bytes on CUDA.
    Fp8,
}

/// What the score-driven selection policies rank by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScoreKind {
    /// Softmax weight, in [0, 1].
    Weight,
    /// Pre-softmax logit.
    Logit,
}

impl ScoreKind {
    pub(crate) fn raw(self) -> i32 {
        match self {
            ScoreKind::Weight => sys::VEGAS_SCORE_WEIGHT,
            ScoreKind::Logit => sys::VEGAS_SCORE_LOGIT,
        }
    }

    pub(crate) fn from_raw(raw: i32) -> ScoreKind {
        if raw == sys::VEGAS_SCORE_LOGIT {
            ScoreKind::Logit
        } else {
            ScoreKind::Weight
        }
    }
}

/// Why a sequence ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FinishReason {
    /// Still running.
    None,
    Eos,
    Length,
    /// A stop id or stop string.
    Stop,
    /// The token callback asked to stop.
    Callback,
    /// `Session::cancel` or a `CancelHandle`.
    Cancelled,
    /// See `SequenceInfo::status`.
    Error,
}

impl FinishReason {
    pub(crate) fn from_raw(raw: i32) -> FinishReason {
        match raw {
            sys::VEGAS_FINISH_EOS => FinishReason::Eos,
            sys::VEGAS_FINISH_LENGTH => FinishReason::Length,
            sys::VEGAS_FINISH_STOP => FinishReason::Stop,
            sys::VEGAS_FINISH_CALLBACK => FinishReason::Callback,
            sys::VEGAS_FINISH_CANCELLED => FinishReason::Cancelled,
            sys::VEGAS_FINISH_ERROR => FinishReason::Error,
            _ => FinishReason::None,
        }
    }
}

/// A C option struct filled by its `*_init_sized` function, which is told this crate's size
/// of the struct: a library whose struct is larger writes only that much, one whose struct
/// is smaller leaves the rest zero (vegas.h, "Structs that grow"). Every option struct
/// starts with `uint32_t struct_size`, which the init sets to that size.
pub(crate) fn init<T: Copy>(f: unsafe extern "C" fn(*mut T, usize)) -> T {
    let mut c = std::mem::MaybeUninit::<T>::zeroed();
    // SAFETY: the option structs are plain C data (integers, floats, raw pointers,
    // nullable function pointers), for which all-zero bytes are a valid value; the init
    // writes at most size_of::<T>() bytes into it.
    unsafe {
        f(c.as_mut_ptr(), std::mem::size_of::<T>());
        c.assume_init()
    }
}

/// `vegas_model_options` (without the progress callback: see `Model::load_with_progress`).
#[derive(Debug, Clone, PartialEq)]
pub struct ModelOptions {
    pub backend: Backend,
    /// CUDA device.
    pub device_index: i32,
    /// CPU threads; 0 = all cores.
    pub n_threads: i32,
}

impl Default for ModelOptions {
    fn default() -> Self {
        let c = init(sys::vegas_model_options_init_sized);
        ModelOptions {
            backend: Backend::from_raw(c.backend),
            device_index: c.device_index,
            n_threads: c.n_threads,
        }
    }
}

impl ModelOptions {
    pub(crate) fn to_c(&self) -> sys::vegas_model_options {
        let mut c = init(sys::vegas_model_options_init_sized);
        c.backend = self.backend.raw();
        c.device_index = self.device_index;
        c.n_threads = self.n_threads;
        c
    }
}

/// `vegas_session_options` (a custom policy goes to `Model::session_with_policy`).
#[derive(Debug, Clone, PartialEq)]
pub struct SessionOptions {
    /// KV pool budget in bytes; 0 = the backend's default.
    pub kv_bytes: u64,
    pub page_size: i32,
    pub max_batch: i32,
    pub prefill_chunk: i32,
    pub mode: Mode,
    /// Selection policy of Vegas mode; `None` = "vegas" (auto mode: "vegas+lookup").
    pub policy: Option<String>,
    pub gamma: i32,
    pub ratio: f32,
    pub min_tokens: i32,
    pub window_share: f32,
    pub score_kind: ScoreKind,
    pub sink: i32,
    pub top_p_mass: f32,
    pub schedule: Schedule,
    pub kv_type: KvType,
    /// Token trees: the first `tree_depth` draft levels branch into
    /// `tree_branches` drafts (1 = a chain, the default); CPU backend only, for now.
    pub tree_branches: i32,
    pub tree_depth: i32,
}

impl Default for SessionOptions {
    fn default() -> Self {
        let c = init(sys::vegas_session_options_init_sized);
        SessionOptions {
            kv_bytes: c.kv_bytes,
            page_size: c.page_size,
            max_batch: c.max_batch,
            prefill_chunk: c.prefill_chunk,
            mode: match c.mode {
                sys::VEGAS_MODE_VEGAS => Mode::Vegas,
                sys::VEGAS_MODE_AUTO => Mode::Auto,
                _ => Mode::Vanilla,
            },
            policy: None,
            gamma: c.gamma,
            ratio: c.ratio,
            min_tokens: c.min_tokens,
            window_share: c.window_share,
            score_kind: ScoreKind::from_raw(c.score_kind),
            sink: c.sink,
            top_p_mass: c.top_p_mass,
            schedule: Schedule::from_raw(c.schedule),
            kv_type: if c.kv_type == sys::VEGAS_KV_FP8 { KvType::Fp8 } else { KvType::Default },
            tree_branches: c.tree_branches,
            tree_depth: c.tree_depth,
        }
    }
}

impl SessionOptions {
    /// The C struct; `policy` must outlive its use (it points into it).
    pub(crate) fn to_c(&self, policy: Option<&std::ffi::CString>) -> sys::vegas_session_options {
        let mut c = init(sys::vegas_session_options_init_sized);
        c.kv_bytes = self.kv_bytes;
        c.page_size = self.page_size;
        c.max_batch = self.max_batch;
        c.prefill_chunk = self.prefill_chunk;
        c.mode = match self.mode {
            Mode::Vanilla => sys::VEGAS_MODE_VANILLA,
            Mode::Vegas => sys::VEGAS_MODE_VEGAS,
            Mode::Auto => sys::VEGAS_MODE_AUTO,
        };
        c.policy = policy.map_or(std::ptr::null(), |p| p.as_ptr());
        c.gamma = self.gamma;
        c.ratio = self.ratio;
        c.min_tokens = self.min_tokens;
        c.window_share = self.window_share;
        c.score_kind = self.score_kind.raw();
        c.sink = self.sink;
        c.top_p_mass = self.top_p_mass;
        c.schedule = self.schedule.raw();
        c.kv_type = match self.kv_type {
            KvType::Default => sys::VEGAS_KV_DEFAULT,
            KvType::Fp8 => sys::VEGAS_KV_FP8,
        };
        c.tree_branches = self.tree_branches;
        c.tree_depth = self.tree_depth;
        c
    }
}

/// `vegas_sampling_options`: the default (temperature 0) is greedy.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sampling {
    pub temperature: f32,
    pub top_k: i32,
    pub top_p: f32,
    pub min_p: f32,
    pub repetition_penalty: f32,
    pub presence_penalty: f32,
    pub frequency_penalty: f32,
    /// Tokens looked back for penalties; -1 = all.
    pub penalty_last_n: i32,
    pub seed: u64,
}

impl Default for Sampling {
    fn default() -> Self {
        let c = init(sys::vegas_sampling_options_init_sized);
        Sampling {
            temperature: c.temperature,
            top_k: c.top_k,
            top_p: c.top_p,
            min_p: c.min_p,
            repetition_penalty: c.repetition_penalty,
            presence_penalty: c.presence_penalty,
            frequency_penalty: c.frequency_penalty,
            penalty_last_n: c.penalty_last_n,
            seed: c.seed,
        }
    }
}

impl Sampling {
    pub(crate) fn to_c(self) -> sys::vegas_sampling_options {
        let mut c = init(sys::vegas_sampling_options_init_sized);
        c.temperature = self.temperature;
        c.top_k = self.top_k;
        c.top_p = self.top_p;
        c.min_p = self.min_p;
        c.repetition_penalty = self.repetition_penalty;
        c.presence_penalty = self.presence_penalty;
        c.frequency_penalty = self.frequency_penalty;
        c.penalty_last_n = self.penalty_last_n;
        c.seed = self.seed;
        c
    }
}

/// One sequence to generate: a prompt of token ids and how to continue it.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub prompt: Vec<i32>,
    /// Tokens to generate.
    pub max_tokens: i32,
    pub sampling: Sampling,
    /// Do not stop at eos.
    pub ignore_eos: bool,
    pub stop_ids: Vec<i32>,
    /// Strings that end the sequence; the match is not part of the output.
    pub stop_strings: Vec<String>,
}

impl Request {
    /// A greedy request for `prompt` with the library's default length.
    pub fn new(prompt: &[i32]) -> Request {
        let c = init(sys::vegas_request_init_sized);
        Request {
            prompt: prompt.to_vec(),
            max_tokens: c.max_tokens,
            sampling: Sampling::default(),
            ignore_eos: c.ignore_eos != 0,
            stop_ids: Vec::new(),
            stop_strings: Vec::new(),
        }
    }

    pub fn max_tokens(mut self, n: i32) -> Request {
        self.max_tokens = n;
        self
    }

    pub fn sampling(mut self, sampling: Sampling) -> Request {
        self.sampling = sampling;
        self
    }

    pub fn ignore_eos(mut self, yes: bool) -> Request {
        self.ignore_eos = yes;
        self
    }

    pub fn stop_string(mut self, stop: &str) -> Request {
        self.stop_strings.push(stop.to_string());
        self
    }

    pub fn stop_id(mut self, id: i32) -> Request {
        self.stop_ids.push(id);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Stands for a library whose struct is smaller than this crate's: it writes only its
    /// own part, and `init` must still hand back a well-formed struct of this crate's size.
    unsafe extern "C" fn older_init(p: *mut sys::vegas_session_options, size: usize) {
        assert_eq!(size, std::mem::size_of::<sys::vegas_session_options>());
        std::ptr::write_bytes(p as *mut u8, 0x11, 40);
        *(p as *mut u32) = size as u32;
    }

    #[test]
    fn init_tells_the_library_this_crates_size() {
        let c = init(older_init);
        assert_eq!(
            c.struct_size as usize,
            std::mem::size_of::<sys::vegas_session_options>()
        );
        assert_eq!(c.page_size, 0x11111111);
        assert_eq!(c.schedule, 0);
        let real = init(sys::vegas_session_options_init_sized);
        assert_eq!(real.page_size, 16);
        assert_eq!(real.schedule, sys::VEGAS_SCHEDULE_INTERLEAVE);
    }
}

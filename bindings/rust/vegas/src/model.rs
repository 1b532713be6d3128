//! Models: load a Hugging Face directory, query it, make sessions, generate in one call.
use std::ffi::CStr;
use std::os::raw::{c_char, c_void};
use std::panic;
use std::path::Path;
use std::ptr::{self, NonNull};
use std::sync::Arc;

use crate::buffer::{c_path, c_string};
use crate::callback::{progress_to_closure, token_to_closure, ProgressSink, TokenSink};
use crate::error::{check, Error, Result, Status};
use crate::options::{init, Backend, ModelOptions, Sampling, SessionOptions};
use crate::policy::SelectPolicy;
use crate::session::{Session, Token};
use crate::tokenizer::Tokenizer;
use vegas_sys as sys;

/// What `vegas_model_get_info` reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelInfo {
    /// The backend actually used.
    pub backend: Backend,
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
    pub architecture: String,
}

/// The one owned reference to a vegas_model; freed when the last `Model` clone and the
/// last `Session` made from it are gone.
struct Handle(NonNull<sys::vegas_model>);

// SAFETY: a vegas_model is immutable after load; vegas.h allows every call taking it
// (queries, tokenizer, session creation, vegas_generate) from any number of threads at
// once. vegas_model_free runs only in Drop, when no other reference exists.
unsafe impl Send for Handle {}
unsafe impl Sync for Handle {}

impl Drop for Handle {
    fn drop(&mut self) {
        unsafe { sys::vegas_model_free(self.0.as_ptr()) }
    }
}

/// A loaded model: cheap to clone (shared), `Send + Sync`. Sessions hold a clone, so a
/// model lives at least as long as its sessions.
#[derive(Clone)]
pub struct Model {
    handle: Arc<Handle>,
}

/// Options of `Model::generate`, the one-call completion.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GenerateOptions {
    /// Tokens to generate; `None` = the library's default.
    pub max_tokens: Option<i32>,
    pub sampling: Sampling,
    /// `None` = the library's default session.
    pub session: Option<SessionOptions>,
}

impl Model {
    /// Loads a model directory with the default options (backend AUTO).
    pub fn load(dir: impl AsRef<Path>) -> Result<Model> {
        Model::load_with(dir, &ModelOptions::default())
    }

    pub fn load_with(dir: impl AsRef<Path>, options: &ModelOptions) -> Result<Model> {
        let dir = c_path(dir.as_ref())?;
        let opts = options.to_c();
        let mut out = ptr::null_mut();
        check(unsafe { sys::vegas_model_load(dir.as_ptr(), &opts, &mut out) })?;
        Ok(Model::from_raw(out))
    }

    /// Loads with a progress closure called with a fraction in [0, 1]; returning true
    /// cancels the load (`Status::Cancelled`). A panic in it cancels and resumes here.
    pub fn load_with_progress<F: FnMut(f32) -> bool>(
        dir: impl AsRef<Path>,
        options: &ModelOptions,
        progress: F,
    ) -> Result<Model> {
        let dir = c_path(dir.as_ref())?;
        let mut sink = ProgressSink {
            f: progress,
            panic: None,
        };
        let mut opts = options.to_c();
        opts.progress = Some(progress_to_closure::<F>);
        opts.progress_user_data = &mut sink as *mut ProgressSink<F> as *mut c_void;
        let mut out = ptr::null_mut();
        let status = unsafe { sys::vegas_model_load(dir.as_ptr(), &opts, &mut out) };
        if let Some(p) = sink.panic.take() {
            if !out.is_null() {
                unsafe { sys::vegas_model_free(out) };
            }
            panic::resume_unwind(p);
        }
        check(status)?;
        Ok(Model::from_raw(out))
    }

    /// A model of config.json's shapes with deterministic random weights (CUDA only, no
    /// tokenizer): for benchmarks of models that are not on disk.
    pub fn synthetic(
        config_json: impl AsRef<Path>,
        seed: u64,
        options: &ModelOptions,
    ) -> Result<Model> {
        let path = c_path(config_json.as_ref())?;
        let opts = options.to_c();
        let mut out = ptr::null_mut();
        check(unsafe { sys::vegas_model_load_synthetic(path.as_ptr(), seed, &opts, &mut out) })?;
        Ok(Model::from_raw(out))
    }

    fn from_raw(ptr: *mut sys::vegas_model) -> Model {
        let ptr = NonNull::new(ptr).expect("libvegas returned OK and a NULL model");
        Model {
            handle: Arc::new(Handle(ptr)),
        }
    }

    pub(crate) fn raw(&self) -> *mut sys::vegas_model {
        self.handle.0.as_ptr()
    }

    pub fn info(&self) -> Result<ModelInfo> {
        let mut c: sys::vegas_model_info = unsafe { std::mem::zeroed() };
        c.struct_size = std::mem::size_of::<sys::vegas_model_info>() as u32;
        check(unsafe { sys::vegas_model_get_info(self.raw(), &mut c) })?;
        let arch = unsafe { CStr::from_ptr(c.architecture.as_ptr()) };
        Ok(ModelInfo {
            backend: Backend::from_raw(c.backend),
            n_layers: c.n_layers,
            hidden_size: c.hidden_size,
            n_heads: c.n_heads,
            n_kv_heads: c.n_kv_heads,
            head_dim: c.head_dim,
            vocab_size: c.vocab_size,
            max_context: c.max_context,
            n_params: c.n_params,
            weight_bytes: c.weight_bytes,
            kv_bytes_per_token: c.kv_bytes_per_token,
            architecture: arch.to_string_lossy().into_owned(),
        })
    }

    /// The model's tokenizer, borrowed for as long as this `Model` value is.
    /// Fails for a synthetic model, which has none.
    pub fn tokenizer(&self) -> Result<Tokenizer<'_>> {
        let ptr = unsafe { sys::vegas_model_tokenizer(self.raw()) };
        match NonNull::new(ptr as *mut sys::vegas_tokenizer) {
            Some(p) => Ok(Tokenizer::borrowed(p)),
            None => Err(Error::last(Status::NotFound)),
        }
    }

    /// Copy bandwidth of the weights' memory, in bytes read + written per second.
    pub fn measure_bandwidth(&self) -> Result<f64> {
        let mut out = 0.0;
        check(unsafe { sys::vegas_model_measure_bandwidth(self.raw(), &mut out) })?;
        Ok(out)
    }

    /// A new session on this model.
    pub fn session(&self, options: &SessionOptions) -> Result<Session> {
        Session::create(self, options, None)
    }

    /// A new session whose Vegas-mode drafts attend to what `policy` selects (the policy
    /// name is forced to "user").
    pub fn session_with_policy(
        &self,
        options: &SessionOptions,
        policy: Box<dyn SelectPolicy>,
    ) -> Result<Session> {
        Session::create(self, options, Some(policy))
    }

    /// Completes `prompt` in a private session (`vegas_generate`), calling `on_token` for
    /// every token (return true to stop), and returns the completion's text.
    pub fn generate<F: FnMut(&Token) -> bool>(
        &self,
        prompt: &str,
        options: &GenerateOptions,
        on_token: F,
    ) -> Result<String> {
        let prompt = c_string(prompt, "the prompt")?;
        let sampling = options.sampling.to_c();
        let policy = match options.session.as_ref().and_then(|s| s.policy.as_ref()) {
            Some(p) => Some(c_string(p, "the policy name")?),
            None => None,
        };
        let session = options.session.as_ref().map(|s| s.to_c(policy.as_ref()));
        let mut opts = init(sys::vegas_generate_options_init_sized);
        if let Some(n) = options.max_tokens {
            opts.max_tokens = n;
        }
        opts.sampling = &sampling;
        opts.session = session
            .as_ref()
            .map_or(ptr::null(), |s| s as *const sys::vegas_session_options);
        // Every piece is kept: their concatenation is the completion when the buffer is short.
        let mut pieces = String::new();
        let mut user = on_token;
        let mut sink = TokenSink::new(|t: &Token| {
            pieces.push_str(&t.text);
            user(t)
        });
        opts.on_token = token_fn_of(&sink);
        opts.user_data = &mut sink as *mut _ as *mut c_void;
        let capacity = 16 * opts.max_tokens.max(0) as usize + 1024;
        let mut buf = vec![0u8; capacity];
        let mut n = 0usize;
        let status = unsafe {
            sys::vegas_generate(
                self.raw(),
                prompt.as_ptr(),
                &opts,
                buf.as_mut_ptr() as *mut c_char,
                capacity,
                &mut n,
            )
        };
        sink.resume_panic();
        drop(sink);
        if status == sys::VEGAS_ERR_BUFFER_TOO_SMALL {
            return Ok(pieces);
        }
        check(status)?;
        buf.truncate(n);
        Ok(String::from_utf8_lossy(&buf).into_owned())
    }
}

impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Model")
            .field("ptr", &self.handle.0)
            .finish()
    }
}

/// The trampoline for a sink's closure type (which has no name to write).
pub(crate) fn token_fn_of<F: FnMut(&Token) -> bool>(_: &TokenSink<F>) -> sys::vegas_token_fn {
    Some(token_to_closure::<F>)
}

const _: fn() = || {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Model>();
};

//! Safe Rust API of libvegas, an LLM inference runtime with lossless self-speculative
//! decoding (the C ABI is `include/vegas.h`, declared by the `vegas-sys` crate).
//!
//! ```no_run
//! use vegas::{Model, Request, SessionOptions};
//! # fn main() -> vegas::Result<()> {
//! let model = Model::load("models/vegas-code-22m")?;
//! let prompt = model.tokenizer()?.encode("def quicksort(xs):\n")?;
//! let mut session = model.session(&SessionOptions::default())?;
//! for token in session.stream(&Request::new(&prompt).max_tokens(64))? {
//!     print!("{}", token?.text);
//! }
//! # Ok(())
//! # }
//! ```
//!
//! Ownership: `Model` is a shared handle (`Clone`, `Send + Sync`); a `Session` holds its
//! model; a model's `Tokenizer` borrows the `Model` value; a `Detokenizer` borrows its
//! tokenizer. Everything is freed on `Drop`, in any order the borrow checker allows.
//! Callbacks never unwind into C: a panic stops the work and resumes in the caller.

mod buffer;
mod callback;
mod error;
mod model;
mod options;
mod policy;
mod session;
mod tokenizer;

pub use error::{Error, Result, Status};
pub use model::{GenerateOptions, Model, ModelInfo};
pub use options::{
    Backend, FinishReason, KvType, Mode, ModelOptions, Request, Sampling, Schedule, ScoreKind,
    SessionOptions,
};
pub use policy::{SelectInput, SelectPolicy};
pub use session::{
    CancelHandle, Completion, SequenceInfo, Session, SessionStats, Token, TokenStream,
};
pub use tokenizer::{Detokenizer, SpecialTokens, Tokenizer};

use std::ffi::CStr;

/// The loaded library's version, "MAJOR.MINOR.PATCH".
pub fn version() -> &'static str {
    // SAFETY: a static NUL-terminated string.
    unsafe { CStr::from_ptr(vegas_sys::vegas_version()) }
        .to_str()
        .unwrap_or("?")
}

/// major * 10000 + minor * 100 + patch of the loaded library.
pub fn version_number() -> u32 {
    unsafe { vegas_sys::vegas_version_number() }
}

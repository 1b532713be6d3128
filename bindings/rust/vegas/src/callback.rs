//! Trampolines: the `extern "C"` functions libvegas calls, which call Rust closures. A panic
//! never unwinds into C: it is caught, the work is stopped (non-zero return) and the panic
//! resumes in the caller once the library has returned.
use std::any::Any;
use std::collections::VecDeque;
use std::os::raw::{c_char, c_void};
use std::panic::{self, AssertUnwindSafe};

use crate::session::Token;

pub(crate) type Panic = Box<dyn Any + Send + 'static>;

fn piece_text(piece: *const c_char, len: usize) -> String {
    if piece.is_null() || len == 0 {
        return String::new();
    }
    // SAFETY: the library passes `len` readable bytes that live during the callback.
    let bytes = unsafe { std::slice::from_raw_parts(piece as *const u8, len) };
    String::from_utf8_lossy(bytes).into_owned()
}

/// A closure called per token (return true to stop the sequence) and a caught panic.
pub(crate) struct TokenSink<F> {
    pub f: F,
    pub panic: Option<Panic>,
}

impl<F: FnMut(&Token) -> bool> TokenSink<F> {
    pub fn new(f: F) -> Self {
        TokenSink { f, panic: None }
    }

    /// Resumes a panic of the closure, if it had one.
    pub fn resume_panic(&mut self) {
        if let Some(p) = self.panic.take() {
            panic::resume_unwind(p);
        }
    }
}

/// vegas_token_fn for `user_data = *mut TokenSink<F>`.
pub(crate) unsafe extern "C" fn token_to_closure<F: FnMut(&Token) -> bool>(
    seq: i32,
    token: i32,
    piece: *const c_char,
    len: usize,
    user_data: *mut c_void,
) -> i32 {
    let sink = &mut *(user_data as *mut TokenSink<F>);
    if sink.panic.is_some() {
        return 1;
    }
    let event = Token {
        seq,
        id: token,
        text: piece_text(piece, len),
    };
    match panic::catch_unwind(AssertUnwindSafe(|| (sink.f)(&event))) {
        Ok(stop) => stop as i32,
        Err(p) => {
            sink.panic = Some(p);
            1
        }
    }
}

/// vegas_token_fn for `user_data = *mut VecDeque<Token>` (a stream's queue).
pub(crate) unsafe extern "C" fn token_to_queue(
    seq: i32,
    token: i32,
    piece: *const c_char,
    len: usize,
    user_data: *mut c_void,
) -> i32 {
    let queue = &mut *(user_data as *mut VecDeque<Token>);
    let pushed = panic::catch_unwind(AssertUnwindSafe(|| {
        queue.push_back(Token {
            seq,
            id: token,
            text: piece_text(piece, len),
        })
    }));
    pushed.is_err() as i32 // only an allocation failure can panic here: stop the sequence
}

/// vegas_progress_fn for `user_data = *mut ProgressSink<F>` (return true to cancel).
pub(crate) struct ProgressSink<F> {
    pub f: F,
    pub panic: Option<Panic>,
}

pub(crate) unsafe extern "C" fn progress_to_closure<F: FnMut(f32) -> bool>(
    progress: f32,
    user_data: *mut c_void,
) -> i32 {
    let sink = &mut *(user_data as *mut ProgressSink<F>);
    if sink.panic.is_some() {
        return 1;
    }
    match panic::catch_unwind(AssertUnwindSafe(|| (sink.f)(progress))) {
        Ok(cancel) => cancel as i32,
        Err(p) => {
            sink.panic = Some(p);
            1
        }
    }
}

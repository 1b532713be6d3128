//! Sessions: sequences decoded together, streamed through a closure or an iterator,
//! cancellable from any thread.
use std::collections::{HashMap, VecDeque};
use std::ffi::CString;
use std::os::raw::{c_char, c_void};
use std::ptr::{self, NonNull};
use std::sync::{Arc, Mutex};

use crate::buffer::{c_string, read_ids, read_string};
use crate::callback::{token_to_queue, TokenSink};
use crate::error::{check, Error, Result, Status};
use crate::model::{token_fn_of, Model};
use crate::options::{FinishReason, Mode, Request, SessionOptions};
use crate::policy::{OwnedPolicy, SelectPolicy};
use vegas_sys as sys;

/// One committed token; `text` is what became final with it (may be empty). The last
/// token of a sequence that ends at eos or a stop id is that token, carrying any text
/// still held back; it is not among `Session::tokens`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    pub seq: i32,
    pub id: i32,
    pub text: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SequenceInfo {
    pub finish_reason: FinishReason,
    /// The error of a sequence that finished with `FinishReason::Error`.
    pub status: Option<Status>,
    pub n_prompt: i32,
    pub n_generated: i32,
    pub rounds: i64,
    pub drafted: i64,
    pub accepted: i64,
    /// tau: committed tokens per speculative round.
    pub tokens_per_round: f64,
    pub prefill_seconds: f64,
    pub decode_seconds: f64,
}

/// Speculative statistics of a session, summed over its sequences (zero in vanilla mode).
#[derive(Debug, Clone, PartialEq)]
pub struct SessionStats {
    pub gamma: i32,
    pub rounds: i64,
    pub drafted: i64,
    pub accepted: i64,
    pub committed: i64,
    pub tokens_per_round: f64,
    pub draft_seconds: f64,
    pub verify_seconds: f64,
    pub select_seconds: f64,
    pub drafted_at: Vec<i64>,
    pub accepted_at: Vec<i64>,
}

/// A finished sequence.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    pub text: String,
    pub tokens: Vec<i32>,
    pub info: SequenceInfo,
}

struct SessionPtr(*mut sys::vegas_session);
// SAFETY: only vegas_session_cancel goes through it, which vegas.h allows from any thread.
unsafe impl Send for SessionPtr {}

/// Cancels sequences of a session from any thread, also while another thread runs it.
/// Safe against the session being dropped: it then reports `Status::WrongState`.
#[derive(Clone)]
pub struct CancelHandle {
    shared: Arc<Mutex<Option<SessionPtr>>>,
}

impl CancelHandle {
    /// Stops sequence `seq` (every sequence with -1) at the next round boundary.
    pub fn cancel(&self, seq: i32) -> Result<()> {
        let guard = self.shared.lock().unwrap_or_else(|e| e.into_inner());
        match guard.as_ref() {
            Some(p) => check(unsafe { sys::vegas_session_cancel(p.0, seq) }),
            None => Err(Error::new(Status::WrongState, "the session was dropped")),
        }
    }
}

/// A vegas_session: `Send` (it may move to another thread) but not `Sync` (vegas.h allows
/// one thread at a time on a session; cancel from elsewhere through a `CancelHandle`).
/// It holds its model, which therefore outlives it.
///
/// ```compile_fail
/// fn sync<T: Sync>() {}
/// sync::<vegas::Session>();
/// ```
pub struct Session {
    ptr: NonNull<sys::vegas_session>,
    cancel: Arc<Mutex<Option<SessionPtr>>>,
    /// The queues of live streams, by sequence; the library holds the pointers as
    /// user_data until the sequence is released or the session freed.
    queues: HashMap<i32, *mut VecDeque<Token>>,
    /// A custom selection policy; Drop frees it after the session.
    policy: Option<OwnedPolicy>,
    model: Model,
}

// SAFETY: nothing in a session is tied to the thread that made it; the raw queue pointers
// are owned by the session and touched only by the thread driving it.
unsafe impl Send for Session {}

/// A C request and the memory its pointers point into (valid while this lives).
struct CRequest {
    c: sys::vegas_request,
    _sampling: Box<sys::vegas_sampling_options>,
    _stops: Vec<CString>,
    _stop_ptrs: Vec<*const c_char>,
    _stop_ids: Vec<i32>,
}

fn c_request(req: &Request) -> Result<CRequest> {
    let sampling = Box::new(req.sampling.to_c());
    let stops = req
        .stop_strings
        .iter()
        .map(|s| c_string(s, "a stop string"))
        .collect::<Result<Vec<CString>>>()?;
    let stop_ptrs: Vec<*const c_char> = stops.iter().map(|s| s.as_ptr()).collect();
    let stop_ids = req.stop_ids.clone();
    let mut c = crate::options::init(sys::vegas_request_init_sized);
    c.prompt = req.prompt.as_ptr();
    c.n_prompt = req.prompt.len();
    c.sampling = &*sampling;
    c.max_tokens = req.max_tokens;
    c.ignore_eos = req.ignore_eos as i32;
    c.stop_ids = if stop_ids.is_empty() {
        ptr::null()
    } else {
        stop_ids.as_ptr()
    };
    c.n_stop_ids = stop_ids.len();
    c.stop_strings = if stop_ptrs.is_empty() {
        ptr::null()
    } else {
        stop_ptrs.as_ptr()
    };
    c.n_stop_strings = stop_ptrs.len();
    Ok(CRequest {
        c,
        _sampling: sampling,
        _stops: stops,
        _stop_ptrs: stop_ptrs,
        _stop_ids: stop_ids,
    })
}

impl Session {
    pub(crate) fn create(
        model: &Model,
        options: &SessionOptions,
        select_policy: Option<Box<dyn SelectPolicy>>,
    ) -> Result<Session> {
        if select_policy.is_some() && options.mode == Mode::Vanilla {
            return Err(Error::new(
                Status::InvalidArgument,
                "a custom selection policy needs Mode::Vegas or Mode::Auto (vanilla decoding \
                 selects nothing)",
            ));
        }
        let policy_name = match (&select_policy, &options.policy) {
            (Some(_), _) => Some(c_string("user", "the policy name")?),
            (None, Some(name)) => Some(c_string(name, "the policy name")?),
            (None, None) => None,
        };
        let mut c = options.to_c(policy_name.as_ref());
        let policy = select_policy.map(OwnedPolicy::new);
        let vtable = policy.as_ref().map(OwnedPolicy::vtable);
        if let Some(v) = vtable.as_ref() {
            c.select_policy = v;
        }
        let mut out = ptr::null_mut();
        // On failure `policy` drops here: the library no longer uses it either way.
        check(unsafe { sys::vegas_session_create(model.raw(), &c, &mut out) })?;
        let ptr = NonNull::new(out).expect("vegas_session_create gave NULL");
        Ok(Session {
            ptr,
            cancel: Arc::new(Mutex::new(Some(SessionPtr(out)))),
            queues: HashMap::new(),
            policy,
            model: model.clone(),
        })
    }

    fn raw(&self) -> *mut sys::vegas_session {
        self.ptr.as_ptr()
    }

    /// The model this session decodes with.
    pub fn model(&self) -> &Model {
        &self.model
    }

    fn submit_raw(
        &mut self,
        req: &Request,
        on_token: sys::vegas_token_fn,
        user: *mut c_void,
    ) -> Result<i32> {
        let mut c = c_request(req)?;
        c.c.on_token = on_token;
        c.c.user_data = user;
        let mut seq = -1;
        check(unsafe { sys::vegas_session_submit(self.raw(), &c.c, &mut seq) })?;
        Ok(seq)
    }

    /// Adds a sequence, which starts at the next step; returns its id.
    pub fn submit(&mut self, req: &Request) -> Result<i32> {
        self.submit_raw(req, None, ptr::null_mut())
    }

    /// One decoding round for every active sequence; returns how many are still active.
    pub fn step(&mut self) -> Result<i32> {
        let mut n = 0;
        check(unsafe { sys::vegas_session_step(self.raw(), &mut n) })?;
        Ok(n)
    }

    /// Steps until no sequence is active.
    pub fn run(&mut self) -> Result<()> {
        check(unsafe { sys::vegas_session_run(self.raw()) })
    }

    /// Stops `seq` (every sequence with -1) at the next round boundary.
    pub fn cancel(&self, seq: i32) -> Result<()> {
        check(unsafe { sys::vegas_session_cancel(self.raw(), seq) })
    }

    /// A handle that cancels from other threads.
    pub fn cancel_handle(&self) -> CancelHandle {
        CancelHandle {
            shared: Arc::clone(&self.cancel),
        }
    }

    pub fn info(&self, seq: i32) -> Result<SequenceInfo> {
        let mut c: sys::vegas_sequence_info = unsafe { std::mem::zeroed() };
        c.struct_size = std::mem::size_of::<sys::vegas_sequence_info>() as u32;
        check(unsafe { sys::vegas_sequence_get_info(self.raw(), seq, &mut c) })?;
        Ok(SequenceInfo {
            finish_reason: FinishReason::from_raw(c.finish_reason),
            status: Status::from_raw(c.status),
            n_prompt: c.n_prompt,
            n_generated: c.n_generated,
            rounds: c.rounds,
            drafted: c.drafted,
            accepted: c.accepted,
            tokens_per_round: c.tokens_per_round,
            prefill_seconds: c.prefill_seconds,
            decode_seconds: c.decode_seconds,
        })
    }

    /// The generated ids (stop tokens excluded).
    pub fn tokens(&self, seq: i32) -> Result<Vec<i32>> {
        let p = self.raw();
        read_ids(256, |ids, cap, n| unsafe {
            sys::vegas_sequence_tokens(p, seq, ids, cap, n)
        })
    }

    /// The generated text (a stop string excluded).
    pub fn text(&self, seq: i32) -> Result<String> {
        let p = self.raw();
        read_string(1024, |buf, cap, n| unsafe {
            sys::vegas_sequence_text(p, seq, buf, cap, n)
        })
    }

    /// Forgets a sequence (cancelling it if running) and frees its KV.
    pub fn release(&mut self, seq: i32) -> Result<()> {
        check(unsafe { sys::vegas_sequence_release(self.raw(), seq) })?;
        if let Some(q) = self.queues.remove(&seq) {
            // SAFETY: the library no longer holds the queue of a released sequence.
            drop(unsafe { Box::from_raw(q) });
        }
        Ok(())
    }

    pub fn stats(&self) -> Result<SessionStats> {
        let mut c: sys::vegas_session_stats = unsafe { std::mem::zeroed() };
        c.struct_size = std::mem::size_of::<sys::vegas_session_stats>() as u32;
        check(unsafe { sys::vegas_session_get_stats(self.raw(), &mut c) })?;
        Ok(SessionStats {
            gamma: c.gamma,
            rounds: c.rounds,
            drafted: c.drafted,
            accepted: c.accepted,
            committed: c.committed,
            tokens_per_round: c.tokens_per_round,
            draft_seconds: c.draft_seconds,
            verify_seconds: c.verify_seconds,
            select_seconds: c.select_seconds,
            drafted_at: c.drafted_at.to_vec(),
            accepted_at: c.accepted_at.to_vec(),
        })
    }

    fn finished(&self, seq: i32) -> Result<bool> {
        Ok(self.info(seq)?.finish_reason != FinishReason::None)
    }

    /// Submits `req`, steps the session until that sequence ends while `on_token` sees
    /// each of its tokens (return true to stop it), then returns its completion and
    /// releases it. A panic in `on_token` stops the sequence and resumes here.
    pub fn generate<F: FnMut(&Token) -> bool>(
        &mut self,
        req: &Request,
        on_token: F,
    ) -> Result<Completion> {
        // Boxed and reached only through the raw pointer, which the library also holds.
        let sink = Box::into_raw(Box::new(TokenSink::new(on_token)));
        let token_fn = token_fn_of(unsafe { &*sink });
        let outcome = self
            .submit_raw(req, token_fn, sink as *mut c_void)
            .and_then(|seq| {
                let mut result = Ok(());
                while unsafe { (*sink).panic.is_none() } {
                    match self.finished(seq) {
                        Ok(true) => break,
                        Ok(false) => {}
                        Err(e) => {
                            result = Err(e);
                            break;
                        }
                    }
                    if let Err(e) = self.step() {
                        result = Err(e);
                        break;
                    }
                }
                let completion = result.and_then(|_| {
                    Ok(Completion {
                        text: self.text(seq)?,
                        tokens: self.tokens(seq)?,
                        info: self.info(seq)?,
                    })
                });
                // Released before the sink is dropped: the library must not call it again.
                let released = self.release(seq);
                completion.and_then(|c| released.map(|_| c))
            });
        let mut sink = unsafe { Box::from_raw(sink) };
        sink.resume_panic();
        outcome
    }

    /// Submits `req` and returns an iterator over its tokens as the session steps. Dropping
    /// the iterator (also before the end) releases the sequence.
    pub fn stream(&mut self, req: &Request) -> Result<TokenStream<'_>> {
        let queue = Box::into_raw(Box::new(VecDeque::<Token>::new()));
        match self.submit_raw(req, Some(token_to_queue), queue as *mut c_void) {
            Ok(seq) => {
                self.queues.insert(seq, queue);
                Ok(TokenStream {
                    session: self,
                    seq,
                    done: false,
                })
            }
            Err(e) => {
                drop(unsafe { Box::from_raw(queue) });
                Err(e)
            }
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // Under the lock: a CancelHandle never calls into a freed session.
        let mut guard = self.cancel.lock().unwrap_or_else(|e| e.into_inner());
        *guard = None;
        unsafe { sys::vegas_session_free(self.raw()) };
        drop(guard);
        for (_, q) in self.queues.drain() {
            drop(unsafe { Box::from_raw(q) });
        }
        self.policy = None; // after the free: the library called it for the last time
    }
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("ptr", &self.ptr)
            .field("streams", &self.queues.len())
            .finish()
    }
}

/// The tokens of one sequence as its session steps (`Session::stream`).
pub struct TokenStream<'s> {
    session: &'s mut Session,
    seq: i32,
    done: bool,
}

impl TokenStream<'_> {
    /// The sequence's id.
    pub fn seq(&self) -> i32 {
        self.seq
    }

    /// The sequence's state so far.
    pub fn info(&self) -> Result<SequenceInfo> {
        self.session.info(self.seq)
    }

    /// Concatenates the remaining tokens' text.
    pub fn collect_text(self) -> Result<String> {
        let mut text = String::new();
        for token in self {
            text.push_str(&token?.text);
        }
        Ok(text)
    }
}

impl Iterator for TokenStream<'_> {
    type Item = Result<Token>;

    fn next(&mut self) -> Option<Result<Token>> {
        loop {
            let queue = *self.session.queues.get(&self.seq)?;
            // SAFETY: the library touches the queue only inside step, not now.
            if let Some(token) = unsafe { (*queue).pop_front() } {
                return Some(Ok(token));
            }
            if self.done {
                return None;
            }
            match self.session.finished(self.seq) {
                Ok(true) => {
                    self.done = true;
                    continue;
                }
                Ok(false) => {}
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
            if let Err(e) = self.session.step() {
                self.done = true;
                return Some(Err(e));
            }
        }
    }
}

impl Drop for TokenStream<'_> {
    fn drop(&mut self) {
        let _ = self.session.release(self.seq);
    }
}

//! Custom KV selection policies (policy "user" of a Vegas-mode session) written in Rust.
use std::os::raw::c_void;
use std::panic::{self, AssertUnwindSafe};

use crate::error::Status;
use crate::options::ScoreKind;
use vegas_sys as sys;

/// What the library asks a policy about: one layer of one sequence, after a verification.
#[derive(Debug)]
pub struct SelectInput<'a> {
    pub seq_id: i32,
    pub layer: i32,
    pub n_layers: i32,
    /// The built-in policies' k for this many candidates.
    pub budget: i32,
    pub score_kind: ScoreKind,
    /// One score per candidate position, larger = more important.
    pub scores: &'a [f32],
}

/// A selection policy. It runs on the thread that drives its session, hence `Send`.
pub trait SelectPolicy: Send {
    /// Writes the chosen candidate positions, strictly ascending and each below
    /// `input.scores.len()`, to the front of `out` (which has room for all of them) and
    /// returns how many; an `Err` fails the round (the sequence ends with that status).
    /// A panic here fails the round with `Status::Internal`: it cannot be resumed in the
    /// caller, which is inside the library.
    fn select(&mut self, input: &SelectInput<'_>, out: &mut [i32]) -> Result<usize, Status>;

    /// Sequence `seq_id` has ended: forget its state.
    fn reset(&mut self, _seq_id: i32) {}
}

type Boxed = Box<dyn SelectPolicy>;

unsafe extern "C" fn select_trampoline(
    input: *const sys::vegas_select_input,
    out: *mut i32,
    capacity: i32,
    user_data: *mut c_void,
) -> i32 {
    let policy = &mut *(user_data as *mut Boxed);
    let q = &*input;
    if q.scores_on_device != 0 {
        return sys::VEGAS_ERR_UNSUPPORTED; // CUDA memory: not readable as a slice
    }
    let n = q.n_candidates.max(0) as usize;
    let scores = if n == 0 {
        &[][..]
    } else {
        std::slice::from_raw_parts(q.scores, n)
    };
    let out = if capacity <= 0 {
        &mut [][..]
    } else {
        std::slice::from_raw_parts_mut(out, capacity as usize)
    };
    let query = SelectInput {
        seq_id: q.seq_id,
        layer: q.layer,
        n_layers: q.n_layers,
        budget: q.budget,
        score_kind: ScoreKind::from_raw(q.score_kind),
        scores,
    };
    let capacity = out.len();
    match panic::catch_unwind(AssertUnwindSafe(|| policy.select(&query, out))) {
        Ok(Ok(count)) if count <= capacity => count as i32,
        Ok(Ok(_)) => sys::VEGAS_ERR_INVALID_ARGUMENT,
        Ok(Err(status)) => status.raw(),
        Err(_) => sys::VEGAS_ERR_INTERNAL,
    }
}

unsafe extern "C" fn reset_trampoline(seq_id: i32, user_data: *mut c_void) {
    let policy = &mut *(user_data as *mut Boxed);
    let _ = panic::catch_unwind(AssertUnwindSafe(|| policy.reset(seq_id)));
}

/// A policy moved to the heap, to be handed to the library as user_data. The binding keeps
/// ownership (no destroy callback): it frees the policy itself once the session is freed
/// or its creation failed, whichever way the library got, so it is freed exactly once.
pub(crate) struct OwnedPolicy(*mut Boxed);

impl OwnedPolicy {
    pub fn new(policy: Boxed) -> OwnedPolicy {
        OwnedPolicy(Box::into_raw(Box::new(policy)))
    }

    /// The vtable pointing at this policy; valid while `self` is.
    pub fn vtable(&self) -> sys::vegas_select_policy {
        sys::vegas_select_policy {
            struct_size: std::mem::size_of::<sys::vegas_select_policy>() as u32,
            user_data: self.0 as *mut c_void,
            select: Some(select_trampoline),
            reset: Some(reset_trampoline),
            destroy: None,
        }
    }
}

impl Drop for OwnedPolicy {
    /// Only after the library stopped using it (the session is freed).
    fn drop(&mut self) {
        drop(unsafe { Box::from_raw(self.0) });
    }
}

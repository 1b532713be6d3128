"""Sessions: many sequences decoded together, with streaming, cancellation and stats."""
from __future__ import annotations

import collections
import contextlib
import ctypes
import threading
from dataclasses import dataclass
from typing import (TYPE_CHECKING, Callable, Deque, Dict, Iterator, List, Optional,
                    Sequence, Tuple, Union)

from . import _lib
from .errors import Status, VegasError, check, read_bytes, read_ids
from .options import FinishReason, Mode, Sampling, sampling_struct, session_struct
from .policy import SelectPolicy, policy_struct

if TYPE_CHECKING:
    from .model import Model


@dataclass(frozen=True)
class Token:
    """One committed token: `text` is what became final with it (may be empty)."""
    seq: int
    id: int
    text: str


@dataclass(frozen=True)
class SequenceInfo:
    finish_reason: FinishReason
    status: int  # the Status of a sequence that finished with ERROR
    n_prompt: int
    n_generated: int
    rounds: int
    drafted: int
    accepted: int
    tokens_per_round: float
    prefill_seconds: float
    decode_seconds: float
    gamma: int  # the draft length and ratio it uses now (auto knobs switch)
    ratio: float
    switches: int


@dataclass(frozen=True)
class SessionStats:
    gamma: int
    rounds: int
    drafted: int
    accepted: int
    committed: int
    tokens_per_round: float
    draft_seconds: float
    verify_seconds: float
    select_seconds: float
    drafted_at: Tuple[int, ...]
    accepted_at: Tuple[int, ...]
    switches: int  # automatic gamma/ratio switches of all sequences


@dataclass(frozen=True)
class TokenLogprobs:
    """One generated token's log-probability under the model's raw distribution (before
    penalties, temperature and truncation) and its most probable alternatives, most
    probable first: (token id, log-probability) pairs."""
    token: int
    logprob: float
    top: Tuple[Tuple[int, float], ...]


@dataclass(frozen=True)
class Switch:
    """One automatic switch of a sequence's gamma or ratio (gamma=0 / ratio=0 / policy="auto")."""
    seq_id: int
    round: int
    from_gamma: int
    to_gamma: int
    from_ratio: float
    to_ratio: float
    tau_ema: float


@dataclass(frozen=True)
class Completion:
    text: str
    tokens: List[int]
    info: SequenceInfo


TokenCallback = Callable[[Token], Optional[bool]]  # return True to stop the sequence
Prompt = Union[str, Sequence[int]]


class Session:
    """A vegas_session on a model (which the library keeps alive while the session lives).
    Drive it from one thread at a time; `cancel` may be called from any thread.
    Options: kv_bytes, page_size, max_batch, prefill_chunk, mode ("vanilla"/"vegas"/"auto"),
    policy, gamma, ratio, min_tokens, window_share, score_kind, sink, top_p_mass, schedule
    ("interleave"/"prefill_first"), profile_path, prefix_cache, kv_type ("default"/"fp8"),
    tree_branches and tree_depth (token trees), draft_model (a Model of the same tokenizer
    that drafts; the library keeps it alive) and draft_window, and select_policy (a
    SelectPolicy, with policy="user")."""

    def __init__(self, model: "Model", select_policy: Optional[SelectPolicy] = None,
                 **options):
        self._lib = _lib.lib()
        self._model = model
        if select_policy is not None:
            if str(options.get("mode", "")).lower() not in (
                    "vegas", "auto", str(int(Mode.VEGAS)), str(int(Mode.AUTO))):
                raise ValueError("a select_policy needs mode='vegas' or 'auto' (vanilla decoding "
                                 "selects nothing)")
            options["policy"] = "user"
        opts = session_struct(self._lib, options)
        self._policy_keep = None
        if select_policy is not None:
            self._policy_keep = policy_struct(select_policy)
            opts.select_policy = ctypes.pointer(self._policy_keep[0])
        out = ctypes.c_void_p()
        check(self._lib.vegas_session_create(model._ptr(), ctypes.byref(opts), ctypes.byref(out)))
        self._handle: Optional[int] = out.value
        self._callbacks: Dict[int, object] = {}  # seq -> the C callback C may still call
        self._free_lock = threading.Lock()  # cancel from another thread vs close
        self._driving = False  # inside step/run: the session must not be freed now
        self._error: Optional[BaseException] = None  # raised by a Python callback

    # ---------------------------------------------------------------- lifetime
    def _ptr(self) -> int:
        if self._handle is None:
            raise ValueError("the session is closed")
        return self._handle

    def close(self) -> None:
        """Frees the session, its sequences and KV pool. Safe to call twice; not allowed
        while step/run is running (from a token callback or another thread)."""
        if self._driving:
            raise RuntimeError("Session.close() while the session is running (from a token "
                               "callback or another thread); close it after run returns")
        with self._free_lock:
            if self._handle is not None:
                self._lib.vegas_session_free(self._handle)
                self._handle = None
        self._callbacks.clear()
        self._policy_keep = None  # after free: the library called destroy by now

    @property
    def closed(self) -> bool:
        return self._handle is None

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_handle", None) is not None:
            self.close()

    # --------------------------------------------------------------- sequences
    def _prompt_ids(self, prompt: Prompt) -> List[int]:
        if isinstance(prompt, (str, bytes)):
            return self._model.tokenizer.encode(prompt)
        return list(prompt)

    def _trampoline(self, on_token: TokenCallback):
        def call(seq, token, piece, n, _user):
            try:
                text = ctypes.string_at(piece, n).decode("utf-8") if n else ""
                return 1 if on_token(Token(seq, token, text)) else 0
            except BaseException as e:  # noqa: BLE001 - re-raised after the C call returns
                if self._error is None:
                    self._error = e
                return 1
        return _lib.TOKEN_FN(call)

    def submit(self, prompt: Prompt, max_tokens: Optional[int] = None,
               sampling: Union[Sampling, dict, None] = None, ignore_eos: bool = False,
               stop: Sequence[str] = (), stop_ids: Sequence[int] = (),
               on_token: Optional[TokenCallback] = None, logprobs: Union[bool, int] = False,
               top_logprobs: int = 0) -> int:
        """Adds a sequence (text, or token ids) that starts at the next step; returns its id.
        `on_token` runs on the thread driving the session for every committed token.
        `logprobs` records each generated token's log-probability and `top_logprobs`
        (0..20) alternatives, read with `logprobs()`: True (or 1) of the raw logits, 2 of
        the processed distribution the token was drawn from."""
        ids = self._prompt_ids(prompt)
        req = _lib.init_struct(_lib.Request)
        prompt_arr = (ctypes.c_int32 * max(len(ids), 1))(*ids)
        req.prompt = prompt_arr
        req.n_prompt = len(ids)
        samp = sampling_struct(self._lib, sampling)
        if samp is not None:
            req.sampling = ctypes.pointer(samp)
        if max_tokens is not None:
            req.max_tokens = max_tokens
        req.ignore_eos = int(ignore_eos)
        req.logprobs, req.top_logprobs = int(logprobs), top_logprobs
        stop_id_arr = (ctypes.c_int32 * max(len(stop_ids), 1))(*stop_ids)
        req.stop_ids, req.n_stop_ids = stop_id_arr, len(stop_ids)
        stop_bytes = [s.encode("utf-8") for s in stop]
        stop_arr = (ctypes.c_char_p * max(len(stop_bytes), 1))(*stop_bytes)
        req.stop_strings, req.n_stop_strings = stop_arr, len(stop_bytes)
        callback = self._trampoline(on_token) if on_token is not None else None
        if callback is not None:
            req.on_token = callback
        seq = ctypes.c_int32()
        check(self._lib.vegas_session_submit(self._ptr(), ctypes.byref(req), ctypes.byref(seq)))
        if callback is not None:
            self._callbacks[seq.value] = callback
        return seq.value

    @contextlib.contextmanager
    def _driving_scope(self):
        if self._driving:
            raise VegasError(int(Status.WRONG_STATE), "the session is already running")
        self._driving = True
        try:
            yield
        finally:
            self._driving = False

    def _raise_callback_error(self) -> None:
        if self._error is not None:
            e, self._error = self._error, None
            raise e

    def step(self) -> int:
        """One decoding round for every active sequence; returns how many are still active."""
        n = ctypes.c_int32()
        with self._driving_scope():
            status = self._lib.vegas_session_step(self._ptr(), ctypes.byref(n))
        self._raise_callback_error()
        check(status)
        return n.value

    def run(self) -> None:
        """Steps until no sequence is active."""
        with self._driving_scope():
            status = self._lib.vegas_session_run(self._ptr())
        self._raise_callback_error()
        check(status)

    def cancel(self, seq: int = -1) -> None:
        """Stops `seq` (every sequence with -1) at the next round; safe from any thread, also
        against a concurrent close (then it raises ValueError)."""
        with self._free_lock:
            check(self._lib.vegas_session_cancel(self._ptr(), seq))

    def cache_stats(self) -> Tuple[int, int]:
        """The prefix cache since the session was made: (prompt tokens served from cached KV
        pages, cached pages taken back for new tokens)."""
        hit, evicted = ctypes.c_int64(), ctypes.c_int64()
        check(self._lib.vegas_session_get_cache_stats(self._ptr(), ctypes.byref(hit),
                                                      ctypes.byref(evicted)))
        return hit.value, evicted.value

    def info(self, seq: int) -> SequenceInfo:
        out = _lib.SequenceInfoStruct()
        out.struct_size = ctypes.sizeof(out)
        check(self._lib.vegas_sequence_get_info(self._ptr(), seq, ctypes.byref(out)))
        values = {name: getattr(out, name) for name, _ in out._fields_[1:]}
        values["finish_reason"] = FinishReason(values["finish_reason"])
        return SequenceInfo(**values)

    def tokens(self, seq: int) -> List[int]:
        """The generated ids (stop tokens excluded)."""
        return read_ids(self._lib.vegas_sequence_tokens, self._ptr(), seq)

    def text(self, seq: int) -> str:
        """The generated text (a stop string excluded)."""
        return read_bytes(self._lib.vegas_sequence_text, self._ptr(), seq,
                          capacity=1024).decode("utf-8")

    def release(self, seq: int) -> None:
        """Forgets a sequence (cancelling it if running) and frees its KV."""
        check(self._lib.vegas_sequence_release(self._ptr(), seq))
        self._callbacks.pop(seq, None)

    def stats(self) -> SessionStats:
        out = _lib.SessionStatsStruct()
        out.struct_size = ctypes.sizeof(out)
        check(self._lib.vegas_session_get_stats(self._ptr(), ctypes.byref(out)))
        values = {name: getattr(out, name) for name, _ in out._fields_[1:]}
        values["drafted_at"] = tuple(out.drafted_at)
        values["accepted_at"] = tuple(out.accepted_at)
        return SessionStats(**values)

    def logprobs(self, seq: int, start: int = 0) -> List[TokenLogprobs]:
        """The log-probabilities of generated tokens `start`.. of a sequence submitted with
        logprobs=True (also from inside its token callback: the tokens committed so far)."""
        out: List[TokenLogprobs] = []
        lp = _lib.TokenLogprobsStruct()
        lp.struct_size = ctypes.sizeof(lp)
        for index in range(start, self.info(seq).n_generated):
            check(self._lib.vegas_sequence_get_logprobs(self._ptr(), seq, index,
                                                        ctypes.byref(lp)))
            top = tuple((lp.top_ids[i], lp.top_logprobs[i]) for i in range(lp.n_top))
            out.append(TokenLogprobs(lp.token, lp.logprob, top))
        return out

    def switches(self) -> List[Switch]:
        """The automatic switches the session still keeps (the last 4096), oldest first."""
        total = self.stats().switches
        out: List[Switch] = []
        for index in range(max(0, total - 4096), total):
            s = _lib.SwitchInfoStruct()
            s.struct_size = ctypes.sizeof(s)
            check(self._lib.vegas_session_get_switch(self._ptr(), index, ctypes.byref(s)))
            out.append(Switch(**{name: getattr(s, name) for name, _ in s._fields_[1:]}))
        return out

    # ---------------------------------------------------------- conveniences
    def generate(self, prompt: Prompt, on_token: Optional[TokenCallback] = None,
                 **request) -> Completion:
        """Submits one sequence, runs the session until it ends, returns its completion and
        releases it. Keyword arguments are submit's."""
        seq = self.submit(prompt, on_token=on_token, **request)
        try:
            while self.info(seq).finish_reason == FinishReason.NONE:
                self.step()
            return Completion(self.text(seq), self.tokens(seq), self.info(seq))
        finally:
            if self._handle is not None:
                self.release(seq)

    def stream(self, prompt: Prompt, **request) -> Iterator[Token]:
        """Yields each committed Token as the session steps. Leaving the loop early (break,
        an exception, closing the generator) releases the sequence."""
        queue: Deque[Token] = collections.deque()
        seq = self.submit(prompt, on_token=queue.append, **request)
        try:
            while True:
                if not queue and self.info(seq).finish_reason != FinishReason.NONE:
                    return
                if not queue:
                    self.step()
                while queue:
                    yield queue.popleft()
        finally:
            if self._handle is not None:
                self.release(seq)

    def stream_text(self, prompt: Prompt, **request) -> Iterator[str]:
        """As stream, yielding only the non-empty text pieces."""
        for token in self.stream(prompt, **request):
            if token.text:
                yield token.text


__all__ = ["Session", "Token", "SequenceInfo", "SessionStats", "Completion", "VegasError"]

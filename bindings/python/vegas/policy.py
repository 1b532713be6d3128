"""Custom KV selection policies (policy "user" of a VEGAS-mode session) written in Python."""
from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import List, Sequence

from . import _lib
from .errors import Status
from .options import ScoreKind


@dataclass(frozen=True)
class SelectInput:
    """What the library asks a policy about: one layer of one sequence."""
    seq_id: int
    layer: int
    n_layers: int
    budget: int  # the built-in policies' k for this many candidates
    score_kind: ScoreKind
    scores: List[float]  # one per candidate position, larger = more important


class SelectPolicy:
    """Subclass and override `select`; `reset` is optional. Exceptions inside them fail the
    round (the sequence finishes with status INTERNAL); they cannot be re-raised from C."""

    def select(self, query: SelectInput) -> Sequence[int]:
        """Strictly ascending candidate positions the next draft attends to."""
        raise NotImplementedError

    def reset(self, seq_id: int) -> None:
        """Sequence `seq_id` has ended."""


def policy_struct(policy: SelectPolicy):
    """The vegas_select_policy of `policy` and the callback objects that must outlive the
    session (the caller keeps the returned tuple; element 0 is the struct)."""

    def select(inp, out, capacity, _user):
        try:
            q = inp.contents
            if q.scores_on_device:
                return int(Status.UNSUPPORTED)  # CUDA memory is not readable from Python
            chosen = list(policy.select(SelectInput(
                q.seq_id, q.layer, q.n_layers, q.budget, ScoreKind(q.score_kind),
                q.scores[:q.n_candidates])))
            if len(chosen) > capacity:
                return int(Status.INVALID_ARGUMENT)
            for i, pos in enumerate(chosen):
                out[i] = pos
            return len(chosen)
        except Exception:  # noqa: BLE001 - nothing may unwind through C
            return int(Status.INTERNAL)

    def reset(seq_id, _user):
        try:
            policy.reset(seq_id)
        except Exception:  # noqa: BLE001
            pass

    select_fn, reset_fn = _lib.SELECT_FN(select), _lib.RESET_FN(reset)
    s = _lib.SelectPolicyStruct()
    s.struct_size = ctypes.sizeof(s)
    s.select = select_fn
    s.reset = reset_fn
    return (s, select_fn, reset_fn)

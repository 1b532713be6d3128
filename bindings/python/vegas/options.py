"""Enums and option objects of vegas.h. Options left None keep the library's default
(the matching *_init_sized fills the struct first)."""
from __future__ import annotations

import ctypes
import enum
from dataclasses import dataclass, fields
from typing import Optional, Union


class Backend(enum.IntEnum):
    AUTO = 0
    CPU = 1
    CUDA = 2


class Mode(enum.IntEnum):
    VANILLA = 0  # one token per step with full attention
    VEGAS = 1    # self-speculative decoding with sparse drafting
    AUTO = 2     # VEGAS's rounds while they pay on this device, else vanilla steps


class ScoreKind(enum.IntEnum):
    WEIGHT = 0
    LOGIT = 1


class Schedule(enum.IntEnum):
    INTERLEAVE = 0     # decoding sequences advance next to prompt chunks (default)
    PREFILL_FIRST = 1  # nobody decodes while a prompt is still being prefilled


class KvType(enum.IntEnum):
    DEFAULT = 0  # the backend's own precision: bf16 on CUDA, f32 on the CPU
    FP8 = 1      # e4m3 with a power-of-two scale per token and KV head


class FinishReason(enum.IntEnum):
    NONE = 0
    EOS = 1
    LENGTH = 2
    STOP = 3
    CALLBACK = 4
    CANCELLED = 5
    ERROR = 6


def to_enum(kind, value):
    """Accepts an enum member, its int value or its name in any case ("vegas", "cpu")."""
    if isinstance(value, str):
        try:
            return kind[value.upper()]
        except KeyError:
            raise ValueError(f"unknown {kind.__name__} {value!r}; one of "
                             f"{', '.join(m.name.lower() for m in kind)}") from None
    return kind(value)


@dataclass
class Sampling:
    """vegas_sampling_options: temperature 0 (the default) is greedy."""
    temperature: Optional[float] = None
    top_k: Optional[int] = None
    top_p: Optional[float] = None
    min_p: Optional[float] = None
    repetition_penalty: Optional[float] = None
    presence_penalty: Optional[float] = None
    frequency_penalty: Optional[float] = None
    penalty_last_n: Optional[int] = None
    seed: Optional[int] = None

    def to_struct(self, lib) -> "ctypes.Structure":
        from . import _lib
        s = _lib.init_struct(_lib.SamplingOptions)
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None:
                setattr(s, f.name, value)
        return s


# Session option names and how each is converted; "mode", "score_kind", "schedule" and
# "kv_type" take enum names too.
SESSION_FIELDS = ("kv_bytes", "page_size", "max_batch", "prefill_chunk", "mode", "policy",
                  "gamma", "ratio", "min_tokens", "window_share", "score_kind", "sink",
                  "top_p_mass", "schedule", "profile_path", "prefix_cache", "kv_type",
                  "tree_branches", "tree_depth", "draft_model", "draft_window")


def session_struct(lib, options: dict):
    """A filled vegas_session_options from keyword options (unknown names raise TypeError).
    The returned struct points into `policy` and `profile_path` bytes kept on it as `_keep`."""
    from . import _lib
    s = _lib.init_struct(_lib.SessionOptions)
    keep = []
    for name, value in options.items():
        if name not in SESSION_FIELDS:
            raise TypeError(f"unknown session option {name!r}")
        if value is None:
            continue
        if name == "mode":
            value = int(to_enum(Mode, value))
        elif name == "score_kind":
            value = int(to_enum(ScoreKind, value))
        elif name == "schedule":
            value = int(to_enum(Schedule, value))
        elif name == "kv_type":
            value = int(to_enum(KvType, value))
        elif name == "draft_model":  # a Model; the library keeps it alive from create on
            value = value._ptr()
        elif name in ("policy", "profile_path"):
            value = str(value).encode("utf-8")
            keep.append(value)
        setattr(s, name, value)
    s._keep = keep
    return s


def sampling_struct(lib, sampling: Union[Sampling, dict, None]):
    if sampling is None:
        return None
    if isinstance(sampling, dict):
        sampling = Sampling(**sampling)
    return sampling.to_struct(lib)

"""Python bindings of libvegas (ctypes): LLM inference with lossless self-speculative
decoding. Start with `vegas.Model(path)`; see the package README for a tour."""
from ._lib import lib as _load_library
from .errors import Status, VegasError
from .model import Model, ModelInfo, quantize
from .options import Backend, FinishReason, KvType, Mode, Sampling, Schedule, ScoreKind
from .policy import SelectInput, SelectPolicy
from .session import (Completion, SequenceInfo, Session, SessionStats, Switch, Token,
                      TokenLogprobs)
from .tokenizer import Detokenizer, SpecialTokens, Tokenizer


def version() -> str:
    """The loaded library's version, "MAJOR.MINOR.PATCH"."""
    return _load_library().vegas_version().decode()


def version_number() -> int:
    """major * 10000 + minor * 100 + patch of the loaded library."""
    return int(_load_library().vegas_version_number())


def status_name(status: int) -> str:
    return _load_library().vegas_status_name(int(status)).decode()


__version__ = "0.1.0"
__all__ = ["Backend", "Completion", "Detokenizer", "FinishReason", "KvType", "Mode", "Model", "ModelInfo",
           "Sampling", "Schedule", "ScoreKind", "SelectInput", "SelectPolicy", "SequenceInfo",
           "Session", "SessionStats", "SpecialTokens", "Status", "Switch", "Token",
           "TokenLogprobs", "Tokenizer", "VegasError",
           "quantize", "status_name", "version", "version_number"]

"""The ctypes mirror of include/vegas.h: structs, callback types, and argtypes/restype on
every exported function. Nothing here is public API; the classes in model.py,
tokenizer.py and session.py wrap it.

The library is found, in this order, through $VEGAS_LIBRARY (a file path), next to this
package (a libvegas copied into the package folder), then the system loader."""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
import threading
from pathlib import Path
from typing import Optional

c_int32_p = ctypes.POINTER(ctypes.c_int32)
c_size_t_p = ctypes.POINTER(ctypes.c_size_t)
c_void_pp = ctypes.POINTER(ctypes.c_void_p)

VEGAS_MAX_GAMMA = 32
VEGAS_MAX_TOP_LOGPROBS = 20


class TokenizeOptions(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("parse_special", ctypes.c_int32),
                ("add_special", ctypes.c_int32)]


class SpecialTokensStruct(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32)] + [
        (name, ctypes.c_int32) for name in ("bos", "eos", "pad", "fim_prefix", "fim_middle",
                                            "fim_suffix", "fim_pad", "file_sep", "im_start",
                                            "im_end")]


PROGRESS_FN = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_float, ctypes.c_void_p)
TOKEN_FN = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int32, ctypes.c_int32,
                            ctypes.POINTER(ctypes.c_char), ctypes.c_size_t, ctypes.c_void_p)


class ModelOptions(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("backend", ctypes.c_int32),
                ("device_index", ctypes.c_int32), ("n_threads", ctypes.c_int32),
                ("progress", PROGRESS_FN), ("progress_user_data", ctypes.c_void_p)]


class ModelInfoStruct(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("backend", ctypes.c_int32),
                ("n_layers", ctypes.c_int32), ("hidden_size", ctypes.c_int32),
                ("n_heads", ctypes.c_int32), ("n_kv_heads", ctypes.c_int32),
                ("head_dim", ctypes.c_int32), ("vocab_size", ctypes.c_int32),
                ("max_context", ctypes.c_int32), ("n_params", ctypes.c_uint64),
                ("weight_bytes", ctypes.c_uint64), ("kv_bytes_per_token", ctypes.c_uint64),
                ("architecture", ctypes.c_char * 64)]


class SelectInput(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("seq_id", ctypes.c_int32),
                ("layer", ctypes.c_int32), ("n_layers", ctypes.c_int32),
                ("n_candidates", ctypes.c_int32), ("budget", ctypes.c_int32),
                ("score_kind", ctypes.c_int32), ("scores_on_device", ctypes.c_int32),
                ("scores", ctypes.POINTER(ctypes.c_float)), ("stream", ctypes.c_void_p)]


SELECT_FN = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.POINTER(SelectInput), c_int32_p,
                             ctypes.c_int32, ctypes.c_void_p)
RESET_FN = ctypes.CFUNCTYPE(None, ctypes.c_int32, ctypes.c_void_p)
DESTROY_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class SelectPolicyStruct(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("user_data", ctypes.c_void_p),
                ("select", SELECT_FN), ("reset", RESET_FN), ("destroy", DESTROY_FN)]


class SessionOptions(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("kv_bytes", ctypes.c_uint64),
                ("page_size", ctypes.c_int32), ("max_batch", ctypes.c_int32),
                ("prefill_chunk", ctypes.c_int32), ("mode", ctypes.c_int32),
                ("policy", ctypes.c_char_p), ("gamma", ctypes.c_int32),
                ("ratio", ctypes.c_float), ("min_tokens", ctypes.c_int32),
                ("window_share", ctypes.c_float), ("score_kind", ctypes.c_int32),
                ("sink", ctypes.c_int32), ("top_p_mass", ctypes.c_float),
                ("select_policy", ctypes.POINTER(SelectPolicyStruct)),
                ("schedule", ctypes.c_int32), ("profile_path", ctypes.c_char_p),
                ("prefix_cache", ctypes.c_int32),
                ("kv_type", ctypes.c_int32),
                ("tree_branches", ctypes.c_int32), ("tree_depth", ctypes.c_int32),
                ("draft_model", ctypes.c_void_p), ("draft_window", ctypes.c_int32)]


class SamplingOptions(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("temperature", ctypes.c_float),
                ("top_k", ctypes.c_int32), ("top_p", ctypes.c_float), ("min_p", ctypes.c_float),
                ("repetition_penalty", ctypes.c_float), ("presence_penalty", ctypes.c_float),
                ("frequency_penalty", ctypes.c_float), ("penalty_last_n", ctypes.c_int32),
                ("seed", ctypes.c_uint64)]


class Request(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("prompt", c_int32_p),
                ("n_prompt", ctypes.c_size_t), ("sampling", ctypes.POINTER(SamplingOptions)),
                ("max_tokens", ctypes.c_int32), ("ignore_eos", ctypes.c_int32),
                ("stop_ids", c_int32_p), ("n_stop_ids", ctypes.c_size_t),
                ("stop_strings", ctypes.POINTER(ctypes.c_char_p)),
                ("n_stop_strings", ctypes.c_size_t), ("on_token", TOKEN_FN),
                ("user_data", ctypes.c_void_p), ("logprobs", ctypes.c_int32),
                ("top_logprobs", ctypes.c_int32)]


class TokenLogprobsStruct(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("token", ctypes.c_int32),
                ("logprob", ctypes.c_float), ("n_top", ctypes.c_int32),
                ("top_ids", ctypes.c_int32 * VEGAS_MAX_TOP_LOGPROBS),
                ("top_logprobs", ctypes.c_float * VEGAS_MAX_TOP_LOGPROBS)]


class SequenceInfoStruct(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("finish_reason", ctypes.c_int32),
                ("status", ctypes.c_int32), ("n_prompt", ctypes.c_int32),
                ("n_generated", ctypes.c_int32), ("rounds", ctypes.c_int64),
                ("drafted", ctypes.c_int64), ("accepted", ctypes.c_int64),
                ("tokens_per_round", ctypes.c_double), ("prefill_seconds", ctypes.c_double),
                ("decode_seconds", ctypes.c_double), ("gamma", ctypes.c_int32),
                ("ratio", ctypes.c_float), ("switches", ctypes.c_int64)]


class SessionStatsStruct(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("gamma", ctypes.c_int32),
                ("rounds", ctypes.c_int64), ("drafted", ctypes.c_int64),
                ("accepted", ctypes.c_int64), ("committed", ctypes.c_int64),
                ("tokens_per_round", ctypes.c_double), ("draft_seconds", ctypes.c_double),
                ("verify_seconds", ctypes.c_double), ("select_seconds", ctypes.c_double),
                ("drafted_at", ctypes.c_int64 * VEGAS_MAX_GAMMA),
                ("accepted_at", ctypes.c_int64 * VEGAS_MAX_GAMMA), ("switches", ctypes.c_int64)]


class SwitchInfoStruct(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("seq_id", ctypes.c_int32),
                ("round", ctypes.c_int64), ("from_gamma", ctypes.c_int32),
                ("to_gamma", ctypes.c_int32), ("from_ratio", ctypes.c_float),
                ("to_ratio", ctypes.c_float), ("tau_ema", ctypes.c_double)]


class GenerateOptions(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("max_tokens", ctypes.c_int32),
                ("sampling", ctypes.POINTER(SamplingOptions)),
                ("session", ctypes.POINTER(SessionOptions)), ("on_token", TOKEN_FN),
                ("user_data", ctypes.c_void_p)]


def _p(t):
    return ctypes.POINTER(t)


_i, _vp, _sz, _i32 = ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int32
_cp = ctypes.c_char_p
_buf = ctypes.c_char_p  # output byte buffers (ctypes.create_string_buffer)

# name: (restype, argtypes), in vegas.h order. vegas_status is an int-sized enum.
SIGNATURES = {
    "vegas_version_number": (ctypes.c_uint32, []),
    "vegas_version": (_cp, []),
    "vegas_status_name": (_cp, [_i]),
    "vegas_last_error": (_cp, []),
    "vegas_tokenizer_load": (_i, [_cp, c_void_pp]),
    "vegas_tokenizer_free": (None, [_vp]),
    "vegas_tokenizer_vocab_size": (_i32, [_vp]),
    "vegas_tokenize_options_init_sized": (None, [_p(TokenizeOptions), _sz]),
    "vegas_tokenize": (_i, [_vp, _cp, _sz, _p(TokenizeOptions), c_int32_p, _sz, c_size_t_p]),
    "vegas_detokenize": (_i, [_vp, c_int32_p, _sz, _i32, _buf, _sz, c_size_t_p]),
    "vegas_token_to_piece": (_i, [_vp, _i32, _buf, _sz, c_size_t_p]),
    "vegas_token_by_name": (_i, [_vp, _cp, c_int32_p]),
    "vegas_token_is_special": (_i32, [_vp, _i32]),
    "vegas_tokenizer_special_tokens": (_i, [_vp, _p(SpecialTokensStruct)]),
    "vegas_tokenizer_chat_format": (_cp, [_vp]),
    "vegas_chat_tokenize": (_i, [_vp, _p(_cp), _p(_cp), _sz, _i32, c_int32_p, _sz, c_size_t_p]),
    "vegas_detokenizer_create": (_i, [_vp, _i32, c_void_pp]),
    "vegas_detokenizer_free": (None, [_vp]),
    "vegas_detokenizer_push": (_i, [_vp, _i32, _buf, _sz, c_size_t_p]),
    "vegas_detokenizer_flush": (_i, [_vp, _buf, _sz, c_size_t_p]),
    "vegas_model_options_init_sized": (None, [_p(ModelOptions), _sz]),
    "vegas_model_load": (_i, [_cp, _p(ModelOptions), c_void_pp]),
    "vegas_model_free": (None, [_vp]),
    "vegas_model_load_synthetic": (_i, [_cp, ctypes.c_uint64, _p(ModelOptions), c_void_pp]),
    "vegas_model_tokenizer": (_vp, [_vp]),
    "vegas_model_get_info": (_i, [_vp, _p(ModelInfoStruct)]),
    "vegas_model_measure_bandwidth": (_i, [_vp, _p(ctypes.c_double)]),
    "vegas_model_quantize": (_i, [_cp, _cp, _cp]),
    "vegas_session_options_init_sized": (None, [_p(SessionOptions), _sz]),
    "vegas_session_create": (_i, [_vp, _p(SessionOptions), c_void_pp]),
    "vegas_session_free": (None, [_vp]),
    "vegas_sampling_options_init_sized": (None, [_p(SamplingOptions), _sz]),
    "vegas_request_init_sized": (None, [_p(Request), _sz]),
    "vegas_session_submit": (_i, [_vp, _p(Request), c_int32_p]),
    "vegas_session_step": (_i, [_vp, c_int32_p]),
    "vegas_session_run": (_i, [_vp]),
    "vegas_session_cancel": (_i, [_vp, _i32]),
    "vegas_sequence_get_info": (_i, [_vp, _i32, _p(SequenceInfoStruct)]),
    "vegas_sequence_tokens": (_i, [_vp, _i32, c_int32_p, _sz, c_size_t_p]),
    "vegas_sequence_text": (_i, [_vp, _i32, _buf, _sz, c_size_t_p]),
    "vegas_sequence_release": (_i, [_vp, _i32]),
    "vegas_session_get_stats": (_i, [_vp, _p(SessionStatsStruct)]),
    "vegas_session_get_cache_stats": (_i, [_vp, _p(ctypes.c_int64), _p(ctypes.c_int64)]),
    "vegas_session_get_switch": (_i, [_vp, ctypes.c_int64, _p(SwitchInfoStruct)]),
    "vegas_sequence_get_logprobs": (_i, [_vp, ctypes.c_int32, ctypes.c_int64,
                                         _p(TokenLogprobsStruct)]),
    "vegas_generate_options_init_sized": (None, [_p(GenerateOptions), _sz]),
    "vegas_generate": (_i, [_vp, _cp, _p(GenerateOptions), _buf, _sz, c_size_t_p]),
}


def init_struct(cls, init=None):
    """A `cls` (an option struct of vegas.h) filled with the library's defaults by `init`
    (normally the library's matching *_init_sized function), which is told this package's
    size of the struct: a library with a larger struct writes only that much, one with a
    smaller struct leaves the rest zero (vegas.h, "Structs that grow")."""
    if init is None:
        init = getattr(lib(), _INITS[cls.__name__])
    out = cls()
    init(ctypes.byref(out), ctypes.sizeof(cls))
    return out


_INITS = {
    "TokenizeOptions": "vegas_tokenize_options_init_sized",
    "ModelOptions": "vegas_model_options_init_sized",
    "SessionOptions": "vegas_session_options_init_sized",
    "SamplingOptions": "vegas_sampling_options_init_sized",
    "Request": "vegas_request_init_sized",
    "GenerateOptions": "vegas_generate_options_init_sized",
}


def _candidates() -> list:
    """Library paths to try, best first."""
    env = os.environ.get("VEGAS_LIBRARY")
    if env:
        return [env]  # an explicit choice is never second-guessed
    here = Path(__file__).resolve().parent
    names = {"win32": ["vegas.dll"], "darwin": ["libvegas.dylib", "libvegas.0.dylib"]}.get(
        sys.platform, ["libvegas.so", "libvegas.so.0"])
    found = [str(here / n) for n in names if (here / n).exists()]
    system = ctypes.util.find_library("vegas")
    return found + ([system] if system else []) + names


_LIB: Optional[ctypes.CDLL] = None
_LOCK = threading.Lock()


def lib() -> ctypes.CDLL:
    """The loaded and declared libvegas (loaded once, on first use)."""
    global _LIB
    if _LIB is not None:
        return _LIB
    with _LOCK:
        if _LIB is None:
            errors = []
            for path in _candidates():
                try:
                    handle = ctypes.CDLL(path)
                except OSError as e:
                    errors.append(f"{path}: {e}")
                    continue
                for name, (restype, argtypes) in SIGNATURES.items():
                    fn = getattr(handle, name)
                    fn.restype = restype
                    fn.argtypes = argtypes
                _LIB = handle
                break
            else:
                raise OSError("libvegas not found (set VEGAS_LIBRARY to its path): " +
                              "; ".join(errors))
    return _LIB

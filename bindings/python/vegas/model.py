"""Models: load a Hugging Face directory, query it, generate from it."""
from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass
from typing import Callable, Iterator, List, Optional, Union

from . import _lib
from .errors import Status, check
from .options import Backend, Sampling, sampling_struct, session_struct, to_enum
from .session import Prompt, Session, Token, TokenCallback
from .tokenizer import Tokenizer


@dataclass(frozen=True)
class ModelInfo:
    backend: Backend
    n_layers: int
    hidden_size: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    vocab_size: int
    max_context: int
    n_params: int
    weight_bytes: int
    kv_bytes_per_token: int
    architecture: str


ProgressCallback = Callable[[float], Optional[bool]]  # return True to cancel the load


def _model_options(backend, device_index, n_threads, progress):
    opts = _lib.init_struct(_lib.ModelOptions)
    opts.backend = int(to_enum(Backend, backend))
    if device_index is not None:
        opts.device_index = device_index
    if n_threads is not None:
        opts.n_threads = n_threads
    keep = None
    if progress is not None:
        error: List[BaseException] = []

        def call(fraction, _user):
            try:
                return 1 if progress(fraction) else 0
            except BaseException as e:  # noqa: BLE001 - re-raised after the load returns
                error.append(e)
                return 1
        keep = (_lib.PROGRESS_FN(call), error)
        opts.progress = keep[0]
    return opts, keep


class Model:
    """A loaded model, immutable and usable from many threads at once. Close it (or use
    `with`); sessions made from it stay valid after it is closed."""

    def __init__(self, path: Union[str, os.PathLike], backend: Union[Backend, str, int] = "auto",
                 device_index: Optional[int] = None, n_threads: Optional[int] = None,
                 progress: Optional[ProgressCallback] = None):
        opts, keep = _model_options(backend, device_index, n_threads, progress)
        out = ctypes.c_void_p()
        status = _lib.lib().vegas_model_load(os.fsencode(path), ctypes.byref(opts),
                                             ctypes.byref(out))
        if keep is not None and keep[1]:
            raise keep[1][0]
        check(status)
        self._handle: Optional[int] = out.value
        self._tokenizer: Optional[Tokenizer] = None
        self._lib = _lib.lib()  # kept: module globals may be gone when __del__ runs at exit

    @classmethod
    def synthetic(cls, config_json: Union[str, os.PathLike], seed: int = 0,
                  backend: Union[Backend, str, int] = "auto", device_index: Optional[int] = None
                  ) -> "Model":
        """Random weights of a config's shapes on the device (no tokenizer); CUDA only."""
        opts, _ = _model_options(backend, device_index, None, None)
        out = ctypes.c_void_p()
        check(_lib.lib().vegas_model_load_synthetic(os.fsencode(config_json), seed,
                                                    ctypes.byref(opts), ctypes.byref(out)))
        self = cls.__new__(cls)
        self._handle, self._tokenizer, self._lib = out.value, None, _lib.lib()
        return self

    def _ptr(self) -> int:
        if self._handle is None:
            raise ValueError("the model is closed")
        return self._handle

    @property
    def closed(self) -> bool:
        return self._handle is None

    def close(self) -> None:
        """Releases this reference; the memory goes when its last session is closed too."""
        if self._tokenizer is not None:
            self._tokenizer.close_detokenizers()  # they borrow the model's tokenizer
        if self._handle is not None:
            self._lib.vegas_model_free(self._handle)
            self._handle = None

    def __enter__(self) -> "Model":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_handle", None) is not None:
            self.close()

    @property
    def tokenizer(self) -> Tokenizer:
        """The model's tokenizer (borrowed: usable while the model is open)."""
        if self._tokenizer is None:
            handle = _lib.lib().vegas_model_tokenizer(self._ptr())
            if not handle:
                check(int(Status.NOT_FOUND))  # a synthetic model: the library says why
            self._tokenizer = Tokenizer(handle, owner=self)
        return self._tokenizer

    @property
    def info(self) -> ModelInfo:
        out = _lib.ModelInfoStruct()
        out.struct_size = ctypes.sizeof(out)
        check(_lib.lib().vegas_model_get_info(self._ptr(), ctypes.byref(out)))
        values = {name: getattr(out, name) for name, _ in out._fields_[1:]}
        values["backend"] = Backend(values["backend"])
        values["architecture"] = out.architecture.decode("utf-8")
        return ModelInfo(**values)

    def measure_bandwidth(self) -> float:
        """Copy bandwidth of the weights' memory, bytes read + written per second."""
        out = ctypes.c_double()
        check(_lib.lib().vegas_model_measure_bandwidth(self._ptr(), ctypes.byref(out)))
        return out.value

    def session(self, **options) -> Session:
        """A new Session; see Session for the options."""
        return Session(self, **options)

    def generate(self, prompt: str, max_tokens: Optional[int] = None,
                 sampling: Union[Sampling, dict, None] = None,
                 on_token: Optional[TokenCallback] = None, **session_options) -> str:
        """Completes `prompt` in a private session (vegas_generate) and returns the text."""
        lib = _lib.lib()
        opts = _lib.init_struct(_lib.GenerateOptions)
        if max_tokens is not None:
            opts.max_tokens = max_tokens
        samp = sampling_struct(lib, sampling)
        if samp is not None:
            opts.sampling = ctypes.pointer(samp)
        sess = session_struct(lib, session_options) if session_options else None
        if sess is not None:
            opts.session = ctypes.pointer(sess)
        pieces: List[bytes] = []
        error: List[BaseException] = []

        def call(seq, token, piece, n, _user):
            try:
                data = ctypes.string_at(piece, n) if n else b""
                pieces.append(data)
                if on_token is not None and on_token(Token(seq, token, data.decode("utf-8"))):
                    return 1
                return 0
            except BaseException as e:  # noqa: BLE001 - re-raised after the call returns
                error.append(e)
                return 1
        callback = _lib.TOKEN_FN(call)
        opts.on_token = callback
        capacity = 16 * opts.max_tokens + 1024
        buf = ctypes.create_string_buffer(capacity)
        n = ctypes.c_size_t()
        status = lib.vegas_generate(self._ptr(), prompt.encode("utf-8"), ctypes.byref(opts), buf,
                                    capacity, ctypes.byref(n))
        if error:
            raise error[0]
        if status == Status.BUFFER_TOO_SMALL:
            # The completion is the concatenation of the streamed pieces.
            return b"".join(pieces).decode("utf-8")
        check(status)
        return buf.raw[:n.value].decode("utf-8")

    def stream(self, prompt: Prompt, **request) -> Iterator[str]:
        """Yields the completion's text piece by piece (a private session; options as
        Session.submit's)."""
        with self.session() as s:
            yield from s.stream_text(prompt, **request)


def quantize(model_dir: Union[str, os.PathLike], out_path: Union[str, os.PathLike],
             type: str = "q8_0") -> None:  # noqa: A002 (the CLI's name)
    """Writes the Hugging Face model in `model_dir` as one GGUF file (vegas_model_quantize):
    its matrices as `type` (q8_0, q4_0, q4_k, q5_k, q6_k, q4_k_m, q5_k_m, bf16, f16, f32),
    which vegas.Model and llama.cpp load. Type "fp8" writes a Hugging Face directory at
    `out_path` instead (it must not exist or be empty): the layers' projection matrices as
    F8_E4M3 with a scale per 128 x 128 block, which vegas.Model loads and the CUDA backend keeps
    in FP8."""
    check(_lib.lib().vegas_model_quantize(os.fsencode(model_dir), os.fsencode(out_path),
                                          type.encode()))

"""Tokenizers (loaded from tokenizer.json, or borrowed from a model) and the streaming
detokenizer."""
from __future__ import annotations

import ctypes
import os
import weakref
from dataclasses import dataclass
from typing import Iterable, Iterator, List, Optional, Sequence, Tuple, Union

from . import _lib
from .errors import check, read_bytes, read_ids


@dataclass(frozen=True)
class SpecialTokens:
    """Well-known token ids; -1 where the tokenizer has none."""
    bos: int
    eos: int
    pad: int
    fim_prefix: int
    fim_middle: int
    fim_suffix: int
    fim_pad: int
    file_sep: int
    im_start: int
    im_end: int


def _ids_array(ids: Sequence[int]):
    return (ctypes.c_int32 * max(len(ids), 1))(*ids)


class Tokenizer:
    """A byte-level BPE tokenizer. `Tokenizer.load(path)` owns one (close it, or use `with`);
    `Model.tokenizer` borrows the model's, valid while the model is open."""

    def __init__(self, handle: int, owner: Optional[object] = None):
        self._handle: Optional[int] = handle
        self._owner = owner  # the Model a borrowed tokenizer belongs to, None when owned
        self._lib = _lib.lib()  # kept: module globals may be gone when __del__ runs at exit
        self._children: "weakref.WeakSet[Detokenizer]" = weakref.WeakSet()

    @classmethod
    def load(cls, path: Union[str, os.PathLike]) -> "Tokenizer":
        """Loads tokenizer.json (the file, or a directory holding it)."""
        out = ctypes.c_void_p()
        check(_lib.lib().vegas_tokenizer_load(os.fsencode(path), ctypes.byref(out)))
        return cls(out.value)

    def _ptr(self) -> int:
        if self._handle is None or (self._owner is not None and self._owner.closed):
            raise ValueError("the tokenizer is closed (or its model is)")
        return self._handle

    def close(self) -> None:
        """Frees an owned tokenizer; forgets a borrowed one. Safe to call twice."""
        self.close_detokenizers()
        if self._handle is not None and self._owner is None:
            self._lib.vegas_tokenizer_free(self._handle)
        self._handle = None

    def close_detokenizers(self) -> None:
        """Frees the detokenizers made from this tokenizer: they must not outlive it."""
        for det in list(self._children):
            det.close()

    def __enter__(self) -> "Tokenizer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_handle", None) is not None:
            self.close()

    @property
    def vocab_size(self) -> int:
        return int(_lib.lib().vegas_tokenizer_vocab_size(self._ptr()))

    def encode(self, text: Union[str, bytes], parse_special: bool = True,
               add_special: bool = True) -> List[int]:
        """Token ids of `text` (UTF-8), as Hugging Face tokenizers would encode it."""
        data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        opts = _lib.init_struct(_lib.TokenizeOptions)
        opts.parse_special = int(parse_special)
        opts.add_special = int(add_special)
        return read_ids(_lib.lib().vegas_tokenize, self._ptr(), data, len(data),
                        ctypes.byref(opts), capacity=len(data) + 8)

    def decode_bytes(self, ids: Sequence[int], skip_special: bool = False) -> bytes:
        return read_bytes(_lib.lib().vegas_detokenize, self._ptr(), _ids_array(ids), len(ids),
                          int(skip_special), capacity=4 * len(ids) + 16)

    def decode(self, ids: Sequence[int], skip_special: bool = False) -> str:
        """The text of `ids` (invalid UTF-8 became U+FFFD in the library)."""
        return self.decode_bytes(ids, skip_special).decode("utf-8")

    def piece(self, token: int) -> bytes:
        """The raw bytes one token stands for (may be part of a character)."""
        return read_bytes(_lib.lib().vegas_token_to_piece, self._ptr(), token, capacity=32)

    def token_id(self, name: str) -> int:
        """The id of a token given by its exact text; VegasError NOT_FOUND if none."""
        out = ctypes.c_int32()
        check(_lib.lib().vegas_token_by_name(self._ptr(), name.encode("utf-8"),
                                             ctypes.byref(out)))
        return out.value

    def is_special(self, token: int) -> bool:
        return bool(_lib.lib().vegas_token_is_special(self._ptr(), token))

    def special_tokens(self) -> SpecialTokens:
        out = _lib.SpecialTokensStruct()
        out.struct_size = ctypes.sizeof(out)
        check(_lib.lib().vegas_tokenizer_special_tokens(self._ptr(), ctypes.byref(out)))
        return SpecialTokens(**{name: getattr(out, name)
                                for name, _ in _lib.SpecialTokensStruct._fields_[1:]})

    @property
    def chat_format(self) -> str:
        """The chat format recognized in the model's chat template: "chatml", "llama3",
        or "" (vegas_tokenizer_chat_format)."""
        return _lib.lib().vegas_tokenizer_chat_format(self._ptr()).decode()

    def chat_tokenize(self, messages: Sequence[Tuple[str, str]],
                      add_generation_prompt: bool = True) -> List[int]:
        """Prompt ids of a chat given as (role, content) pairs, in the model's chat format;
        message text cannot forge a marker. VegasError UNSUPPORTED without a chat format."""
        n = len(messages)
        roles = (ctypes.c_char_p * max(n, 1))(*[r.encode("utf-8") for r, _ in messages])
        contents = (ctypes.c_char_p * max(n, 1))(*[c.encode("utf-8") for _, c in messages])
        size = sum(len(r) + len(c) + 8 for r, c in messages) + 16
        return read_ids(_lib.lib().vegas_chat_tokenize, self._ptr(), roles, contents, n,
                        int(add_generation_prompt), capacity=size)

    def detokenizer(self, skip_special: bool = False) -> "Detokenizer":
        return Detokenizer(self, skip_special)

    def stream_decode(self, ids: Iterable[int], skip_special: bool = False) -> Iterator[str]:
        """Yields the text that each id completes (never half a character), then the rest."""
        with self.detokenizer(skip_special) as det:
            for i in ids:
                text = det.push(i)
                if text:
                    yield text
            rest = det.flush()
            if rest:
                yield rest


class Detokenizer:
    """Feeds ids one at a time and returns only complete UTF-8. Keeps its tokenizer alive."""

    def __init__(self, tokenizer: Tokenizer, skip_special: bool = False):
        self._tokenizer = tokenizer
        out = ctypes.c_void_p()
        check(_lib.lib().vegas_detokenizer_create(tokenizer._ptr(), int(skip_special),
                                                  ctypes.byref(out)))
        self._handle: Optional[int] = out.value
        self._lib = _lib.lib()
        tokenizer._children.add(self)

    def _ptr(self) -> int:
        if self._handle is None:
            raise ValueError("the detokenizer is closed")
        self._tokenizer._ptr()  # the tokenizer it borrows must still be open
        return self._handle

    def push(self, token: int) -> str:
        return read_bytes(_lib.lib().vegas_detokenizer_push, self._ptr(), token,
                          capacity=64).decode("utf-8")

    def flush(self) -> str:
        """Ends the stream (pending bytes come out as U+FFFD) and resets it."""
        return read_bytes(_lib.lib().vegas_detokenizer_flush, self._ptr(),
                          capacity=64).decode("utf-8")

    def close(self) -> None:
        if self._handle is not None:
            self._lib.vegas_detokenizer_free(self._handle)
            self._handle = None

    def __enter__(self) -> "Detokenizer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_handle", None) is not None:
            self.close()

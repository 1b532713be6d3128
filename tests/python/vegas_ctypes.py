"""ctypes bindings of libvegas for the Python tests (tokenizer section).

Load with `load()` (reads $VEGAS_LIB). Other test modules extend `_declare`
with their own sections of vegas.h.
"""
import ctypes
import os

c_int32_p = ctypes.POINTER(ctypes.c_int32)
c_size_t_p = ctypes.POINTER(ctypes.c_size_t)

VEGAS_OK = 0
VEGAS_ERR_BUFFER_TOO_SMALL = -9
VEGAS_ERR_TOKEN_OUT_OF_RANGE = -8
VEGAS_ERR_NOT_FOUND = -13


class TokenizeOptions(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("parse_special", ctypes.c_int32),
                ("add_special", ctypes.c_int32)]


class SpecialTokens(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32)] + [
        (name, ctypes.c_int32) for name in ("bos", "eos", "pad", "fim_prefix", "fim_middle",
                                            "fim_suffix", "fim_pad", "file_sep", "im_start",
                                            "im_end")]


class VegasError(RuntimeError):
    def __init__(self, status, message):
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message


def _declare(lib):
    vp = ctypes.c_void_p
    sigs = {
        "vegas_last_error": (ctypes.c_char_p, []),
        "vegas_status_name": (ctypes.c_char_p, [ctypes.c_int]),
        "vegas_tokenizer_load": (ctypes.c_int, [ctypes.c_char_p, ctypes.POINTER(vp)]),
        "vegas_tokenizer_free": (None, [vp]),
        "vegas_tokenizer_vocab_size": (ctypes.c_int32, [vp]),
        "vegas_tokenize_options_init_sized": (None, [ctypes.POINTER(TokenizeOptions),
                                                     ctypes.c_size_t]),
        "vegas_tokenize": (ctypes.c_int, [vp, ctypes.c_char_p, ctypes.c_size_t,
                                          ctypes.POINTER(TokenizeOptions), c_int32_p,
                                          ctypes.c_size_t, c_size_t_p]),
        "vegas_detokenize": (ctypes.c_int, [vp, c_int32_p, ctypes.c_size_t, ctypes.c_int32,
                                            ctypes.c_char_p, ctypes.c_size_t, c_size_t_p]),
        "vegas_token_to_piece": (ctypes.c_int, [vp, ctypes.c_int32, ctypes.c_char_p,
                                                ctypes.c_size_t, c_size_t_p]),
        "vegas_token_by_name": (ctypes.c_int, [vp, ctypes.c_char_p, c_int32_p]),
        "vegas_token_is_special": (ctypes.c_int32, [vp, ctypes.c_int32]),
        "vegas_tokenizer_special_tokens": (ctypes.c_int, [vp, ctypes.POINTER(SpecialTokens)]),
        "vegas_tokenizer_chat_format": (ctypes.c_char_p, [vp]),
        "vegas_chat_tokenize": (ctypes.c_int, [vp, ctypes.POINTER(ctypes.c_char_p),
                                               ctypes.POINTER(ctypes.c_char_p), ctypes.c_size_t,
                                               ctypes.c_int32, c_int32_p, ctypes.c_size_t,
                                               c_size_t_p]),
        "vegas_detokenizer_create": (ctypes.c_int, [vp, ctypes.c_int32, ctypes.POINTER(vp)]),
        "vegas_detokenizer_free": (None, [vp]),
        "vegas_detokenizer_push": (ctypes.c_int, [vp, ctypes.c_int32, ctypes.c_char_p,
                                                  ctypes.c_size_t, c_size_t_p]),
        "vegas_detokenizer_flush": (ctypes.c_int, [vp, ctypes.c_char_p, ctypes.c_size_t,
                                                   c_size_t_p]),
    }
    for name, (restype, argtypes) in sigs.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
    return lib


_LIB = None


def load():
    """The libvegas named by $VEGAS_LIB, declared; None when the variable is unset."""
    global _LIB
    if _LIB is None:
        path = os.environ.get("VEGAS_LIB")
        if not path:
            return None
        _LIB = _declare(ctypes.CDLL(path))
    return _LIB


def check(lib, status):
    if status != VEGAS_OK:
        raise VegasError(lib.vegas_status_name(status).decode(), lib.vegas_last_error().decode())


class Tokenizer:
    """A vegas_tokenizer owned by Python."""

    def __init__(self, lib, path):
        self.lib = lib
        self.handle = ctypes.c_void_p()
        check(lib, lib.vegas_tokenizer_load(str(path).encode(), ctypes.byref(self.handle)))

    def close(self):
        if self.handle:
            self.lib.vegas_tokenizer_free(self.handle)
            self.handle = ctypes.c_void_p()

    def __del__(self):
        self.close()

    @property
    def vocab_size(self):
        return self.lib.vegas_tokenizer_vocab_size(self.handle)

    def encode(self, text, parse_special=True, add_special=True):
        data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else bytes(text)
        opts = TokenizeOptions()
        self.lib.vegas_tokenize_options_init_sized(ctypes.byref(opts), ctypes.sizeof(opts))
        opts.parse_special = int(parse_special)
        opts.add_special = int(add_special)
        return self._ids_call(self.lib.vegas_tokenize, self.handle, data, len(data),
                              ctypes.byref(opts), capacity=len(data) + 8)

    @property
    def chat_format(self):
        return self.lib.vegas_tokenizer_chat_format(self.handle).decode()

    def chat_tokenize(self, messages, add_generation_prompt=True):
        """messages: [(role, content)] -> prompt ids (vegas_chat_tokenize)."""
        n = len(messages)
        roles = (ctypes.c_char_p * max(n, 1))(*[r.encode() for r, _ in messages])
        contents = (ctypes.c_char_p * max(n, 1))(*[c.encode() for _, c in messages])
        return self._ids_call(self.lib.vegas_chat_tokenize, self.handle, roles, contents, n,
                              int(add_generation_prompt), capacity=8)

    def _ids_call(self, fn, *args, capacity):
        """As _bytes_call, for functions filling an int32_t array."""
        n = ctypes.c_size_t()
        buf = (ctypes.c_int32 * max(capacity, 1))()
        st = fn(*args, buf, capacity, ctypes.byref(n))
        if st == VEGAS_ERR_BUFFER_TOO_SMALL:
            capacity = n.value
            buf = (ctypes.c_int32 * max(capacity, 1))()
            st = fn(*args, buf, capacity, ctypes.byref(n))
        check(self.lib, st)
        return list(buf[:n.value])

    def _bytes_call(self, fn, *args, capacity=64):
        """Calls a buffer-filling function once, again only after BUFFER_TOO_SMALL
        (which leaves any state untouched, so stateful calls are safe)."""
        n = ctypes.c_size_t()
        buf = ctypes.create_string_buffer(capacity)
        st = fn(*args, buf, capacity, ctypes.byref(n))
        if st == VEGAS_ERR_BUFFER_TOO_SMALL:
            buf = ctypes.create_string_buffer(n.value)
            st = fn(*args, buf, n.value, ctypes.byref(n))
        check(self.lib, st)
        return buf.raw[:n.value]

    def decode_bytes(self, ids, skip_special=False):
        arr = (ctypes.c_int32 * max(len(ids), 1))(*ids)
        return self._bytes_call(self.lib.vegas_detokenize, self.handle, arr, len(ids),
                                int(skip_special))

    def decode(self, ids, skip_special=False):
        return self.decode_bytes(ids, skip_special).decode("utf-8")

    def piece(self, token_id):
        return self._bytes_call(self.lib.vegas_token_to_piece, self.handle, token_id)

    def token_id(self, name):
        out = ctypes.c_int32()
        check(self.lib, self.lib.vegas_token_by_name(self.handle, name.encode(), ctypes.byref(out)))
        return out.value

    def is_special(self, token_id):
        return bool(self.lib.vegas_token_is_special(self.handle, token_id))

    def special_tokens(self):
        out = SpecialTokens()
        out.struct_size = ctypes.sizeof(SpecialTokens)
        check(self.lib, self.lib.vegas_tokenizer_special_tokens(self.handle, ctypes.byref(out)))
        return {name: getattr(out, name) for name, _ in SpecialTokens._fields_[1:]}

    def stream_decode(self, ids, skip_special=False):
        """Text chunks from the streaming detokenizer, flush included."""
        det = ctypes.c_void_p()
        check(self.lib, self.lib.vegas_detokenizer_create(self.handle, int(skip_special),
                                                          ctypes.byref(det)))
        try:
            # capacity=1 makes most pushes report a short buffer first: that retry
            # must not lose or repeat text.
            chunks = [self._bytes_call(self.lib.vegas_detokenizer_push, det, i, capacity=1)
                      for i in ids]
            chunks.append(self._bytes_call(self.lib.vegas_detokenizer_flush, det, capacity=1))
            return chunks
        finally:
            self.lib.vegas_detokenizer_free(det)

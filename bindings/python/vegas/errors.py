"""Statuses of vegas.h and the exception that carries one with the library's message."""
from __future__ import annotations

import ctypes
import enum
from typing import Callable

from . import _lib


class Status(enum.IntEnum):
    OK = 0
    INVALID_ARGUMENT = -1
    STRUCT_SIZE = -2
    IO = -3
    FORMAT = -4
    UNSUPPORTED = -5
    OUT_OF_MEMORY = -6
    KV_FULL = -7
    TOKEN_OUT_OF_RANGE = -8
    BUFFER_TOO_SMALL = -9
    CANCELLED = -10
    BACKEND = -11
    NOT_BUILT = -12
    NOT_FOUND = -13
    WRONG_STATE = -14
    INTERNAL = -99


class VegasError(RuntimeError):
    """A libvegas call failed. `status` is a Status (or the raw int for an unknown code),
    `message` is vegas_last_error() of the failed call."""

    def __init__(self, status: int, message: str):
        try:
            self.status = Status(status)
        except ValueError:
            self.status = status  # type: ignore[assignment]
        self.message = message
        name = _lib.lib().vegas_status_name(status).decode()
        super().__init__(f"{name}: {message}" if message else name)


def check(status: int) -> None:
    """Raises VegasError for a non-OK status, with the message of this thread's last call."""
    if status != Status.OK:
        raise VegasError(status, _lib.lib().vegas_last_error().decode("utf-8", "replace"))


def read_bytes(call: Callable[..., int], *args, capacity: int = 256) -> bytes:
    """Runs a buffer-filling call (buf, capacity, size_t *needed), once more with the size
    it asked for after BUFFER_TOO_SMALL (which leaves any state untouched)."""
    n = ctypes.c_size_t()
    buf = ctypes.create_string_buffer(max(capacity, 1))
    status = call(*args, buf, capacity, ctypes.byref(n))
    if status == Status.BUFFER_TOO_SMALL:
        buf = ctypes.create_string_buffer(max(n.value, 1))
        status = call(*args, buf, n.value, ctypes.byref(n))
    check(status)
    return buf.raw[:n.value]


def read_ids(call: Callable[..., int], *args, capacity: int = 256) -> list:
    """As read_bytes, for calls filling an int32_t array."""
    n = ctypes.c_size_t()
    buf = (ctypes.c_int32 * max(capacity, 1))()
    status = call(*args, buf, capacity, ctypes.byref(n))
    if status == Status.BUFFER_TOO_SMALL:
        capacity = n.value
        buf = (ctypes.c_int32 * max(capacity, 1))()
        status = call(*args, buf, capacity, ctypes.byref(n))
    check(status)
    return list(buf[:n.value])

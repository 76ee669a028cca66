"""A pytest plugin for the run of test_hello.py under AddressSanitizer (test_hello_sanitized.py): the relay module's
`hello` gets each input in a malloc'd buffer of exactly its size. A bytes object would hide a read one byte too far
(its trailing NUL is within the allocation); a malloc'd buffer has ASan's red zone right after its last byte."""
from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import pytest

libc = ctypes.CDLL(None)  # malloc and free as preloaded: AddressSanitizer's
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]


def in_exact_buffers(hello: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def call(data: Any) -> Any:
        data = bytes(data)
        address = libc.malloc(len(data) or 1)
        assert address
        try:
            ctypes.memmove(address, data, len(data))
            return hello((ctypes.c_ubyte * len(data)).from_address(address))
        finally:
            libc.free(address)
    return call


def pytest_runtest_setup(item: pytest.Item) -> None:
    module = getattr(item, "module", None)
    if module is not None and module.__name__.rpartition(".")[2] == "test_hello":
        module.hello = in_exact_buffers(module.lib.hello)

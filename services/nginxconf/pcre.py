"""Regular expressions compiled by the PCRE libraries nginx itself loads, with nginx's options.

nginx here has two regex engines, and they differ (an unknown escape such as \\y is a literal to one and an
error to the other), so a pattern is checked by the one that will run it:
- ngx.re (nginx's Lua module: routes, canary header patterns, auth-tls-match-cn): Debian's ngx_lua 0.10.23
  links the old PCRE, libpcre.so.3 (PCRE2 support came in ngx_lua 0.10.26). resty.core's ngx.re turns the
  flag "i" into PCRE_CASELESS and adds no other compile option ("j" and "o" only JIT-compile and cache;
  a failed JIT compile is not an error), and ngx_http_lua_ffi_compile_regex passes that to pcre_compile
  with the default character tables. No UTF mode: a pattern is bytes.
- nginx's own regexes (map keys "~"/"~*"): nginx 1.22's ngx_regex_compile calls libpcre2-8's
  pcre2_compile with PCRE2_CASELESS for "~*" and nothing else, and a compile context with default settings.
Compiling a pattern here costs about 2 µs, so nothing is cached.
"""
from __future__ import annotations

import ctypes
import enum
import functools
from dataclasses import dataclass

# pcre.h and pcre2.h
_PCRE_CASELESS = 0x00000001
_PCRE2_CASELESS = 0x00000008
_ERROR_MESSAGE_SIZE = 256


class Engine(enum.Enum):
    """Which of nginx's regex engines will compile a pattern."""
    NGX_LUA = "nginx's Lua, libpcre.so.3"
    NGINX = "nginx, libpcre2-8.so.0"


@dataclass(frozen=True)
class Refusal:
    """Why PCRE refuses a pattern: its own message, and the character of the pattern where it stopped."""
    message: str
    offset: int


class PcreUnavailable(RuntimeError):
    """The library an engine needs is not installed, so no pattern for it can be checked."""


@functools.cache
def _pcre1() -> ctypes.CDLL:
    lib = _load("libpcre.so.3", package="libpcre3")
    lib.pcre_compile.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(ctypes.c_char_p),
                                 ctypes.POINTER(ctypes.c_int), ctypes.c_void_p]
    lib.pcre_compile.restype = ctypes.c_void_p
    return lib


@functools.cache
def _pcre2() -> ctypes.CDLL:
    lib = _load("libpcre2-8.so.0", package="libpcre2-8-0")
    lib.pcre2_compile_8.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint32, ctypes.POINTER(ctypes.c_int),
                                    ctypes.POINTER(ctypes.c_size_t), ctypes.c_void_p]
    lib.pcre2_compile_8.restype = ctypes.c_void_p
    lib.pcre2_get_error_message_8.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t]
    lib.pcre2_get_error_message_8.restype = ctypes.c_int
    lib.pcre2_code_free_8.argtypes = [ctypes.c_void_p]
    lib.pcre2_code_free_8.restype = None
    return lib


def _load(soname: str, *, package: str) -> ctypes.CDLL:
    try:
        return ctypes.CDLL(soname)
    except OSError:
        raise PcreUnavailable(f"regular expressions cannot be checked: {soname} is missing; install the Debian "
                              f"package {package} (nginx needs it too)") from None


def refusal(pattern: str, engine: Engine, *, caseless: bool) -> Refusal | None:
    """None when `engine` compiles `pattern` (with "i"/"~*" when `caseless`), else PCRE's refusal."""
    data = pattern.encode()
    if b"\0" in data:
        # ngx.re hands pcre_compile a C string, which would end there; nginx.conf cannot hold one at all.
        return Refusal("a NUL character cannot be part of a pattern", pattern.index("\0"))
    if engine is Engine.NGX_LUA:
        message, byte_offset = _compile_pcre1(data, _PCRE_CASELESS if caseless else 0)
    else:
        message, byte_offset = _compile_pcre2(data, _PCRE2_CASELESS if caseless else 0)
    if message is None:
        return None
    return Refusal(message, len(data[:byte_offset].decode(errors="ignore")))


def _compile_pcre1(data: bytes, options: int) -> tuple[str | None, int]:
    lib = _pcre1()
    error, offset = ctypes.c_char_p(), ctypes.c_int()
    code = lib.pcre_compile(data, options, ctypes.byref(error), ctypes.byref(offset), None)
    if code:
        # pcre_free is a variable of libpcre (a pointer to the allocator's free), not a function.
        ctypes.CFUNCTYPE(None, ctypes.c_void_p).in_dll(lib, "pcre_free")(code)
        return None, 0
    return (error.value or b"unknown error").decode(errors="replace"), offset.value


def _compile_pcre2(data: bytes, options: int) -> tuple[str | None, int]:
    lib = _pcre2()
    error_code, offset = ctypes.c_int(), ctypes.c_size_t()
    code = lib.pcre2_compile_8(data, len(data), options, ctypes.byref(error_code), ctypes.byref(offset), None)
    if code:
        lib.pcre2_code_free_8(code)
        return None, 0
    message = ctypes.create_string_buffer(_ERROR_MESSAGE_SIZE)
    lib.pcre2_get_error_message_8(error_code.value, message, len(message))
    return message.value.decode(errors="replace"), offset.value

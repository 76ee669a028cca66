"""Lua syntax checks with the LuaJIT that nginx's Lua module runs.

`nginx -t` does not run init_by_lua, so a Lua module with a syntax error passes it and only fails when the
master loads it at the reload (and keeps its old workers). A custom template's Lua is compiled here first,
by the same libluajit Debian's ngx_lua links, without running it.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools


class LuaSyntaxError(ValueError):
    pass


@functools.cache
def _luajit() -> ctypes.CDLL:
    name = ctypes.util.find_library("luajit-5.1") or "libluajit-5.1.so.2"
    lib = ctypes.CDLL(name)
    lib.luaL_newstate.restype = ctypes.c_void_p
    lib.luaL_loadbuffer.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p]
    lib.luaL_loadbuffer.restype = ctypes.c_int
    lib.lua_tolstring.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
    lib.lua_tolstring.restype = ctypes.c_char_p
    lib.lua_close.argtypes = [ctypes.c_void_p]
    return lib


def check_lua_syntax(source: bytes, chunk_name: str) -> None:
    """Raise LuaSyntaxError with LuaJIT's message ("name:line: ...") unless `source` compiles."""
    lib = _luajit()
    state = lib.luaL_newstate()
    if not state:
        raise MemoryError("LuaJIT could not create a state")
    try:
        if lib.luaL_loadbuffer(state, source, len(source), f"@{chunk_name}".encode()) != 0:
            message = lib.lua_tolstring(state, -1, None) or b"unknown error"
            raise LuaSyntaxError(message.decode(errors="replace"))
    finally:
        lib.lua_close(state)

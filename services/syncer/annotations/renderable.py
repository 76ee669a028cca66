"""Proof that a setting renders: its value goes through render.py's own quoting before it is accepted.

The allow-list validators decide what a value may mean; this decides whether render() can write it at all.
Checked per Ingress (and per ConfigMap key), a validator's oversight rejects one object with a message,
instead of a RenderError in render() that stops every tenant's configuration from being applied.
"""
from __future__ import annotations

from services.syncer.render import CORS_OPTIONS, PROXY_PASS_SCHEME, RenderError, arguments, directive, lua_string

# ngx_lua reads an inline *_by_lua_block with its own tokenizer over nginx's 4 KiB configuration buffer: a
# long Lua string literal passes `nginx -t` or fails it ("too long lua code block") depending on where it
# falls in the file, that is on other tenants' profiles. The CORS options are such literals in
# init_by_lua_block. Measured with nginx 1.22 and ngx_lua 0.10.23: failures from about 2,000 bytes, none up
# to 1,500 wherever the literal fell, several such literals in a row included.
MAX_LUA_STRING = 1200


def check_renders(name: str, value: str) -> None:
    """Raise RenderError unless render() can write the setting `name` with `value` into nginx.conf."""
    if name in CORS_OPTIONS:
        length = len(lua_string(value))
        if length > MAX_LUA_STRING:
            raise RenderError(f"{length} bytes once written as a Lua string, more than the {MAX_LUA_STRING} that "
                              "nginx reliably reads in a Lua block; shorten it (fewer entries, or a wildcard such "
                              "as https://*.example.com)")
        return
    if name != PROXY_PASS_SCHEME:  # not a directive: render() writes it into proxy_pass once it knows it
        directive(name)
    arguments(value)

"""Proof that a location setting renders: its value goes through the renderer's own quoting before it is
accepted.

The allow-list validators decide what a value may mean; this decides whether render() can write it at all.
Checked per Ingress (and per ConfigMap key), a validator's oversight rejects one object with a message,
instead of a RenderError in render() that stops every tenant's configuration from being applied.
"""
from __future__ import annotations

from dataclasses import asdict

from services.nginxconf.config import CorsPolicy
from services.nginxconf.render import RenderError, directive, directive_arguments, lua_string

# ngx_lua reads an inline *_by_lua_block with its own tokenizer over nginx's 4 KiB configuration buffer: a
# long Lua string literal passes `nginx -t` or fails it ("too long lua code block") depending on where it
# falls in the file, that is on other tenants' profiles. The CORS options are such literals in
# init_by_lua_block. Measured with nginx 1.22 and ngx_lua 0.10.23: failures from about 2,000 bytes, none up
# to 1,500 wherever the literal fell, several such literals in a row included.
MAX_LUA_STRING = 1200


def check_renders(name: str, value: str) -> None:
    """Raise RenderError unless render() can write the directive `name` with `value` into nginx.conf."""
    directive(name)
    directive_arguments(name, value)


def unrenderable_cors_option(policy: CorsPolicy) -> tuple[str, RenderError] | None:
    """The first option of `policy` (a CorsPolicy field name) that cannot be written as a Lua string, and why."""
    for option, value in asdict(policy).items():
        if isinstance(value, str):
            length = len(lua_string(value))
            if length > MAX_LUA_STRING:
                return option, RenderError(
                    f"{length} bytes once written as a Lua string, more than the {MAX_LUA_STRING} that nginx "
                    "reliably reads in a Lua block; shorten it (fewer entries, or a wildcard such as "
                    "https://*.example.com)")
    return None

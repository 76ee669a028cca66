"""The Lua modules' own tests (tests/lua/*_spec.lua, busted), each spec file in a real nginx (nginx_lua.py): nginx's
LuaJIT, shared dictionaries, PCRE and MD5; only what needs a request is stood in for (fake_request.lua)."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.lua.nginx_lua import LUA_TESTS, run_lua

SPECS = sorted(LUA_TESTS.glob("*_spec.lua"))


@pytest.mark.parametrize("spec", SPECS, ids=[s.stem for s in SPECS])
def test_lua_spec(spec: Path, tmp_path: Path):
    assert shutil.which("busted"), "busted is missing: `make setup` installs lua-busted"
    result = run_lua(tmp_path, f'arg = {{ [0] = "busted", "--output=utfTerminal", "{spec}" }}\n'
                               'require("busted.runner")({ standalone = false })\n'
                               "os.exit(0)  -- busted exits by itself only on a failure")
    assert result.returncode == 0, f"{spec.name}:\n{result.stdout}\n{result.stderr[-3000:]}"
    assert " 0 failures / 0 errors" in result.stdout, result.stdout

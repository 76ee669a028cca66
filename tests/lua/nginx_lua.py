"""Runs Lua inside a real nginx (Debian's nginx with its Lua module: LuaJIT, resty.core, shared dictionaries, PCRE,
OpenSSL): the chunk runs in init_by_lua of a `master_process off` nginx that binds no port, and ends it with
os.exit. Only what needs a request (ngx.var, ngx.exec, ..., and pyngress's nginx module's calls about a request) is left for
the specs to stand in for (tests/lua/fake_request.lua)."""
from __future__ import annotations

import subprocess
from pathlib import Path

from services.nginxconf.paths import nginx_module

REPO = Path(__file__).resolve().parents[2]
LUA_TESTS = REPO / "tests" / "lua"
MODULES = Path("/usr/lib/nginx/modules")
# The pushed tables' dictionaries, as nginx.conf.j2 declares them.
SHARED_DICTS = ("versions", "routes", "backends", "certificates", "digest_nonces", "metrics")


def run_lua(workdir: Path, chunk: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """nginx's result of running `chunk` (which must end with os.exit) at init, its output in stdout/stderr."""
    dicts = "\n".join(f"    lua_shared_dict pyngress_{name} 4m;" for name in SHARED_DICTS)
    conf = workdir / "lua-runner.conf"
    conf.write_text(f"""
load_module {MODULES}/ndk_http_module.so;
load_module {MODULES}/ngx_http_lua_module.so;
load_module {nginx_module()};
daemon off;
master_process off;
error_log stderr notice;
pid {workdir}/nginx.pid;
events {{}}
http {{
    lua_package_path "{REPO}/templates/lua/?.lua;{LUA_TESTS}/?.lua;;";
{dicts}
    init_by_lua_block {{
        local ok, err = xpcall(function()
{chunk}
        end, debug.traceback)
        io.stderr:write("the Lua chunk returned without os.exit: ", tostring(err), "\\n")
        os.exit(3)
    }}
}}
""")
    return subprocess.run(["nginx", "-p", str(workdir), "-e", "stderr", "-c", str(conf)], capture_output=True,
                          text=True, timeout=timeout)

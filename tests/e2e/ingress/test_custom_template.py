"""--template DIR: a custom nginx template (and its Lua) is watched, checked and applied; a broken version is
reported while the last good one keeps serving, and a fixed one is applied again."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from services.nginxconf.template import BUILTIN_DIR
from tests.support.controller import VENV_BIN, Controller, start_manifests_controller
from tests.support.net import wait_for

DEFAULT_BACKEND = ("            # nginx's own 404 page (text/html), as ingress-nginx's built-in default backend answers.\n"
                   "            return 404;\n")


def write_template(directory: Path, *, marker: str, lua_value: str = "one", extra_http: str = "") -> None:
    """The built-in template with a response header on the default backend (`marker`) and one from a Lua
    module of its own (`lua_value`)."""
    text = (BUILTIN_DIR / "nginx.conf.j2").read_text()
    assert DEFAULT_BACKEND in text, "the built-in default backend location changed; update this test"
    text = text.replace(DEFAULT_BACKEND, f'            add_header X-Template "{marker}" always;\n'
                        '            header_filter_by_lua_block { ngx.header["X-Template-Lua"] = '
                        'require("custom.value").value }\n' + DEFAULT_BACKEND)
    text = text.replace("http {\n", "http {\n" + extra_http, 1)
    # Loaded by the root master, as pyngress's own modules are: the workers (nobody) may not read the state
    # directory (here it is under pytest's 0700 directory).
    boot = '        require("pyngress.boot").master({'
    assert boot in text, "the built-in init_by_lua_block changed; update this test"
    text = text.replace(boot, '        require("custom.value")\n' + boot)
    (directory / "nginx.conf.j2").write_text(text)
    (directory / "lua" / "custom").mkdir(parents=True, exist_ok=True)
    (directory / "lua" / "custom" / "value.lua").write_text(f'return {{ value = "{lua_value}" }}\n')


def headers(controller: Controller) -> tuple[str | None, str | None]:
    response = controller.get("/", host="unknown.example.com")
    assert response.status_code == 404
    return response.headers.get("X-Template"), response.headers.get("X-Template-Lua")


def template_error(controller: Controller) -> str | None:
    return controller.health().json().get("template_error")


@pytest.fixture
def template_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "template"
    shutil.copytree(BUILTIN_DIR, directory)
    directory.chmod(0o755)
    write_template(directory, marker="v1")
    return directory


def test_custom_template_is_applied_refused_when_broken_and_recovers(tmp_path: Path, template_dir: Path) -> None:
    controller, _ = start_manifests_controller(tmp_path / "c", ["--template", str(template_dir)])
    try:
        assert headers(controller) == ("v1", "one")
        assert controller.metric("pyngress_template_ok") == 1

        write_template(template_dir, marker="v2", lua_value="two")
        wait_for(lambda: headers(controller) == ("v2", "two"), 15, what="the changed template and its Lua applied")
        reloads = controller.settled_reloads()

        broken = {
            "a Jinja2 syntax error": lambda: (template_dir / "nginx.conf.j2").write_text(
                (template_dir / "nginx.conf.j2").read_text() + "{% if %}\n"),
            "a directive nginx -t refuses": lambda: write_template(template_dir, marker="v3",
                                                                   extra_http="    no_such_directive on;\n"),
            "a Lua syntax error": lambda: (template_dir / "lua" / "custom" / "value.lua").write_text("return {\n"),
        }
        for what, breaks in broken.items():
            write_template(template_dir, marker="v2", lua_value="two")
            wait_for(lambda: template_error(controller) is None, 15, what="the good template back")
            breaks()
            wait_for(lambda: template_error(controller) is not None, 15, what=f"{what} reported")
            assert controller.metric("pyngress_template_ok") == 0, what
            assert headers(controller) == ("v2", "two"), f"{what}: the last good template keeps serving"
            assert controller.metric("nginx_ingress_controller_success") == reloads, what
        assert "no_such_directive" not in controller.nginx_conf().decode()

        out = subprocess.run([str(VENV_BIN / "pyngress"), "status", f"--run-dir={controller.run_dir}",
                              f"--healthz-port={controller.healthz_port}"], capture_output=True, text=True, timeout=60)
        syncer_line = next(line for line in out.stdout.splitlines() if line.startswith("syncer"))
        assert "template_error=" in syncer_line and "Lua does not compile" in syncer_line, syncer_line
        write_template(template_dir, marker="v4", lua_value="four")
        wait_for(lambda: headers(controller) == ("v4", "four"), 15, what="the fixed template applied")
        assert template_error(controller) is None
        assert controller.metric("pyngress_template_ok") == 1
    finally:
        controller.stop()

"""A custom template directory: what is refused and how it says why, and the last good one across restarts."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from services.nginxconf.config import NginxConfig
from services.nginxconf.render import render, template_from
from services.nginxconf.template import BUILTIN_DIR, TemplateError
from services.syncer.nginx_apply.template_watch import TemplateTracker


def config(tmp_path: Path) -> NginxConfig:
    return NginxConfig(http_port=8080, https_port=8443, state_dir=str(tmp_path / "state"), run_dir=str(tmp_path / "run"))


@pytest.fixture
def template_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "template"
    shutil.copytree(BUILTIN_DIR, directory)
    return directory


@pytest.mark.parametrize("breaks, message", [
    (lambda d: (d / "nginx.conf.j2").unlink(), "has no nginx.conf.j2; a template directory is laid out as"),
    (lambda d: (d / "nginx.conf.j2").write_text("events {}\n{% for x in %}\n"), "nginx.conf.j2 line 2: "),
    (lambda d: (d / "lua" / "pyngress" / "api.lua").write_text("local x = = 1\n"),
     "Lua does not compile: lua/pyngress/api.lua:1: unexpected symbol near '='"),
    (lambda d: (d / "nginx.conf.j2").write_bytes(b"\xff\xfe"), "nginx.conf.j2 is not UTF-8 text"),
])
def test_a_broken_template_is_refused_naming_the_file(template_dir: Path, breaks, message: str) -> None:
    breaks(template_dir)
    with pytest.raises(TemplateError) as raised:
        template_from(template_dir)
    assert message in str(raised.value)


def test_an_undefined_variable_fails_at_render_naming_the_template(tmp_path: Path, template_dir: Path) -> None:
    (template_dir / "nginx.conf.j2").write_text("events {}\n{{ no_such_value }}\n")
    with pytest.raises(TemplateError, match="nginx.conf.j2: 'no_such_value' is undefined"):
        render(config(tmp_path), template_from(template_dir))


def test_the_builtin_template_renders_with_its_lua_from_the_repository(tmp_path: Path) -> None:
    assert f'lua_package_path "{BUILTIN_DIR}/lua/?.lua;;";' in render(config(tmp_path))


def test_a_restarted_syncer_keeps_the_last_good_template_while_the_directory_is_broken(
        tmp_path: Path, template_dir: Path) -> None:
    snapshots = tmp_path / "state" / "nginx" / "templates"
    (template_dir / "nginx.conf.j2").write_text((template_dir / "nginx.conf.j2").read_text() + "# good one\n")
    tracker = TemplateTracker(str(template_dir), snapshots)
    conf, template = tracker.render(config(tmp_path))
    assert tracker.on_trial(template) and "# good one" in conf
    # The Lua nginx loads is the snapshot's, not the directory's.
    assert f'lua_package_path "{template.lua_dir}/?.lua;;";' in conf and template.lua_dir.is_relative_to(snapshots)
    tracker.accept(template)
    assert tracker.status()["template_error"] is None

    (template_dir / "lua" / "pyngress" / "router.lua").write_text("if then\n")
    restarted = TemplateTracker(str(template_dir), snapshots)
    assert "Lua does not compile: lua/pyngress/router.lua:1" in restarted.status()["template_error"]
    conf, template = restarted.render(config(tmp_path))
    assert "# good one" in conf and not restarted.on_trial(template)
    assert restarted.status()["template_in_use"] == tracker.status()["template_in_use"]


def test_without_a_good_template_nothing_is_rendered(tmp_path: Path, template_dir: Path) -> None:
    (template_dir / "nginx.conf.j2").unlink()
    tracker = TemplateTracker(str(template_dir), tmp_path / "snapshots")
    with pytest.raises(TemplateError, match="no usable template: .* has no nginx.conf.j2"):
        tracker.render(config(tmp_path))

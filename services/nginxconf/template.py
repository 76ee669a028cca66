"""The nginx template: nginx.conf.j2 and the Lua modules it loads, built in (templates/) or a custom directory
(--template DIR, laid out as templates/ is).

A template is read whole into memory and checked before it is used: the Jinja2 template must compile and
every Lua module must compile with nginx's LuaJIT (`nginx -t` does not load Lua). A custom template's Lua is
then written to a snapshot directory named by its fingerprint, and nginx loads it from there: what nginx
runs is exactly what was checked, whatever happens to DIR afterwards (a ConfigMap volume updates it under
nginx's feet), and the workers, which run as nobody, can read it.
"""
from __future__ import annotations

import hashlib
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import jinja2

from services.nginxconf.lua_syntax import LuaSyntaxError, check_lua_syntax

BUILTIN_DIR = Path(__file__).resolve().parents[2] / "templates"
MAIN_TEMPLATE = "nginx.conf.j2"
LUA_SUBDIR = "lua"
# Larger files are not templates; the limit keeps a mistaken --template (a home directory) from being read.
MAX_TEMPLATE_BYTES = 16 * 1024 * 1024


class TemplateError(ValueError):
    """A template that cannot be used; the message names the file and what to change."""


@dataclass(frozen=True)
class Template:
    source: Path  # the directory it was read from
    fingerprint: str  # sha256 over every file's path and content
    lua_dir: Path  # where nginx's lua_package_path points
    _main: jinja2.Template = field(repr=False, compare=False)

    @property
    def builtin(self) -> bool:
        return self.source == BUILTIN_DIR

    def render(self, **context: Any) -> str:
        try:
            return self._main.render(lua_dir=str(self.lua_dir), **context)
        except jinja2.TemplateError as err:
            raise TemplateError(f"{self.source / MAIN_TEMPLATE}: {err}") from None


def read_files(directory: Path) -> dict[str, bytes]:
    """Every regular file under `directory` by its relative path (symbolic links followed, as a ConfigMap
    volume's are); raises TemplateError when it is not a template directory."""
    if not (directory / MAIN_TEMPLATE).is_file():
        raise TemplateError(f"{directory} has no {MAIN_TEMPLATE}; a template directory is laid out as pyngress's "
                            f"templates/ (copy it and edit)")
    files: dict[str, bytes] = {}
    total = 0
    for root, dirs, names in os.walk(directory, followlinks=True):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".."))  # a ConfigMap volume's ..data: read once
        for name in sorted(names):
            if name.startswith("."):
                continue
            path = Path(root, name)
            data = path.read_bytes()
            total += len(data)
            if total > MAX_TEMPLATE_BYTES:
                raise TemplateError(f"{directory} holds more than {MAX_TEMPLATE_BYTES} bytes; is it a template?")
            files[path.relative_to(directory).as_posix()] = data
    return files


def stamp(directory: Path) -> tuple:
    """Cheap change detection: each file's path, size and mtime (and the directory's absence)."""
    try:
        return tuple(sorted((str(p.relative_to(directory)), st.st_size, st.st_mtime_ns)
                            for p in directory.rglob("*") if p.is_file() for st in (p.stat(),)))
    except OSError:
        return ("unreadable",)


def fingerprint_of(files: Mapping[str, bytes]) -> str:
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(name.encode() + b"\0" + hashlib.sha256(files[name]).digest())
    return digest.hexdigest()


def compile_files(files: Mapping[str, bytes], *, source: Path, lua_dir: Path,
                  filters: Mapping[str, Callable]) -> Template:
    """A Template from file contents; raises TemplateError naming the first file that does not compile."""
    for name, data in sorted(files.items()):
        if name.startswith(LUA_SUBDIR + "/") and name.endswith(".lua"):
            try:
                check_lua_syntax(data, name)
            except LuaSyntaxError as err:
                raise TemplateError(f"{source}: Lua does not compile: {err}") from None
    texts: dict[str, str] = {}
    for name, data in files.items():
        if name.endswith(".j2"):
            try:
                texts[name] = data.decode()
            except UnicodeDecodeError:
                raise TemplateError(f"{source / name} is not UTF-8 text") from None
    environment = jinja2.Environment(
        loader=jinja2.DictLoader(texts), autoescape=False, undefined=jinja2.StrictUndefined,
        trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    environment.filters.update(filters)
    try:
        main = environment.get_template(MAIN_TEMPLATE)
    except jinja2.TemplateSyntaxError as err:
        raise TemplateError(f"{source / (err.name or MAIN_TEMPLATE)} line {err.lineno}: {err.message}") from None
    return Template(source, fingerprint_of(files), lua_dir, main)


def write_snapshot(files: Mapping[str, bytes], snapshot: Path) -> None:
    """The files under `snapshot` (dirs 0755, files 0644: nginx's workers read the Lua), written whole first."""
    if snapshot.is_dir():
        return
    partial = snapshot.with_name(snapshot.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    for name, data in files.items():
        path = partial / name
        path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        path.write_bytes(data)
        path.chmod(0o644)
    for directory in [partial, *(p for p in partial.rglob("*") if p.is_dir())]:
        directory.chmod(0o755)
    partial.rename(snapshot)

"""Which template the syncer renders with: the built-in one, or the newest version of --template DIR that
passed its checks, the last good one serving while a newer one is broken.

A new version of DIR is a *candidate*: read whole, compiled (Jinja2 and LuaJIT), rendered, then tested
with `nginx -t` and loaded by the applier. It becomes the template *in use* once nginx has loaded it; a
candidate that fails any step is refused with the step's message (in `pyngress status`, /healthz's detail
and pyngress_template_ok) and is not tried again until DIR changes. The one in use is remembered in the
state directory, so that a syncer restarted beside a broken DIR keeps rendering with the last good one.
"""
from __future__ import annotations

import logging
import shutil
from pathlib import Path

from services.common import logs
from services.nginxconf.config import NginxConfig
from services.nginxconf.render import TEMPLATE_FILTERS, builtin_template, render, template_from
from services.nginxconf.template import (LUA_SUBDIR, Template, TemplateError, compile_files, fingerprint_of,
                                         read_files, stamp, write_snapshot)

log = logging.getLogger("syncer")

IN_USE_FILE = "in-use"


class TemplateTracker:
    def __init__(self, directory: str | None, snapshots: Path) -> None:
        self.directory = Path(directory).absolute() if directory else None
        self.snapshots = snapshots
        self.in_use: Template | None = None if self.directory else builtin_template()
        self.candidate: Template | None = None
        self.error: str | None = None
        self._stamp: tuple | None = None
        self._last_render: tuple[Template, NginxConfig, str] | None = None
        if self.directory:
            self.in_use = self._last_in_use()
            self.poll()

    def poll(self) -> bool:
        """Read DIR again when a file in it changed; True when that gives something new to apply."""
        if self.directory is None:
            return False
        current = stamp(self.directory)
        if current == self._stamp:
            return False
        self._stamp = current
        try:
            files = read_files(self.directory)
            fingerprint = fingerprint_of(files)
            if self.in_use is not None and fingerprint == self.in_use.fingerprint:
                self.candidate, self.error = None, None
                return True
            snapshot = self.snapshots / fingerprint[:16]
            candidate = compile_files(files, source=self.directory, lua_dir=snapshot / LUA_SUBDIR,
                                      filters=TEMPLATE_FILTERS)
            self.snapshots.mkdir(mode=0o711, parents=True, exist_ok=True)
            write_snapshot(files, snapshot)
        except (TemplateError, OSError) as err:
            self.refuse(str(err))
            return True
        self.candidate, self.error = candidate, None
        log.info("template changed; trying it", extra=logs.kv(template=str(self.directory),
                                                              fingerprint=fingerprint[:12]))
        return True

    def render(self, config: NginxConfig) -> tuple[str, Template]:
        """nginx.conf from the candidate if there is one and it renders, else from the template in use."""
        if self.candidate is not None:
            try:
                return render(config, self.candidate), self.candidate
            except TemplateError as err:
                self.refuse(str(err))
        if self.in_use is None:
            raise TemplateError(f"no usable template: {self.error}")
        # Most syncs change routes only: the same configuration is not rendered again (8 ms per render).
        if self._last_render is None or self._last_render[0] is not self.in_use or self._last_render[1] != config:
            self._last_render = (self.in_use, config, render(config, self.in_use))
        return self._last_render[2], self.in_use

    def on_trial(self, template: Template) -> bool:
        return template is self.candidate

    def accept(self, template: Template) -> None:
        """nginx loaded `template`: it is the one in use from now on, also after a restart."""
        if template is not self.candidate:
            return
        self.in_use, self.candidate, self.error = template, None, None
        (self.snapshots / IN_USE_FILE).write_text(template.fingerprint[:16])
        for other in self.snapshots.iterdir():
            if other.is_dir() and other != template.lua_dir.parent:
                shutil.rmtree(other, ignore_errors=True)
        log.info("template in use", extra=logs.kv(template=str(self.directory), fingerprint=template.fingerprint[:12]))

    def refuse(self, message: str) -> None:
        """The candidate (or DIR as read) cannot be used; the one in use keeps serving until DIR changes."""
        self.candidate, self.error = None, message
        log.error("template refused; the last good one keeps serving",
                  extra=logs.kv(template=str(self.directory), error=message))

    def status(self) -> dict:
        return {"template": str(self.directory) if self.directory else "built-in",
                "template_in_use": self.in_use.fingerprint[:12] if self.in_use else None,
                "template_error": self.error}

    def _last_in_use(self) -> Template | None:
        try:
            return template_from(self.snapshots / (self.snapshots / IN_USE_FILE).read_text().strip())
        except (OSError, TemplateError):
            return None

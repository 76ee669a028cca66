"""`nginx -t` of rendered configurations, each distinct text checked once, in a prefix of its own."""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterator

from services.nginxconf.config_check import NginxConfigError, check_file
from services.nginxconf.paths import NginxPaths
from services.nginxconf.prefix import prepare


class NginxCheck:
    def __init__(self, base: Path) -> None:
        self.paths = NginxPaths.of(base / "state", base / "run")
        prepare(self.paths)
        self._verdicts: dict[str, str | None] = {}

    def error(self, text: str) -> str | None:
        """None when nginx -t accepts `text`, else what it said."""
        if text not in self._verdicts:
            conf = self.paths.prefix / "check.conf"
            conf.write_text(text)
            try:
                check_file(self.paths, conf)
                self._verdicts[text] = None
            except NginxConfigError as err:
                self._verdicts[text] = str(err)
        return self._verdicts[text]


def nginx_check_in_tmp() -> Iterator[NginxCheck]:
    """For a module fixture. Not under pytest's tmp_path, whose parents are 0700 (nginx's workers, as nobody,
    must reach the prefix: see tests/integration/nginx/conftest.py)."""
    base = Path(tempfile.mkdtemp(prefix="pyngress-check-", dir="/tmp"))
    os.chmod(base, 0o711)
    try:
        yield NginxCheck(base)
    finally:
        shutil.rmtree(base, ignore_errors=True)

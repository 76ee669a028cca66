"""`nginx -t` on a configuration file, with nginx's own error lines in the exception.

`nginx -t` does not run init_by_lua: it checks the configuration, not our Lua modules (tests do).
"""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from .paths import NginxPaths

_ERROR_LINE = re.compile(r"\[(emerg|alert|crit|error)\]")


class NginxConfigError(Exception):
    """nginx refused a configuration; the message holds nginx's own error lines."""


def nginx_binary() -> str:
    found = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/usr/local/sbin:/sbin")
    if not found:
        raise FileNotFoundError("nginx is not installed (run `make setup`)")
    return found


def check_command(paths: NginxPaths, conf: Path) -> list[str]:
    return [nginx_binary(), "-t", "-q", "-p", f"{paths.prefix}/", "-c", str(conf)]


def failure_message(output: str, *, tested: Path, shown_as: Path) -> str:
    """nginx's error lines from `output`, naming `shown_as` instead of a temporary copy."""
    lines = [line for line in output.splitlines() if _ERROR_LINE.search(line)] or output.strip().splitlines()
    text = "\n".join(lines).replace(str(tested), str(shown_as))
    return text or "nginx -t failed without saying why"


def check_file(paths: NginxPaths, conf: Path) -> None:
    """Run `nginx -t` on `conf` (blocking); raise NginxConfigError with nginx's message when it fails."""
    # cwd "/": the prefix directory is how processes.py recognises this instance's nginx processes.
    result = subprocess.run(check_command(paths, conf), cwd="/",
                            capture_output=True, text=True)
    if result.returncode != 0:
        raise NginxConfigError(failure_message(result.stderr + result.stdout, tested=conf, shown_as=conf))

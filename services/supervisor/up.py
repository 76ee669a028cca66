"""`pyngress up`: supervisord with the whole tree, in the foreground.

Settings reach every program as PYNGRESS_* environment variables (each component reads the same
names), so one command line configures the whole tree.
"""
from __future__ import annotations

import os
import shutil
import sys
from dataclasses import fields
from pathlib import Path

from services.common.files import ensure_private_dir
from services.common.settings import Settings

SUPERVISORD_CONF = Path(__file__).resolve().parents[2] / "supervisord.conf"


def environment(settings: Settings) -> dict[str, str]:
    env = dict(os.environ)
    for f in fields(Settings):
        value = getattr(settings, f.name)
        key = "PYNGRESS_" + f.name.upper()
        if value is None:
            env.pop(key, None)
        else:
            env[key] = str(value).lower() if isinstance(value, bool) else str(value)
    beside_python = Path(sys.executable).parent / "pyngress"
    env["PYNGRESS_BIN"] = str(beside_python) if beside_python.exists() else shutil.which("pyngress") or "pyngress"
    # The ingress half runs unless only the CNI server was asked for (PYNGRESS_ENABLE_INGRESS=false).
    env.setdefault("PYNGRESS_ENABLE_INGRESS", "true")
    return env


def run(settings: Settings) -> int:
    ensure_private_dir(settings.run_dir)
    ensure_private_dir(Path(settings.run_dir) / "supervisord.d")
    Path(settings.state_dir).mkdir(parents=True, exist_ok=True)
    supervisord = shutil.which("supervisord", path=str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""))
    if not supervisord:
        print("pyngress up: supervisord not found; run `make setup` (it installs supervisor into .venv)", file=sys.stderr)
        return 1
    # exec: SIGTERM to this process reaches supervisord, which stops the tree gracefully.
    os.execve(supervisord, [supervisord, "-n", "-c", str(SUPERVISORD_CONF)], environment(settings))
    return 0  # not reached

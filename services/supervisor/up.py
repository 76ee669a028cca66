"""`pyngress up`: supervisord with the whole tree, in the foreground.

Settings reach every program as PYNGRESS_* environment variables (each component reads the same
names), so one command line configures the whole tree.
"""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from services.common.files import ensure_private_dir
from services.common.settings import Settings, env_name

SUPERVISORD_CONF = Path(__file__).resolve().parents[2] / "supervisord.conf"


def environment(settings: Settings) -> dict[str, str]:
    # Every flag's variable from `settings` (an unset flag's variable removed), the rest of the environment kept.
    flags = {env_name(flag) for flag in settings.flag_values()}
    env = {key: value for key, value in os.environ.items() if key not in flags} | settings.environment()
    beside_python = Path(sys.executable).parent / "pyngress"
    env["PYNGRESS_BIN"] = str(beside_python) if beside_python.exists() else shutil.which("pyngress") or "pyngress"
    # The ingress half runs unless only the CNI server was asked for (PYNGRESS_ENABLE_INGRESS=false).
    env.setdefault("PYNGRESS_ENABLE_INGRESS", "true")
    return env


def run(settings: Settings) -> int:
    ensure_private_dir(settings.paths.run_dir)
    ensure_private_dir(Path(settings.paths.run_dir) / "supervisord.d")
    Path(settings.paths.state_dir).mkdir(parents=True, exist_ok=True)
    supervisord = shutil.which("supervisord", path=str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""))
    if not supervisord:
        print("pyngress up: supervisord not found; run `make setup` (it installs supervisor into .venv)", file=sys.stderr)
        return 1
    # exec: SIGTERM to this process reaches supervisord, which stops the tree gracefully.
    os.execve(supervisord, [supervisord, "-n", "-c", str(SUPERVISORD_CONF)], environment(settings))
    return 0  # not reached

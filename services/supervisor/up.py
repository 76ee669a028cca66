"""`pyngress up`: supervisord with the whole tree, in the foreground.

Settings reach every program as PYNGRESS_* environment variables (each component reads the same
names), so one command line configures the whole tree.
"""
from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

from services.common.files import ensure_private_dir
from services.common.settings import Settings, env_name

SUPERVISORD_CONF = Path(__file__).resolve().parents[2] / "supervisord.conf"
# What supervisord runs: SUPERVISORD_CONF without the programs this tree does not start. Not named
# supervisord.conf, which supervisorctl would read when run from the run dir (without the PYNGRESS_* variables).
EFFECTIVE_CONF_NAME = "supervisord.programs.conf"

_SECTION = re.compile(r"^\[([^\]]+)\]", re.M)
_AUTOSTART = re.compile(r"^autostart=%\(ENV_(\w+)\)s\s*$", re.M)


def environment(settings: Settings) -> dict[str, str]:
    # Every flag's variable from `settings` (an unset flag's variable removed), the rest of the environment kept.
    flags = {env_name(flag) for flag in settings.flag_values()}
    env = {key: value for key, value in os.environ.items() if key not in flags} | settings.environment()
    beside_python = Path(sys.executable).parent / "pyngress"
    env["PYNGRESS_BIN"] = str(beside_python) if beside_python.exists() else shutil.which("pyngress") or "pyngress"
    # The ingress half runs unless only the CNI server was asked for (PYNGRESS_ENABLE_INGRESS=false).
    env.setdefault("PYNGRESS_ENABLE_INGRESS", "true")
    # The webhook program runs when --validating-webhook names an address (ingress-nginx's switch) and the
    # ingress half runs: its store comes from the watcher.
    webhook = settings.webhook.address is not None and env["PYNGRESS_ENABLE_INGRESS"].lower() != "false"
    env["PYNGRESS_ENABLE_VALIDATING_WEBHOOK"] = "true" if webhook else "false"
    return env


def started_programs_only(conf: str, env: dict[str, str]) -> str:
    """`conf` without the [program:*] sections whose autostart variable is "false" in `env`. supervisord stops one
    program at a time on SIGTERM, one turn of its loop each, and a turn in which no program writes anything waits
    a whole second: every program that never ran made each stop a second longer (three seconds of six for an
    ingress controller without passthrough or CNI). Sections are the blocks between blank lines, each with its
    comments above its header, as supervisord.conf is written."""
    kept = []
    for block in conf.split("\n\n"):
        header = _SECTION.search(block)
        autostart = _AUTOSTART.search(block)
        if header and header.group(1).startswith("program:") and autostart \
                and env.get(autostart.group(1), "").lower() == "false":
            continue
        kept.append(block)
    return "\n\n".join(kept)


def run(settings: Settings) -> int:
    ensure_private_dir(settings.paths.run_dir)
    ensure_private_dir(Path(settings.paths.run_dir) / "supervisord.d")
    Path(settings.paths.state_dir).mkdir(parents=True, exist_ok=True)
    supervisord = shutil.which("supervisord", path=str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""))
    if not supervisord:
        print("pyngress up: supervisord not found; run `make setup` (it installs supervisor into .venv)", file=sys.stderr)
        return 1
    env = environment(settings)
    conf = Path(settings.paths.run_dir) / EFFECTIVE_CONF_NAME
    conf.write_text(started_programs_only(SUPERVISORD_CONF.read_text(), env))
    # exec: SIGTERM to this process reaches supervisord, which stops the tree gracefully.
    os.execve(supervisord, [supervisord, "-n", "-c", str(conf)], env)
    return 0  # not reached

"""`pyngress status`: each component's state, the config generation and the reload count."""
from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from pathlib import Path

from services.common import component_state
from services.common.settings import Settings

ALIVE_SECONDS = 15.0  # components refresh their status file more often than this


def running_instances() -> list[str]:
    """The run directories of the `pyngress up` trees running on this host (their supervisord's
    PYNGRESS_RUN_DIR), so that `pyngress status` can say where to look (the demo uses its own)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if b"supervisord" not in (entry / "cmdline").read_bytes():
                continue
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue  # gone, or not ours to read
        for variable in environ:
            if variable.startswith(b"PYNGRESS_RUN_DIR="):
                found.append(variable.split(b"=", 1)[1].decode(errors="replace"))
    return sorted(set(found))


def run(settings: Settings) -> int:
    # /status answers loopback clients only: ask on the healthz host when it is a loopback address.
    host = settings.ports.healthz_host if settings.ports.healthz_host.startswith("127.") else "127.0.0.1"
    try:
        with urllib.request.urlopen(f"http://{host}:{settings.ports.healthz}/status", timeout=3) as resp:
            syncer = json.load(resp)
    except (urllib.error.URLError, OSError, ValueError) as err:
        syncer = None
        print(f"syncer: not answering on {host}:{settings.ports.healthz} ({err})")
    if syncer is not None:
        print(f"config generation: {syncer['generation']}")
        print(f"reloads: {syncer['reloads']} (failed: {syncer['reload_errors']}, "
              f"last successful: {str(syncer['last_reload_successful']).lower()})")
        if syncer.get("last_error"):
            print(f"last reload error: {syncer['last_error']}")
    records = component_state.read_all(settings.paths.run_dir)
    if not records:
        print(f"no component has reported in {component_state.status_dir(settings.paths.run_dir)}")
        for run_dir in running_instances():
            if Path(run_dir).resolve() != Path(settings.paths.run_dir).resolve():
                print(f"a pyngress instance is running with its run directory in {run_dir}: "
                      f"pyngress status --run-dir {run_dir}")
        return 1 if syncer is None else 0
    now = time.time()
    for record in records:
        alive = component_state.pid_alive(record["pid"]) if record.get("pid") else False
        state = record.get("state", "running") if alive else "not running"
        extra = {k: v for k, v in record.items() if k not in ("component", "pid", "updated", "state", "problems")}
        age = now - float(record.get("updated", now))
        print(f"{record['component']:<16} {state:<12} pid={record.get('pid')} updated={age:.0f}s ago "
              + " ".join(f"{k}={json.dumps(v)}" for k, v in sorted(extra.items())))
    return 0 if syncer is not None else 1

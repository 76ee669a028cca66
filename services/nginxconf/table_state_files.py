"""The state files of the pushed tables: what a freshly started nginx master loads before the syncer pushes.

`<table>.json` is a whole table (its version and canonical JSON, 0600). A keyed table's deltas are appended to
`<table>.deltas` (0600), one delta body per line, as nginx took them. A master started afresh loads the whole
table, then applies the journal's deltas in order, stopping at the first it refuses (a line cut short, or one
whose base is not the version it holds: a journal older than the whole file).

Appending costs a delta what the delta holds. Rewriting the whole file cost each one-host change 12 ms at 30,000
hosts (the whole table encoded, written and synced), which made an update slower as the cluster grew. The journal
is folded into a new whole file once it holds JOURNAL_MAX_DELTAS deltas or as many bytes as the whole file, so a
fresh master replays a bounded journal and the whole table is written once per many deltas.

Appends are not fsynced: the journal is there for an nginx master that dies and starts again, and the page cache
outlives the process. After the machine itself restarts, the syncer's first push is a whole table anyway.
"""
from __future__ import annotations

import asyncio
import os

from services.common.files import atomic_write

from .paths import NginxPaths
from .prefix import prepare

JOURNAL_MAX_DELTAS = 1000


class TableStateFiles:
    def __init__(self, paths: NginxPaths) -> None:
        self.paths = paths
        self._version: dict[str, str] = {}  # table → the version its files bring a fresh master to
        self._whole_bytes: dict[str, int] = {}
        self._journal_bytes: dict[str, int] = {}
        self._journal_deltas: dict[str, int] = {}

    async def keep_whole(self, name: str, *, version: str, body: bytes) -> None:
        """Make `body` (a whole table at `version`) the state of table `name`, unless it already is."""
        if self._version.get(name) == version:
            return
        await asyncio.to_thread(self._write_whole, name, body)
        self._version[name] = version
        self._whole_bytes[name], self._journal_bytes[name], self._journal_deltas[name] = len(body), 0, 0

    def _write_whole(self, name: str, body: bytes) -> None:
        prepare(self.paths)
        atomic_write(self.paths.table_file(name), body, mode=0o600)
        # Removed after the new whole file is in place: a journal left by a crash in between names other bases,
        # and a fresh master stops at its first delta.
        self.paths.table_journal(name).unlink(missing_ok=True)

    def append(self, name: str, *, base: str, version: str, delta: bytes) -> bool:
        """Journal `delta` (nginx took it, from `base` to `version`); False when the journal cannot take it (the
        files are not at `base`, or the journal is due to be folded): keep the whole table instead."""
        deltas, size = self._journal_deltas.get(name, 0), self._journal_bytes.get(name, 0) + len(delta) + 1
        if self._version.get(name) != base or deltas >= JOURNAL_MAX_DELTAS or size > self._whole_bytes[name]:
            return False
        fd = os.open(self.paths.table_journal(name), os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW
                     | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, delta + b"\n")
        finally:
            os.close(fd)
        self._version[name] = version
        self._journal_bytes[name], self._journal_deltas[name] = size, deltas + 1
        return True

"""The metadata an API server sets, filled in for objects read from manifest files.

Like an API server:
- uid: new for each object the first time it is seen; kept while the object exists, across restarts;
  a new one after the object is removed and added again (a delete and a create).
- creationTimestamp: the time the object was first seen (RFC 3339, UTC, seconds), kept likewise.
- resourceVersion: a new, larger value whenever the object changes in any way, across restarts too.
  It is `max(last + 1, microseconds since the epoch)`, so it keeps increasing even when the saved
  state is lost.
- generation: 1, then +1 whenever anything but metadata and status changes.
An object keeps the uid, creationTimestamp and generation it carries ("oldest wins" relies on a given
creationTimestamp). resourceVersion is always this module's: only it can promise an increase on every
change (a value copied from `kubectl get -o yaml` would stay frozen through later edits).

The records are saved before the objects are returned, so a value that was published is never handed
out again for different content after a crash.
"""
from __future__ import annotations

import hashlib
import itertools
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Collection

from services.common.canonical import canonical_json
from services.common.logs import kv
from services.watcher.state_files import load_json, save_json, watcher_state_dir

log = logging.getLogger(__name__)

STATE_FILE = "metadata.json"
_FORMAT_VERSION = 1


@dataclass(kw_only=True)
class _Record:
    uid: str
    creationTimestamp: str
    resourceVersion: int
    generation: int
    content_hash: str
    spec_hash: str


def _digest(value: Any) -> str:
    return hashlib.sha256(canonical_json(value)).hexdigest()


def _spec_digest(obj: dict[str, Any]) -> str:
    return _digest({k: v for k, v in obj.items() if k not in ("metadata", "status")})


class _Uuids:
    """Random (version 4) UUIDs as str(uuid.uuid4()) writes them, at a fraction of its cost. The random bytes are
    read UUIDS_PER_READ at a time: os.urandom lets go of the GIL, and while a scan's readers hold it, getting it
    back cost each new object a thread switch (30,000 new objects: 0.46 s of a scan, against 35 ms alone)."""

    UUIDS_PER_READ = 1024

    def __init__(self) -> None:
        self._random = b""
        self._used = 0

    def next(self) -> str:
        if self._used == len(self._random):
            self._random, self._used = os.urandom(16 * self.UUIDS_PER_READ), 0
        data = bytearray(self._random[self._used:self._used + 16])
        self._used += 16
        data[6] = data[6] & 0x0F | 0x40  # version 4
        data[8] = data[8] & 0x3F | 0x80  # the RFC 4122 variant
        text = data.hex()
        return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def _rfc3339(moment: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(moment))


class ServerMetadata:
    """Fills server-set metadata into objects and remembers it under `<state_dir>/watcher/`."""

    def __init__(self, state_dir: str | Path, clock: Callable[[], float] = time.time) -> None:
        self._path = watcher_state_dir(state_dir) / STATE_FILE
        self._clock = clock
        self._last_resource_version = 0
        self._records: dict[str, _Record] = {}
        # key → (object, content digest, spec digest): objects are never modified, so an object that is
        # the very same as last time need not be hashed again (a change in one file of many stays cheap).
        self._digests: dict[str, tuple[dict[str, Any], str, str]] = {}
        # The keys of the last fill: every other key is new to the caller, whatever the saved records say.
        self._filled: Collection[str] = ()
        # key → the record of an object published ahead of the next fill (fill_early), which leaves it out when
        # unchanged. Apart from _records: _filled is a view of that dict's keys.
        self._early: dict[str, _Record] = {}
        self._uuids = _Uuids()
        self._load()

    def _load(self) -> None:
        saved = load_json(self._path, "object metadata (uids, creation times)")
        if saved is None:
            return
        try:
            if saved.get("version") != _FORMAT_VERSION:
                raise ValueError(f"unknown format version {saved.get('version')!r}")
            records = {key: _Record(**fields) for key, fields in saved["objects"].items()}
            last = int(saved["lastResourceVersion"])
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            log.warning("the saved object metadata is not in the expected form; starting over: "
                        "objects get new uids and creation times", extra=kv(path=self._path, error=err))
            return
        self._records, self._last_resource_version = records, last

    def _next_resource_version(self) -> int:
        self._last_resource_version = max(self._last_resource_version + 1, int(self._clock() * 1_000_000))
        return self._last_resource_version

    def _save(self) -> None:
        save_json(self._path, {
            "version": _FORMAT_VERSION,
            "lastResourceVersion": self._last_resource_version,
            "objects": {key: dict(vars(record)) for key, record in self._records.items()},
        })

    def _record_for(self, key: str, obj: dict[str, Any], now: str) -> tuple[_Record, bool]:
        """The record of `key` for this content of `obj` (`now`: the creationTimestamp of a new object), and whether
        it is new or changed."""
        cached = self._digests.get(key)
        if cached is not None and cached[0] is obj:
            content, spec = cached[1], cached[2]
        else:
            content, spec = _digest(obj), _spec_digest(obj)
            self._digests[key] = (obj, content, spec)
        record = self._records.get(key) or self._early.get(key)
        if record is None:
            record = _Record(uid=self._uuids.next(), creationTimestamp=now,
                             resourceVersion=self._next_resource_version(), generation=1,
                             content_hash=content, spec_hash=spec)
        elif record.content_hash != content:
            record = _Record(uid=record.uid, creationTimestamp=record.creationTimestamp,
                             resourceVersion=self._next_resource_version(),
                             generation=record.generation + (record.spec_hash != spec),
                             content_hash=content, spec_hash=spec)
        else:
            return record, False
        return record, True

    def has(self, key: str) -> bool:
        """Whether the caller's store has `key` (from the last fill, or published ahead of the next)."""
        return key in self._filled or key in self._early

    def fill_early(self, objects: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        """`objects` (store key → object as given) with server metadata, as the next fill would give them, for the
        keys new to the caller (the last fill did not have them): published ahead of that fill, which then leaves
        them out unless they change. Nothing is forgotten or saved here."""
        now = _rfc3339(self._clock())
        filled: dict[str, dict[str, Any]] = {}
        for key, obj in objects.items():
            if self.has(key):
                continue
            record, _ = self._record_for(key, obj, now)
            self._early[key] = record
            filled[key] = _with_metadata(obj, record)
        return filled

    def fill(self, objects: dict[str, dict[str, Any]]) -> StoreChanges:
        """What changed in the store since the last fill, given every object now (store key → object as
        given): the objects whose content or server metadata changed, with server-set metadata filled in, and
        the keys no longer there. Those are forgotten: the objects were deleted.

        An object whose content and record are unchanged since the last fill is left out, not copied: a change
        in one manifest file among many costs a lookup per object (its digests are kept while it is the very
        same dict), not a copy of each to publish again.
        """
        records: dict[str, _Record] = {}
        changed = len(objects) != len(self._records) or not objects.keys() <= self._records.keys()
        filled: dict[str, dict[str, Any]] = {}
        now = _rfc3339(self._clock())  # the objects of one fill are first seen together
        for key, obj in objects.items():
            record, is_new = self._record_for(key, obj, now)
            records[key] = record
            changed |= is_new
            if is_new or not self.has(key):
                filled[key] = _with_metadata(obj, record)
        # The early ones are in the store too: gone since, they are removed; made since the last save, saved.
        removed = [key for key in itertools.chain(self._filled, self._early) if key not in records]
        changed |= bool(self._early)
        self._early = {}
        self._records = records
        self._filled = records.keys()
        for key in self._digests.keys() - records.keys():
            del self._digests[key]
        if changed:
            self._save()
        return StoreChanges(changed=filled, removed=removed)


@dataclass(frozen=True)
class StoreChanges:
    """What a fill changed: objects set (with their metadata filled in) and keys deleted."""
    changed: dict[str, dict[str, Any]]
    removed: list[str]


def _with_metadata(obj: dict[str, Any], record: _Record) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    return {**obj, "metadata": {
        **meta,
        "uid": meta.get("uid") or record.uid,
        "creationTimestamp": meta.get("creationTimestamp") or record.creationTimestamp,
        "resourceVersion": str(record.resourceVersion),
        "generation": meta.get("generation") or record.generation,
    }}

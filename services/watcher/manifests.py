"""The manifests source: a directory of Kubernetes manifests, kept in the store as they change.

Like `kubectl apply -f DIR` (without -R): every *.yaml, *.yml and *.json file directly in the
directory, several documents per file, `kind: List` included. Hidden files are skipped: editors and
atomic writers put their temporary files there, and a mounted ConfigMap keeps its `..data` links there.

The directory is polled (the standard library has no inotify) by each file's (inode, size, mtime)
signature. A change is applied only once the same signature is seen on two listings in a row (a poll
interval apart; a long scan lists again at its end), or the file has not been modified for QUIET_NS, so that a
file caught half-written, or deleted a moment before being written again, does not drop routes (nor give the
objects new uids); the first scan applies everything at once.

A file that does not parse keeps the objects it defined when it last parsed, also across restarts
(`<state-dir>/watcher/last-good.json` keeps them for the files failing right now); a file that never
parsed defines nothing. A document that is not an accepted object is skipped; the rest of its file
still counts. When two files define the same object, the later file name wins.

A long scan (10,000 Ingresses take a second to read) publishes the objects of new files that are new to the store
in batches as it reads, so that the syncer builds on them meanwhile; the end of the scan publishes the rest, and
settles anything else (changed and removed objects, and which file wins a clash).
"""
from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import stat
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from services.common.gc_pause import collector_paused, freeze_survivors
from services.common.logs import kv
from services.common.objects import object_key
from services.common.settings import Settings
from services.watcher.filters import keep, slim
from services.watcher.manifest_objects import Problem, objects_of
from services.watcher.manifest_parser import (MANIFEST_SUFFIXES, YAML_SUFFIXES, Document, ManifestSyntaxError,
                                              decoded, parse_manifest)
from services.watcher.metadata import ServerMetadata, StoreChanges
from services.watcher.parse_cache import CACHE_FILE, ParsedFile, load_parse_cache, save_parse_cache
from services.watcher.source import StoreWriter
from services.watcher.state_files import load_json, save_json, watcher_state_dir
from services.watcher.yaml_fast import fast_documents

log = logging.getLogger(__name__)

POLL_SECONDS = 0.1
# Listing the directory may take at most this share of the time: a huge directory is polled less often. Only
# the listing counts: reading what changed is work that had to be done, and a file caught half settled by a long
# read (10,000 Ingresses take seconds) must not wait five times as long for its second sighting.
MAX_LISTING_SHARE = 0.2
# A file not modified for this long is taken as complete at once; a younger one must look the same on
# two listings in a row (it may still be being written).
QUIET_NS = 50_000_000
RACY_NS = 100_000_000
# A scan lists the directory again (at most this many times in all) when files were too fresh to read and reading
# the others took a poll interval.
MAX_LISTINGS_PER_SCAN = 3
# Files read at once: yaml-rs parses without holding the GIL, so a second reader's parsing overlaps the other's
# Python work (10,000 Ingresses in 100 files: 0.70 -> 0.60 s).
READERS = 2
# During a long read, the objects of new files that are new to the store go out in batches of this many, before the
# scan ends, so that the syncer builds on them while the rest is read (10,000 Ingresses: 1 s of reading).
EARLY_OBJECTS = 2000
LAST_GOOD_FILE = "last-good.json"

# Publishes objects ahead of the end of a scan (store key → object with its metadata); returns once they are sent.
EarlyPublisher = Callable[[dict[str, dict[str, Any]]], None]

Signature = tuple[int, int, int]


@dataclass(kw_only=True)
class _FileState:
    signature: Signature
    objects: list[dict[str, Any]]           # what the file defines: its last good objects when it fails
    problems: list[Problem] = field(default_factory=list)
    failed: bool = False                    # the latest version does not parse
    digest: bytes = b""                     # of the content last read
    racy: bool = False                      # modified so recently that a same-size rewrite may share its mtime


_NOT_READ = _FileState(signature=(0, 0, 0), objects=[], problems=[])


def read_objects(name: str, data: bytes, path: str) -> tuple[list[dict[str, Any]], list[Problem]]:
    """The accepted objects of one manifest file and a Problem for each part skipped; raises
    ManifestSyntaxError. YAML is read by yaml-rs where it reads as the exact reader does (yaml_fast.py); a
    file with anything to report is read again by the exact reader, whose documents know their lines."""
    documents = fast_documents(decoded(data)) if name.endswith(YAML_SUFFIXES) else None
    exact = documents is None
    while True:
        if documents is None:
            documents = parse_manifest(name, data)
        objects: list[dict[str, Any]] = []
        problems: list[Problem] = []
        for document in documents:
            accepted, rejected = objects_of(document, path)
            objects.extend(accepted)
            problems.extend(rejected)
        if exact or not problems:
            return objects, problems
        documents, exact = None, True


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


class _EarlyBatches:
    """Gathers the new objects of new files during a scan and hands them to the publisher EARLY_OBJECTS at a time.
    What is left at the end goes with the scan's changes. Only objects new to the store go early: one the store
    holds is changed or removed by the whole scan alone, which alone knows which file wins."""

    def __init__(self, publish: EarlyPublisher, *,
                 stored: Callable[[dict[str, Any]], tuple[str, dict[str, Any]] | None],
                 fill: Callable[[dict[str, dict[str, Any]]], dict[str, dict[str, Any]]]) -> None:
        """`stored`: (store key, object as stored) for an object that may go early, else None. `fill`: server
        metadata filled in (ServerMetadata.fill_early)."""
        self._publish, self._stored, self._fill = publish, stored, fill
        self._pending: dict[str, dict[str, Any]] = {}

    def add(self, objects: list[dict[str, Any]]) -> None:
        for obj in objects:
            if (new := self._stored(obj)) is not None:
                self._pending[new[0]] = new[1]
        if len(self._pending) >= EARLY_OBJECTS:
            self._publish(self._fill(self._pending))
            self._pending = {}


class ManifestsSource:
    """Implements services.watcher.source.Source for a directory of manifests.

    `synced` is set once the directory has been read; `errors`, `warnings` and `last_sync` describe the
    current state for the status file.
    """

    def __init__(self, directory: str | Path, *, settings: Settings, state_dir: str | Path,
                 poll_seconds: float = POLL_SECONDS) -> None:
        self.directory = Path(directory)
        self.settings = settings
        self.poll_seconds = poll_seconds
        self.errors: list[str] = []
        self.warnings: list[str] = []
        self.last_sync: float | None = None
        self.synced = asyncio.Event()
        self._metadata = ServerMetadata(state_dir)
        self._last_good_path = watcher_state_dir(state_dir) / LAST_GOOD_FILE
        self._saved_last_good = self._load_last_good()
        # What files held at the last run: used once per file, while its signature is the same.
        self._cache_path = watcher_state_dir(state_dir) / CACHE_FILE
        self._cached = load_parse_cache(self._cache_path)
        self._files: dict[str, _FileState] = {}
        self._previous_listing: dict[str, Signature] | None = None
        self._listing_error: str | None = None
        self.listing_seconds = 0.0  # the last scan's listing of the directory (next_poll_seconds)

    async def run(self, store: StoreWriter) -> None:
        loop = asyncio.get_running_loop()

        def publish_early(objects: dict[str, dict[str, Any]]) -> None:
            asyncio.run_coroutine_threadsafe(store.set_many(list(objects.items())), loop).result()

        while True:
            changes = await asyncio.to_thread(self.scan, publish_early)
            if changes is not None:
                await store.set_many([*((key, None) for key in changes.removed), *changes.changed.items()])
                freeze_survivors()  # the store lives until the next change: out of the collector's scans
                await asyncio.to_thread(self.save_cache)
            self.synced.set()
            self.last_sync = time.time()
            await asyncio.sleep(self.next_poll_seconds())

    def next_poll_seconds(self) -> float:
        """How long until the next scan: the poll interval, longer only when listing the directory is slow."""
        return max(self.poll_seconds, self.listing_seconds / MAX_LISTING_SHARE)

    # -- one scan (runs in a worker thread: parsing a large file must not stall the event loop) --

    def scan(self, early: EarlyPublisher | None = None) -> StoreChanges | None:
        """Read what changed; the store's changes when something did, else None. `early`, when given, is handed the
        objects of new files that are new to the store while the scan goes on (the changes then leave them out)."""
        with collector_paused():  # services/common/gc_pause.py: parsing 30,000 documents allocates a lot
            changes = self._scan(early)
            if changes is not None:
                # What the scan keeps lives until the next change. Frozen before the collector is back on: its
                # first collection would otherwise go through every object the scan allocated (0.1-0.5 s at
                # 30,000 objects).
                freeze_survivors()
            return changes

    def _scan(self, early: EarlyPublisher | None) -> StoreChanges | None:
        listing = self._list()
        if listing is None:
            return None
        # The first scan always computes the contents: it also forgets the metadata of objects whose
        # files were removed while the watcher was down.
        changed = self._previous_listing is None
        problems_changed = False
        for _ in range(MAX_LISTINGS_PER_SCAN):
            listed_at = time.monotonic()
            settled, unsettled = self._settled_changes(listing)
            objects_moved, problems_moved = self._read_settled(settled, early)
            changed |= objects_moved
            problems_changed |= problems_moved
            # Files too fresh to read at the listing (they may have been still being written) have their second
            # sighting now when reading the others took a poll interval: they join this scan, not the next one
            # (a whole long read later).
            if not unsettled or time.monotonic() - listed_at < self.poll_seconds:
                break
            listing = self._list()
            if listing is None:
                break
        if not changed:
            if problems_changed:
                self._save_last_good()
                self._publish_problems()
            return None
        self._save_last_good()
        return self._store_contents()

    def _read_settled(self, settled: dict[str, Signature | None], early: EarlyPublisher | None) -> tuple[bool, bool]:
        """Read (or forget) the settled files; whether any file's objects changed, and whether its problems did."""
        reads = [(name, signature) for name, signature in settled.items() if signature is not None]
        ahead = (_EarlyBatches(early, stored=self._new_object, fill=self._metadata.fill_early)
                 if early is not None and len(reads) > 1 else None)
        read: dict[str, _FileState | None] = {}
        with ThreadPoolExecutor(READERS, thread_name_prefix="manifest-reader") as pool:
            # In name order, as the files are read (two at a time).
            for (name, _), state in zip(reads, pool.map(lambda item: self._read(*item), reads)):
                read[name] = state
                if ahead is not None and state is not None and not state.failed and name not in self._files:
                    ahead.add(state.objects)
        changed = problems_changed = False
        for name, signature in settled.items():
            if signature is None:
                log.info("manifest file removed", extra=kv(file=self.directory / name,
                                                           objects=len(self._files[name].objects)))
                del self._files[name]
                changed = True
                continue
            state = read[name]
            if state is not None:
                known = self._files.get(name, _NOT_READ)
                changed |= state.objects != known.objects
                problems_changed |= state.problems != known.problems
                self._files[name] = state
        return changed, problems_changed

    def _as_stored(self, obj: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
        """(store key, object as stored) for an object the store keeps, else None (filters.py)."""
        return (object_key(obj), slim(obj)) if keep(obj, self.settings) else None

    def _new_object(self, obj: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
        """_as_stored, for an object the store may take ahead of the scan's end: one new to it."""
        stored = self._as_stored(obj)
        return None if stored is None or self._metadata.has(stored[0]) else stored

    def _list(self) -> dict[str, Signature] | None:
        started = time.monotonic()
        try:
            return self._listing()
        finally:
            self.listing_seconds = time.monotonic() - started

    def _listing(self) -> dict[str, Signature] | None:
        try:
            entries = list(os.scandir(self.directory))
        except OSError as err:
            message = (f"cannot list the manifests directory {self.directory}: {err.strerror}; "
                       "serving the objects last read")
            if message != self._listing_error:
                log.error(message)
            self._listing_error = message
            self._publish_problems()
            return None
        if self._listing_error:
            log.info("the manifests directory is readable again", extra=kv(directory=self.directory))
            self._listing_error = None
            self._publish_problems()
        listing: dict[str, Signature] = {}
        for entry in entries:
            if entry.name.startswith(".") or not entry.name.endswith(MANIFEST_SUFFIXES):
                continue
            try:
                st = os.stat(entry.path)  # follows symlinks, as kubectl does
            except OSError:
                continue  # removed meanwhile, or a dangling link (an editor's lock file)
            if stat.S_ISREG(st.st_mode):
                listing[entry.name] = (st.st_ino, st.st_size, st.st_mtime_ns)
        return listing

    def _settled_changes(self, listing: dict[str, Signature]) -> tuple[dict[str, Signature | None], set[str]]:
        """Files whose signature differs from the one last read and that are complete (unmodified for QUIET_NS,
        or the same as on the previous listing); and the files that differ but may not be complete yet."""
        previous = listing if self._previous_listing is None else self._previous_listing
        self._previous_listing = listing
        quiet_before = time.time_ns() - QUIET_NS
        changes: dict[str, Signature | None] = {}
        unsettled: set[str] = set()
        for name in sorted(listing.keys() | self._files.keys()):
            now = listing.get(name)
            state = self._files.get(name)
            known = state.signature if state is not None else None
            if now != known and (now == previous.get(name) or (now is not None and now[2] < quiet_before)):
                changes[name] = now
            elif now != known:
                unsettled.add(name)
            elif state is not None and state.racy:
                changes[name] = now  # read again: the content may have changed under the same signature
        return changes, unsettled

    def _read(self, name: str, listed: Signature) -> _FileState | None:
        path = self.directory / name
        cached = self._cached.pop(name, None)
        if cached is not None and cached.signature == listed:
            return _FileState(signature=listed, objects=cached.objects, problems=cached.problems, digest=cached.digest)
        try:
            with open(path, "rb") as f:
                # The signature of what is actually read: a write after it shows up on the next scan.
                st = os.fstat(f.fileno())
                data = f.read()
        except FileNotFoundError:
            return None  # gone since the listing: the next scans see that
        except OSError as err:
            problem = Problem(str(path), message=f"cannot read the file: {err.strerror}")
            return self._failed(name, signature=listed, problem=problem)
        signature = (st.st_ino, st.st_size, st.st_mtime_ns)
        # File times come from a coarse clock (a few ms): as git does for its index, a file modified
        # within RACY_NS of being read is read again on the next scan and compared by content.
        racy = st.st_mtime_ns >= time.time_ns() - RACY_NS
        digest = hashlib.sha256(data).digest()
        known = self._files.get(name)
        if known is not None and known.digest == digest:
            return replace(known, signature=signature, racy=racy)
        try:
            objects, problems = read_objects(name, data, str(path))
        except ManifestSyntaxError as err:
            column = f" (column {err.column})" if err.column else ""
            problem = Problem(str(path), message=f"{err.message}{column}", line=err.line)
            failed = self._failed(name, signature=signature, problem=problem)
            return replace(failed, digest=digest, racy=racy)
        for problem in problems:
            log.error(str(problem))
        log.info("manifest file read", extra=kv(file=path, objects=len(objects), skipped=len(problems)))
        return _FileState(signature=signature, objects=objects, problems=problems, digest=digest, racy=racy)

    def _failed(self, name: str, *, signature: Signature, problem: Problem) -> _FileState:
        known = self._files.get(name)
        last_good = known.objects if known is not None else self._saved_last_good.get(name, [])
        kept = (f"keeping the {_plural(len(last_good), 'object')} it defined when it last parsed"
                if last_good else "it defines nothing until it parses")
        problem = Problem(problem.file, message=f"{problem.message}; {kept}", line=problem.line)
        log.error(str(problem))
        return _FileState(signature=signature, objects=last_good, problems=[problem], failed=True)

    def _load_last_good(self) -> dict[str, list[dict[str, Any]]]:
        saved = load_json(self._last_good_path, "last good objects of failing manifest files") or {}
        # Checked again as a manifest would be: the file may have been damaged or edited by hand.
        return {name: objects_of(Document(index=0, line=0, data={"kind": "List", "items": objects}),
                                 str(self._last_good_path))[0]
                for name, objects in saved.items() if isinstance(objects, list)}

    def _save_last_good(self) -> None:
        failing = {name: state.objects for name, state in self._files.items() if state.failed and state.objects}
        if failing != self._saved_last_good:
            save_json(self._last_good_path, failing)
            self._saved_last_good = failing

    def save_cache(self) -> None:
        """Keep what each settled file holds for the next run (after the store has the new contents)."""
        settled = {name: ParsedFile(signature=state.signature, digest=state.digest, objects=state.objects,
                                    problems=state.problems)
                   for name, state in self._files.items() if not state.failed and not state.racy and state.digest}
        save_parse_cache(self._cache_path, settled)

    def _store_contents(self) -> StoreChanges:
        """How the store changes: every kept object by store key, the later file name winning a clash, against
        the last contents; server metadata filled in."""
        objects: dict[str, dict[str, Any]] = {}
        origins: dict[str, str] = {}
        warnings: list[str] = []
        for name in sorted(self._files):
            for obj in self._files[name].objects:
                if (stored := self._as_stored(obj)) is None:
                    continue
                key, value = stored
                if key in origins:
                    earlier = origins[key]
                    warnings.append(f"{key} is defined twice in {self.directory / name}; the later one is used"
                                    if earlier == name else
                                    f"{key} is defined in {self.directory / earlier} and in "
                                    f"{self.directory / name}; the one in {name} is used")
                objects[key], origins[key] = value, name
        for warning in sorted(set(warnings) - set(self.warnings)):
            log.warning(warning)
        self.warnings = warnings
        self._publish_problems()
        changes = self._metadata.fill(objects)
        log.info("manifests applied", extra=kv(files=len(self._files), objects=len(objects),
                                               changed=len(changes.changed), removed=len(changes.removed),
                                               errors=len(self.errors)))
        return changes

    def _publish_problems(self) -> None:
        problems = [str(p) for name in sorted(self._files) for p in self._files[name].problems]
        self.errors = ([self._listing_error] if self._listing_error else []) + problems

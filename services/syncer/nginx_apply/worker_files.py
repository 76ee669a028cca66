"""Files nginx's workers read per request or connection: the htpasswd (htdigest) files of basic (digest)
authentication, the endpoints of the TCP and UDP services. One WorkerFiles per directory.

The workers run as `nobody` when the tree runs as root (nginx.conf sets no `user`): the directory is
0750 and each file 0640, owned by root with the workers' group, so they can read a file they are named
but not list the directory, and no other user of the node can read either. When the whole tree runs as
one non-root user, the workers are that user: 0700 and 0600.

Each file is replaced by rename, so a request reads the old or the new content, never half of one; nginx
opens the file per request, so the next request sees a changed Secret without a reload.

What was written is kept in memory, and the model names the files that may have changed since the last apply
(model/incremental.py SideChanges): an apply that changes no file compares, writes, lists and removes nothing, one
that changes a file looks at that file alone (at 10,000 Ingresses with basic auth, every apply compared 10,000 files
and listed the directory). The directory is listed only when any file may have changed (the first apply, a model
built afresh), which also clears what a crash left.
"""
from __future__ import annotations

import logging
import os
import pwd
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Collection, Container, Iterable, Mapping

from services.common import changed_keys
from services.common.changed_keys import ChangedKeys

log = logging.getLogger("syncer")

# nginx's default worker user when nginx.conf has no `user` directive and the master runs as root.
NGINX_WORKER_USER = "nobody"


def _workers_group() -> int | None:
    """The group to give the files, or None when the workers run as this process's own user."""
    if os.geteuid() != 0:
        return None
    return pwd.getpwnam(NGINX_WORKER_USER).pw_gid


def _unsearchable_parent(directory: Path, group: int) -> Path | None:
    """The first parent of `directory` that the workers (others, or members of `group`) may not search."""
    for parent in directory.parents:
        info = parent.stat()
        if not info.st_mode & stat.S_IXOTH and not (info.st_gid == group and info.st_mode & stat.S_IXGRP):
            return parent
    return None


@dataclass
class FileWork:
    """What the files of one directory cost, counted (not timed)."""
    compared: int = 0  # names looked up in what was written or is there
    written: int = 0
    removed: int = 0
    listings: int = 0  # of the directory


class _Unused:
    """The names that may have become unused since the last removal (None: any), for those to look at alone."""

    def __init__(self) -> None:
        self.maybe: ChangedKeys = None  # the first removal lists the directory

    def note(self, names: ChangedKeys) -> None:
        self.maybe = changed_keys.union(self.maybe, names)

    def take(self) -> ChangedKeys:
        maybe, self.maybe = self.maybe, frozenset()
        return maybe


def _names(files: Mapping[str, bytes], changed: ChangedKeys) -> Iterable[str]:
    return files.keys() if changed is None else changed


class WorkerFiles:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._written: dict[str, bytes] = {}
        self._group = _workers_group()
        self._reach_checked = False
        self._unused = _Unused()
        self.work = FileWork()

    def write(self, files: Mapping[str, bytes], changed: ChangedKeys = None) -> None:
        """Write the files of `files` (name → content) named in `changed` (None: every one) whose content changed
        since it was last written; remove_others looks at those names."""
        self._unused.note(changed)
        ready = False
        for name in _names(files, changed):
            self.work.compared += 1
            content = files.get(name)
            if content is None or self._written.get(name) == content:
                continue
            if not ready:
                self._ensure_directory()
                ready = True
            self._replace(name, content)
            self._written[name] = content
            self.work.written += 1

    def remove_others(self, files: Mapping[str, bytes]) -> None:
        """Remove the files that `files` no longer has (their Secrets are no longer used) among those named since
        the last call; when any may have changed, every other file of the directory, and any temporary file a crash
        left behind."""
        maybe = self._unused.take()
        if maybe is None:
            if not self.directory.is_dir():
                return
            self.work.listings += 1
            maybe = frozenset(path.name for path in self.directory.iterdir())
        for name in maybe:
            self.work.compared += 1
            if name not in files:
                (self.directory / name).unlink(missing_ok=True)
                if self._written.pop(name, None) is not None:
                    self.work.removed += 1

    def _ensure_directory(self) -> None:
        self.directory.mkdir(mode=0o700, exist_ok=True)
        if self._group is None:
            os.chmod(self.directory, 0o700)
            return
        os.chown(self.directory, 0, self._group)
        os.chmod(self.directory, 0o750)
        if not self._reach_checked:
            self._reach_checked = True
            if blocking := _unsearchable_parent(self.directory, self._group):
                # nginx -t cannot see this: the workers open the file per request, and answer 500.
                log.error(f"nginx's workers cannot reach the files in {self.directory} (authentication answers 500, "
                          f"TCP and UDP services close): let others search {blocking} (chmod o+x) or choose "
                          "another --state-dir")

    def _replace(self, name: str, content: bytes) -> None:
        # mkstemp creates the file 0600: it is never readable by others before its mode is set.
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as file:
                if self._group is not None:
                    os.fchown(file.fileno(), 0, self._group)
                    os.fchmod(file.fileno(), 0o640)
                file.write(content)
                file.flush()
                os.fsync(file.fileno())
            os.replace(tmp, self.directory / name)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def write_root_only(directory: Path, name: str, content: bytes) -> None:
    """Write `name` in `directory` (0700) for nginx's master alone, unless it is there already (its name is a
    digest of its content)."""
    path = directory / name
    if path.exists():
        return
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(content)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class RootOnlyFiles:
    """The files of `directory` for nginx's master alone (write_root_only), each named by a digest of its content:
    written when first named, removed once no configuration nginx loads names them. Those there are kept in memory
    from a listing at the first write (with any temporary file a crash left)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._there: set[str] | None = None  # None: not listed yet
        self._unused = _Unused()
        self.work = FileWork()

    def write(self, files: Mapping[str, bytes], changed: ChangedKeys = None) -> None:
        """Write the files of `files` named in `changed` (None: every one) that are not there yet;
        remove_unused looks at those names."""
        self._unused.note(changed)
        there = self._listed()
        for name in _names(files, changed):
            self.work.compared += 1
            if name in files and name not in there:
                write_root_only(self.directory, name, files[name])
                there.add(name)
                self.work.written += 1

    def note_unused(self, names: Collection[str]) -> None:
        """`names` may no longer be named (a file the model does not track by change, such as the DH parameters)."""
        self._unused.note(frozenset(names))

    def remove_unused(self, *kept: Container[str]) -> None:
        """Remove the files named since the last call that none of `kept` holds (all the others but those, when
        any may have changed), and any temporary file a crash left."""
        there = self._listed()
        maybe = self._unused.take()
        if maybe is None:
            maybe = frozenset(there)
        for name in maybe:
            self.work.compared += 1
            if name in there and not any(name in names for names in kept):
                (self.directory / name).unlink(missing_ok=True)
                there.discard(name)
                self.work.removed += 1

    def _listed(self) -> set[str]:
        if self._there is None:
            self.work.listings += 1
            self._there = {path.name for path in self.directory.iterdir()} if self.directory.is_dir() else set()
        return self._there

"""Files nginx's workers read per request or connection: the htpasswd (htdigest) files of basic (digest)
authentication, the endpoints of the TCP and UDP services. One WorkerFiles per directory.

The workers run as `nobody` when the tree runs as root (nginx.conf sets no `user`): the directory is
0750 and each file 0640, owned by root with the workers' group, so they can read a file they are named
but not list the directory, and no other user of the node can read either. When the whole tree runs as
one non-root user, the workers are that user: 0700 and 0600.

Each file is replaced by rename, so a request reads the old or the new content, never half of one; nginx
opens the file per request, so the next request sees a changed Secret without a reload.
"""
from __future__ import annotations

import logging
import os
import pwd
import stat
import tempfile
from pathlib import Path
from typing import Mapping

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


class WorkerFiles:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._written: dict[str, bytes] = {}
        self._group = _workers_group()
        self._reach_checked = False

    def write(self, files: Mapping[str, bytes]) -> None:
        """Write every file of `files` (name → content) whose content changed since it was last written."""
        if not files:
            return
        self._ensure_directory()
        for name, content in files.items():
            if self._written.get(name) != content:
                self._replace(name, content)
                self._written[name] = content

    def remove_others(self, files: Mapping[str, bytes]) -> None:
        """Remove the files that `files` no longer has (their Secrets are no longer used), and any temporary
        file a crash left behind."""
        if not self.directory.is_dir():
            return
        for path in self.directory.iterdir():
            if path.name not in files:
                path.unlink(missing_ok=True)
                self._written.pop(path.name, None)

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


def remove_others_root_only(directory: Path, keep: set[str]) -> None:
    """Remove the files of `directory` that are not in `keep` (those of configurations nginx no longer loads)."""
    if not directory.is_dir():
        return
    for path in directory.iterdir():
        if path.name not in keep:
            path.unlink(missing_ok=True)

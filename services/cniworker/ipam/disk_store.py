"""Allocations on disk, laid out like the host-local IPAM plugin's store.

<state_dir>/cni/networks/<network>/ holds one file per allocated address (named after the address,
holding "<container id>\\r\\n<ifname>" as host-local writes it), `last_reserved_ip.0` (where the
round-robin search resumes) and `lock`, which every reader and writer holds with flock(2). flock
is what host-local takes too, so the two never hand out the same address from one directory.

Directories are 0700 and files 0600, not host-local's 0755/0644: only the root-run worker reads
or writes them, and the container ids in them are nobody else's business.
"""
from __future__ import annotations

import fcntl
import os
import threading
from contextlib import contextmanager
from ipaddress import IPv4Address
from pathlib import Path
from typing import Iterator

from services.common.cni_config.runtime_env import AttachmentId

_LAST_RESERVED = "last_reserved_ip.0"
_LOCK = "lock"
_LINE_BREAK = "\r\n"


# flock(2) already serialises separate open() calls within one process; the thread lock keeps
# this process's threads queued here instead of all blocking in the kernel at once.
_thread_locks: dict[Path, threading.Lock] = {}
_thread_locks_guard = threading.Lock()


def _thread_lock(directory: Path) -> threading.Lock:
    with _thread_locks_guard:
        return _thread_locks.setdefault(directory, threading.Lock())


class DiskStore:
    """The directory of one network (an `AllocationStore`). Every method but `locked` expects the
    caller to hold the lock."""

    def __init__(self, state_dir: str | os.PathLike, network: str) -> None:
        self.state_dir = Path(state_dir)
        self.directory = self.state_dir / "cni" / "networks" / network

    @contextmanager
    def locked(self) -> Iterator[None]:
        with _thread_lock(self.directory):
            fd = self._open_lock_file()
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield
            finally:
                os.close(fd)  # closing the descriptor drops the flock

    def _open_lock_file(self) -> int:
        path = self.directory / _LOCK
        try:
            return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except FileNotFoundError:
            self.state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            for directory in (self.directory.parents[1], self.directory.parent, self.directory):
                directory.mkdir(mode=0o700, exist_ok=True)
            return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)

    def allocations(self) -> dict[IPv4Address, AttachmentId]:
        found: dict[IPv4Address, AttachmentId] = {}
        try:
            entries = list(os.scandir(self.directory))
        except FileNotFoundError:
            return found
        for entry in entries:
            try:
                ip = IPv4Address(entry.name)
                with open(entry.path, encoding="utf-8", errors="replace") as f:
                    lines = f.read().splitlines()
            except (ValueError, FileNotFoundError):
                continue  # not an address file (lock, last_reserved_ip.0), or released meanwhile
            found[ip] = AttachmentId(lines[0].strip() if lines else "", lines[1].strip() if len(lines) > 1 else "")
        return found

    def reserve(self, ip: IPv4Address, owner: AttachmentId) -> bool:
        """Claims `ip` for `owner`; False if a file for it exists already."""
        path = self.directory / str(ip)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        except FileExistsError:
            return False
        try:
            os.write(fd, f"{owner.container_id}{_LINE_BREAK}{owner.ifname}".encode())
        except OSError:
            os.close(fd)
            os.unlink(path)
            raise
        os.close(fd)
        self._write(_LAST_RESERVED, str(ip))
        return True

    def release(self, ip: IPv4Address) -> None:
        try:
            os.unlink(self.directory / str(ip))
        except FileNotFoundError:
            pass

    def last_reserved(self) -> IPv4Address | None:
        try:
            return IPv4Address((self.directory / _LAST_RESERVED).read_text().strip())
        except (FileNotFoundError, ValueError):
            return None

    def writable(self) -> bool:
        return os.access(self.directory, os.W_OK)

    def _write(self, name: str, text: str) -> None:
        fd = os.open(self.directory / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, text.encode())
        finally:
            os.close(fd)

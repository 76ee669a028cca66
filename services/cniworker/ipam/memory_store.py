"""Allocations kept in memory, with the semantics of the disk store (host-local's testing FakeStore)."""
from __future__ import annotations

import threading
from contextlib import contextmanager
from ipaddress import IPv4Address
from typing import Iterator

from services.common.cni_config.runtime_env import AttachmentId


class MemoryStore:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._allocations: dict[IPv4Address, AttachmentId] = {}
        self._last_reserved: IPv4Address | None = None

    @contextmanager
    def locked(self) -> Iterator[None]:
        with self._lock:
            yield

    def allocations(self) -> dict[IPv4Address, AttachmentId]:
        return dict(self._allocations)

    def reserve(self, ip: IPv4Address, owner: AttachmentId) -> bool:
        if ip in self._allocations:
            return False
        self._allocations[ip] = owner
        self._last_reserved = ip
        return True

    def release(self, ip: IPv4Address) -> None:
        self._allocations.pop(ip, None)

    def last_reserved(self) -> IPv4Address | None:
        return self._last_reserved

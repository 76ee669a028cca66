"""What the IP allocator needs from the place allocations are kept (host-local's backend.Store).

Every method but `locked` expects the caller to hold the lock: a reader sees, and a writer changes,
the allocations of one network with no other process or thread in between.
"""
from __future__ import annotations

from contextlib import AbstractContextManager
from ipaddress import IPv4Address
from typing import Protocol

from services.common.cni_config.runtime_env import AttachmentId


class AllocationStore(Protocol):
    def locked(self) -> AbstractContextManager[None]:
        """Holds the network's lock, against other threads and other processes."""

    def allocations(self) -> dict[IPv4Address, AttachmentId]:
        """Every allocated address and the attachment that holds it."""

    def reserve(self, ip: IPv4Address, owner: AttachmentId) -> bool:
        """Claims `ip` for `owner` and remembers it as the last reserved; False if it is taken."""

    def release(self, ip: IPv4Address) -> None:
        """Frees `ip`; an address that is not allocated is no error."""

    def last_reserved(self) -> IPv4Address | None:
        """The address reserved last, where the round-robin search resumes."""

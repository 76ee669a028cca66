"""The IP allocator of one network: host-local's round robin over an allocation store."""
from __future__ import annotations

from ipaddress import IPv4Address
from typing import Callable, Iterator

from proto.cni import IPAM_EXHAUSTED, CniError
from services.common.cni_config.ipam import IpamConfig
from services.common.cni_config.runtime_env import AttachmentId

from .store import AllocationStore


class IpAllocator:
    """Hands out the addresses of one network's range round-robin, like host-local."""

    def __init__(self, store: AllocationStore, *, config: IpamConfig, network: str) -> None:
        self.store = store
        self.config = config
        self.network = network

    def allocate(self, owner: AttachmentId) -> IPv4Address:
        """The address of `owner`: the one it holds already, else the next free one after the last handed out."""
        with self.store.locked():
            allocations = self.store.allocations()
            for ip, holder in allocations.items():
                if holder == owner and self.config.contains(ip):
                    return ip
            for ip in self._search_order(self.store.last_reserved()):
                if ip not in allocations and self.store.reserve(ip, owner):
                    return ip
        cfg = self.config
        raise CniError(IPAM_EXHAUSTED,
                       f"no free address in {cfg.range_start}-{cfg.range_end} of subnet {cfg.subnet} "
                       f"(network {self.network!r})",
                       details=f"all {cfg.size()} addresses are allocated; delete unused pods (DEL, or GC with the "
                               "valid attachments) or give the network a larger subnet or range")

    def find(self, owner: AttachmentId) -> IPv4Address | None:
        with self.store.locked():
            return next((ip for ip, holder in self.store.allocations().items() if holder == owner), None)

    def free_count(self) -> int:
        with self.store.locked():
            used = sum(1 for ip in self.store.allocations() if self.config.contains(ip))
        return self.config.size() - used

    def _search_order(self, last: IPv4Address | None) -> Iterator[IPv4Address]:
        start, end, gateway = int(self.config.range_start), int(self.config.range_end), int(self.config.gateway)
        begin = int(last) + 1 if last is not None and start <= int(last) < end else start
        for value in [*range(begin, end + 1), *range(start, begin)]:
            if value != gateway:
                yield IPv4Address(value)


def release(store: AllocationStore, owner: AttachmentId) -> list[IPv4Address]:
    """Frees every address `owner` holds in the store's network; holding none is not an error."""
    return list(release_where(store, lambda holder: holder == owner))


def release_where(store: AllocationStore, condition: Callable[[AttachmentId], bool]) -> dict[IPv4Address, AttachmentId]:
    """Frees every address whose holder meets `condition`; returns what it freed."""
    with store.locked():
        released = {ip: holder for ip, holder in store.allocations().items() if condition(holder)}
        for ip in released:
            store.release(ip)
    return released

"""IP address management on disk, laid out like the host-local IPAM plugin's store.

<state_dir>/cni/networks/<network>/ holds one file per allocated address (named after the address,
holding "<container id>\\r\\n<ifname>" as host-local writes it), `last_reserved_ip.0` (where the
round-robin search resumes) and `lock`, which every reader and writer holds with flock(2). flock
is what host-local takes too, so the two never hand out the same address from one directory.

Directories are 0700 and files 0600, not host-local's 0755/0644: only the root-run worker reads
or writes them, and the container ids in them are nobody else's business.
"""
from __future__ import annotations

import fcntl
import ipaddress
import os
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network
from pathlib import Path
from typing import Callable, Iterator, NamedTuple

from proto.cni import INVALID_NETWORK_CONFIG, IPAM_EXHAUSTED, CniError

_LAST_RESERVED = "last_reserved_ip.0"
_LOCK = "lock"
_LINE_BREAK = "\r\n"


class Owner(NamedTuple):
    """The key the CNI specification asks stateful plugins to use (within one network)."""
    container_id: str
    ifname: str


@dataclass(frozen=True)
class IpamConfig:
    subnet: IPv4Network
    gateway: IPv4Address
    range_start: IPv4Address
    range_end: IPv4Address

    def size(self) -> int:
        count = int(self.range_end) - int(self.range_start) + 1
        return count - (1 if self.range_start <= self.gateway <= self.range_end else 0)

    def contains(self, ip: IPv4Address) -> bool:
        return self.range_start <= ip <= self.range_end and ip != self.gateway


def resolve_ipam(ipam: dict | None, pod_cidr: str | None) -> IpamConfig:
    """The `ipam` section with every default filled in; a CniError (code 7) says what to change."""
    ipam = ipam or {}
    subnet_text = ipam.get("subnet") or pod_cidr
    if not subnet_text:
        raise _invalid("no pod subnet: set ipam.subnet in the network configuration or start the CNI server "
                       "with --pod-cidr")
    try:
        subnet = ipaddress.ip_network(subnet_text, strict=False)
    except ValueError:
        raise _invalid(f"ipam.subnet {subnet_text!r} is not a CIDR such as 10.128.0.0/23") from None
    if not isinstance(subnet, IPv4Network):
        raise _invalid(f"ipam.subnet {subnet_text}: only IPv4 subnets are supported")
    if subnet.prefixlen > 30:
        raise _invalid(f"ipam.subnet {subnet} is too small: a gateway and a pod need at least a /30")
    first, last = subnet.network_address + 1, subnet.broadcast_address - 1
    gateway = _address_in(ipam, "gateway", subnet, first)
    start = _address_in(ipam, "rangeStart", subnet, first)
    end = _address_in(ipam, "rangeEnd", subnet, last)
    if start > end:
        raise _invalid(f"ipam.rangeStart {start} comes after ipam.rangeEnd {end}")
    config = IpamConfig(subnet, gateway, start, end)
    if config.size() == 0:
        raise _invalid(f"ipam range {start}-{end} holds no address besides the gateway {gateway}")
    return config


def _address_in(ipam: dict, key: str, subnet: IPv4Network, default: IPv4Address) -> IPv4Address:
    text = ipam.get(key)
    if text is None:
        return default
    try:
        ip = IPv4Address(text)
    except ValueError:
        raise _invalid(f"ipam.{key} {text!r} is not an IPv4 address") from None
    if ip not in subnet or ip in (subnet.network_address, subnet.broadcast_address):
        raise _invalid(f"ipam.{key} {ip} must be a host address inside ipam.subnet {subnet}")
    return ip


def _invalid(msg: str) -> CniError:
    return CniError(INVALID_NETWORK_CONFIG, msg)


# flock(2) already serialises separate open() calls within one process; the thread lock keeps
# this process's threads queued here instead of all blocking in the kernel at once.
_thread_locks: dict[Path, threading.Lock] = {}
_thread_locks_guard = threading.Lock()


def _thread_lock(directory: Path) -> threading.Lock:
    with _thread_locks_guard:
        return _thread_locks.setdefault(directory, threading.Lock())


class AllocationStore:
    """The directory of one network. Every method but `locked` expects the caller to hold the lock."""

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

    def allocations(self) -> dict[IPv4Address, Owner]:
        found: dict[IPv4Address, Owner] = {}
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
            found[ip] = Owner(lines[0].strip() if lines else "", lines[1].strip() if len(lines) > 1 else "")
        return found

    def reserve(self, ip: IPv4Address, owner: Owner) -> bool:
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


class IpAllocator:
    """Hands out the addresses of one network's range round-robin, like host-local."""

    def __init__(self, store: AllocationStore, config: IpamConfig, network: str) -> None:
        self.store = store
        self.config = config
        self.network = network

    def allocate(self, owner: Owner) -> IPv4Address:
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
                       f"all {cfg.size()} addresses are allocated; delete unused pods (DEL, or GC with the "
                       "valid attachments) or give the network a larger subnet or range")

    def find(self, owner: Owner) -> IPv4Address | None:
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


def release(store: AllocationStore, owner: Owner) -> list[IPv4Address]:
    """Frees every address `owner` holds in the store's network; holding none is not an error."""
    return list(release_where(store, lambda holder: holder == owner))


def release_where(store: AllocationStore, condition: Callable[[Owner], bool]) -> dict[IPv4Address, Owner]:
    """Frees every address whose holder meets `condition`; returns what it freed."""
    with store.locked():
        released = {ip: holder for ip, holder in store.allocations().items() if condition(holder)}
        for ip in released:
            store.release(ip)
    return released

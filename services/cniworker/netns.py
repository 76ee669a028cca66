"""Running a function inside a network namespace.

The function runs in another thread that setns(2)es into the namespace: network namespaces are per
thread, so the caller's thread never changes namespace. The threads are kept in a small pool rather than
started per call (a thread start cost 0.2-1.4 ms of an ADD here); each call enters its namespace first
(setns to an absolute target, so a thread's past never matters) and goes back to the process's own after.
pyroute2's `IPRoute(netns=...)` would fork a helper process per handle instead (~11 ms, and unsafe in a
threaded server); a netlink socket opened in the entered thread belongs to that namespace.
Python 3.11 has no os.setns, hence the libc call.
"""
from __future__ import annotations

import ctypes
import fcntl
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, TypeVar

T = TypeVar("T")

_CLONE_NEWNET = 0x40000000
_NS_GET_NSTYPE = 0xB703  # ioctl(2) on a namespace file: which kind of namespace it is
_libc = ctypes.CDLL(None, use_errno=True)
# As many as the worker runs requests at once (services/cniworker/main.py); more only wait.
_POOL = ThreadPoolExecutor(max_workers=8, thread_name_prefix="netns")


class NotANetworkNamespace(Exception):
    """The path exists but is not a network namespace."""


def _setns(fd: int) -> None:
    if _libc.setns(fd, _CLONE_NEWNET) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


class NetNS:
    """An open network namespace: `with NetNS(path) as ns: ns.run(fn)`; `ns.fd` moves links into it."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)  # FileNotFoundError when it is gone
        try:
            kind = fcntl.ioctl(self.fd, _NS_GET_NSTYPE)
        except OSError:  # ENOTTY: not a namespace file at all
            kind = None
        if kind != _CLONE_NEWNET:
            self.close()
            raise NotANetworkNamespace(f"{path} is not a network namespace")

    def __enter__(self) -> NetNS:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def run(self, fn: Callable[[], T]) -> T:
        """Calls `fn()` inside the namespace and returns its result or raises its exception."""
        return _POOL.submit(_call_in, self.fd, fn).result()


def _call_in(fd: int, fn: Callable[[], T]) -> T:
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    try:
        _setns(fd)
        try:
            return fn()
        finally:
            # Going home keeps whatever else runs in this thread (finalizers, the pool's own code) out of
            # the pod's namespace.
            _setns(home)
    finally:
        os.close(home)

"""Running a function inside a network namespace.

The function runs in a thread of its own that setns(2)es into the namespace: network namespaces
are per thread, so the caller's thread never changes namespace. pyroute2's `IPRoute(netns=...)`
would fork a helper process per handle instead (~11 ms, and unsafe in a threaded server); a
netlink socket opened in the entered thread belongs to that namespace (~3 ms in all).
Python 3.11 has no os.setns, hence the libc call.
"""
from __future__ import annotations

import ctypes
import fcntl
import os
import threading
from typing import Callable, TypeVar

T = TypeVar("T")

_CLONE_NEWNET = 0x40000000
_NS_GET_NSTYPE = 0xB703  # ioctl(2) on a namespace file: which kind of namespace it is
_libc = ctypes.CDLL(None, use_errno=True)


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
        outcome: dict[str, object] = {}

        def enter_and_call() -> None:
            home = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
            try:
                _setns(self.fd)
                try:
                    outcome["value"] = fn()
                finally:
                    # The thread ends right after; going home anyway keeps whatever runs in it
                    # after fn (finalizers, thread-local teardown) out of the pod's namespace.
                    _setns(home)
            except BaseException as e:  # handed to the caller's thread below
                outcome["error"] = e
            finally:
                os.close(home)

        thread = threading.Thread(target=enter_and_call, name=f"netns:{os.path.basename(self.path)}")
        thread.start()
        thread.join()
        if "error" in outcome:
            raise outcome["error"]  # type: ignore[misc]
        return outcome["value"]  # type: ignore[return-value]

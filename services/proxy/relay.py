"""The C relay (relay/) that copies between the two sockets of every passed-through pair.

The proxy reads the ClientHello, routes and connects in Python; from then on each pair is the relay's, and the
interpreter runs nothing per read or send (BENCHMARKS.md, TLS passthrough, has what that saved). The relay shares
the connection loop's epoll set (event_loop.py) and waits on it for the loop: the pairs' events are handled in C
during the wait, and only the loop's own come back to Python. relay/relay.c says why one set and one thread.

The library is a CPython extension (the stable ABI) that `make setup` builds into build/pyngress-relay.so; the
container image ships it and names it in PYNGRESS_RELAY_LIBRARY. Without it the proxy does not start: a Python copy
would hide a broken build behind a proxy that costs more per connection.
"""
from __future__ import annotations

import importlib.machinery
import importlib.util
import functools
import os
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Protocol

LIBRARY_ENV = "PYNGRESS_RELAY_LIBRARY"
BUILT_LIBRARY = Path(__file__).resolve().parents[2] / "build" / "pyngress-relay.so"
MODULE_NAME = "_pyngress_relay"
# The relay module's hello(first_bytes) returns the SNI host name, the number of bytes needed in all before a verdict
# (> 0), or one of these (relay/module.c defines them too: tests/unit/proxy/test_hello.py holds the two together).
NO_SNI = -1  # a well-formed ClientHello without a server name
NOT_TLS = -2  # not a TLS handshake record


class RelayUnavailable(RuntimeError):
    """The relay library cannot be loaded: the proxy cannot serve."""


class Loop(Protocol):
    """What the relay needs of the event loop whose epoll set it shares (event_loop.EventLoop)."""

    epoll: Any  # select.epoll
    wait: Callable[[float, int], list[tuple[int, int]]]  # as select.epoll.poll: the relay takes it over


@dataclass(frozen=True)
class RelayCounters:
    active: int  # pairs open now
    opened: int  # pairs handed over since the start
    idle_closed: int  # closed after the idle timeout
    failed: int  # closed on an error of either socket (a reset, a refused send)
    bytes_to_upstream: int  # what clients sent (their ClientHello included)
    bytes_to_client: int  # what upstreams sent


def library_path() -> Path:
    configured = os.environ.get(LIBRARY_ENV)
    return Path(configured) if configured else BUILT_LIBRARY


def load(path: Path | None = None) -> ModuleType:
    """The relay's extension module (loaded once per process)."""
    path = path or library_path()
    loaded = _loaded.get(path)
    if loaded is not None:
        return loaded
    loader = importlib.machinery.ExtensionFileLoader(MODULE_NAME, str(path))
    spec = importlib.util.spec_from_file_location(MODULE_NAME, path, loader=loader)
    try:
        if spec is None or not path.is_file():
            raise ImportError("no such file")
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
    except ImportError as err:
        raise RelayUnavailable(
            f"cannot load the passthrough relay library {path} ({err}): build it with `make setup`, or set "
            f"{LIBRARY_ENV} to where it is") from None
    _loaded[path] = module
    return module


_loaded: dict[Path, ModuleType] = {}


class Relay:
    """The pairs of one connection loop, on its epoll set. Every method but `counters` and `active` runs on the
    loop's thread."""

    __slots__ = ("handle", "add", "accept_read", "hello", "hello_error", "_lib")

    def __init__(self, loop: Loop, path: Path | None = None) -> None:
        self._lib = load(path)
        self.handle = self._lib.new(loop.epoll.fileno())
        # add(client_fd, client_on_set, upstream_fd, upstream_on_set, upstream_missed, first_bytes): hand over two
        # connected non-blocking sockets (their descriptors: the relay closes them, even when this raises OSError),
        # sending `first_bytes` upstream first. A socket on the loop's epoll set (`*_on_set`) has no handler there any
        # more; the upstream must be registered as its connect left it (READ_WRITE_EVENTS), with the events epoll
        # reported for it since it was last read (`upstream_missed`: edges it will not report again). Bound in C, as
        # accept_read and hello are: they run per connection, where a Python frame around them costs more than they do.
        self.add: Callable[[int, bool, int, bool, int, bytes], None] = functools.partial(self._lib.add, self.handle)
        # accept_read(listener_fd): None when no connection is waiting, else (fd, first_bytes): a connection,
        # non-blocking already, without its peer's address (which the socket module's accept formats, at a cost, for
        # nothing used), and what it has sent already (the ClientHello, usually: read now, it costs no turn of the
        # loop), b"" for an EOF or an error, None when nothing has arrived yet. OSError as accept(2).
        self.accept_read: Callable[[int], tuple[int, bytes | None] | None] = functools.partial(
            self._lib.accept_read, self.handle)
        # hello(first_bytes): the ClientHello's verdict (relay/hello.c); it raises hello_error (a ValueError) with what
        # is wrong with a malformed one.
        self.hello: Callable[[bytes | bytearray], str | int] = self._lib.hello
        self.hello_error: type[ValueError] = self._lib.ClientHelloError
        # The loop waits through the relay from here: poll(timeout, max_events) handles the pairs' events in C and
        # returns the loop's own, as select.epoll.poll does.
        loop.wait = functools.partial(self._lib.poll, self.handle)

    def sweep(self, max_quiet_sweeps: int) -> int:
        """Close the pairs idle for more than `max_quiet_sweeps` sweeps; returns how many."""
        return int(self._lib.sweep(self.handle, max_quiet_sweeps))

    def close_all(self) -> int:
        return int(self._lib.close_all(self.handle))

    def counters(self) -> RelayCounters:
        """The relay's counters (from any thread: the GIL keeps them whole)."""
        return RelayCounters(*self._lib.counters(self.handle))

    @property
    def active(self) -> int:
        return int(self._lib.active(self.handle))

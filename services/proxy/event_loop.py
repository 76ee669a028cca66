"""The proxy's connection loop: one thread, one epoll set, its own timers.

The proxy's asyncio loop keeps the control work (the table subscription, the status file, signals); every
connection lives here instead, on a bare epoll loop, which costs far less per connection (BENCHMARKS.md's TLS
passthrough section says how much). The two meet in three places only: the routing table (replaced whole or one key at a time, each an
atomic assignment), counters read for the status file, and `call_soon_threadsafe`, which wakes this loop
through an eventfd.

Every object on the epoll set has an `on_event(events)` method. Sockets closed while handling a batch of
events are closed after the batch, so that no new socket reuses the number of one whose events are still to
be handled in it. A handler with more to read than one turn allows asks to be called again after the batch
(`ready`): the connections are edge-triggered, so epoll would not report it again.

Passed-through pairs are the C relay's (relay.py): they share this epoll set, and the loop waits through the relay
(`wait`), which handles their events and returns the loop's own.
"""
from __future__ import annotations

import heapq
import logging
import os
import select
import _socket
import threading
import time
from collections import deque
from typing import Any, Callable, Protocol

log = logging.getLogger(__name__)

EPOLLIN, EPOLLOUT = select.EPOLLIN, select.EPOLLOUT
EPOLLERR_OR_HUP = select.EPOLLERR | select.EPOLLHUP
PEER_CLOSED = select.EPOLLRDHUP | select.EPOLLHUP
# How the connections' sockets are registered: edge-triggered, EPOLLOUT only while a send waits to go on.
READ_EVENTS = EPOLLIN | select.EPOLLRDHUP | select.EPOLLET
READ_WRITE_EVENTS = READ_EVENTS | EPOLLOUT
# One read per event at most this big (the relay's own reads are the same size): a fast sender stays busy without
# one connection holding more than this of the proxy's memory per direction.
READ_SIZE = 256 * 1024

MAX_EVENTS = 512
# The longest the loop sleeps without a timer due: commands wake it at once, so this only bounds how late a
# timer added from another thread could run (none is).
MAX_SLEEP_SECONDS = 1.0


class Closable(Protocol):
    @property
    def sock(self) -> _socket.socket: ...  # read-only: a listener's socket.socket is one too


# How late a deadline may run, at most, so that one turn of the loop expires every entry due meanwhile. Every
# connection leaves one (its connect deadline stays until due), and a wake-up per entry, a thousand a second
# under load, cost about 20 us each: a tenth of what the connection itself costs.
MAX_DEADLINE_SLACK_SECONDS = 0.1


class Deadlines:
    """Deadlines that all run the same time from their start, so that they expire in the order they were
    added: an insertion-ordered dict instead of a heap. An entry whose work is done early is taken out (`discard`),
    so that it costs nothing when it would have come due, or is left in place and skipped then (`expire` gets it and
    decides). An item is in at most once. An entry runs up to a twentieth of `seconds` late (at most
    MAX_DEADLINE_SLACK_SECONDS), together with the others due by then."""

    def __init__(self, loop: EventLoop, seconds: float, expire: Callable[[Any], None]) -> None:
        self.loop = loop
        self.seconds = seconds
        self.slack = min(seconds / 20, MAX_DEADLINE_SLACK_SECONDS)
        self.expire = expire
        self.entries: dict[Any, float] = {}  # item -> its deadline, the earliest first
        loop.deadlines.append(self)

    def add(self, item: Any) -> None:
        deadline = self.loop.now + self.seconds
        entries = self.entries
        if not entries:  # else the loop already wakes for the first entry, which is due earlier
            self.loop.wake_by(deadline + self.slack)
        entries[item] = deadline

    def discard(self, item: Any) -> None:
        self.entries.pop(item, None)

    def run_due(self, now: float) -> float | None:
        """Expire what is due; returns when the loop should run this next, if anything is left."""
        entries = self.entries
        while entries:
            item = next(iter(entries))
            deadline = entries[item]
            if deadline > now:
                return deadline + self.slack
            del entries[item]
            self.expire(item)
        return None


class EventLoop:
    def __init__(self) -> None:
        self.epoll = select.epoll()
        # Waits for events, as select.epoll.poll(timeout, max_events); the relay replaces it with its own.
        self.wait: Callable[[float, int], list[tuple[int, int]]] = self.epoll.poll
        self.handlers: dict[int, Any] = {}  # fd -> the object whose on_event handles it
        self.deadlines: list[Deadlines] = []
        self._timers: list[tuple[float, int, Callable[[], None]]] = []  # a heap, for the few irregular timers
        self._timer_seq = 0
        self._to_close: list[_socket.socket] = []
        self._ready: list[Any] = []  # handlers to call with EPOLLIN after the batch
        self._commands: deque[Callable[[], None]] = deque()
        self._wakeup = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self.epoll.register(self._wakeup, select.EPOLLIN)
        self.handlers[self._wakeup] = self
        self._running = False
        self._thread: threading.Thread | None = None
        self._next_due = time.monotonic() + MAX_SLEEP_SECONDS  # when the timers need the loop next
        # The clock when the current turn's events came: what deadlines started in the turn count from (one reading a
        # turn, not one a connection; they run up to their slack late anyway).
        self.now = time.monotonic()

    def start(self, name: str) -> None:
        self._running = True
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def call_soon_threadsafe(self, command: Callable[[], None]) -> None:
        """Run `command` on the loop's thread (from any thread)."""
        self._commands.append(command)
        os.eventfd_write(self._wakeup, 1)

    def stop_threadsafe(self) -> None:
        self.call_soon_threadsafe(self._stop)

    def join(self, timeout: float) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def call_later(self, seconds: float, callback: Callable[[], None]) -> None:
        self._timer_seq += 1
        due = time.monotonic() + seconds
        heapq.heappush(self._timers, (due, self._timer_seq, callback))
        self.wake_by(due)

    def wake_by(self, due: float) -> None:
        """Have the loop run its timers no later than `due` (on the loop's thread)."""
        if due < self._next_due:
            self._next_due = due

    def close_later(self, fd: int, closable: Closable) -> None:
        """Forget the handler of `fd` now, and close its socket (which takes it off the epoll set) once the current
        batch of events is handled."""
        self.handlers.pop(fd, None)  # none for a socket never registered
        self._to_close.append(closable.sock)

    def ready(self, handler: Any) -> None:
        """Call `handler.on_event(EPOLLIN)` after the current batch of events (on the loop's thread), unless its
        socket is closed by then."""
        self._ready.append(handler)

    def on_event(self, events: int) -> None:  # the wakeup eventfd
        os.eventfd_read(self._wakeup)
        commands = self._commands
        while commands:
            commands.popleft()()

    def _stop(self) -> None:
        self._running = False

    def _run(self) -> None:
        try:
            self._loop()
        except BaseException:
            # A bug here leaves every connection of this process unserved: exit, and supervisord starts a
            # fresh proxy (the other processes keep the port served meanwhile).
            log.critical("the connection loop failed; exiting", exc_info=True)
            logging.shutdown()
            os._exit(1)
        finally:
            self.epoll.close()
            os.close(self._wakeup)

    def _loop(self) -> None:
        poll, handlers, to_close, ready = self.wait, self.handlers, self._to_close, self._ready
        monotonic = time.monotonic
        timeout = MAX_SLEEP_SECONDS
        while self._running:
            events_of_turn = poll(timeout, MAX_EVENTS)
            self.now = now = monotonic()
            for fd, events in events_of_turn:
                handler = handlers.get(fd)
                if handler is not None:  # None: closed earlier in this batch
                    handler.on_event(events)
            if ready:
                self._run_ready()
            if to_close:
                self._close_deferred()
            timeout = self._next_due - now
            if timeout <= 0.0:
                self._run_timers()
                timeout = max(self._next_due - monotonic(), 0.0)
            if ready:
                timeout = 0.0

    def _run_ready(self) -> None:
        batch = self._ready[:]
        self._ready.clear()  # what these add waits for the next turn
        for handler in batch:
            if handler.fd >= 0:
                handler.on_event(select.EPOLLIN)

    def _close_deferred(self) -> None:
        for sock in self._to_close:
            sock.close()
        self._to_close.clear()

    def _run_timers(self) -> None:
        """Run what is due, and note when the loop is needed next (what the callbacks add notes itself)."""
        self.now = now = time.monotonic()
        self._next_due = now + MAX_SLEEP_SECONDS
        for deadlines in self.deadlines:
            due = deadlines.run_due(now)
            if due is not None:
                self.wake_by(due)
        timers = self._timers
        while timers and timers[0][0] <= now:
            heapq.heappop(timers)[2]()
        if timers:
            self.wake_by(timers[0][0])
        if self._to_close:  # timers close sockets too
            self._close_deferred()

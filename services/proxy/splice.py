"""Splicing two connections together once the ClientHello has been routed: the proxy's hot path.

Each spliced connection is a `Side` on the proxy's epoll set (event_loop.py), edge-triggered as nginx's are:
each socket is registered once and its interest changes only when a send first falls short. What one side
receives is sent straight to the other. What the other cannot take at once waits in the side's `pending`, and
the first side is not read again until that has drained. So each direction holds at most one read's worth
(READ_SIZE) and a slow reader never makes the proxy buffer without bound.

Edge-triggered means an event is reported once per arrival, not while data waits, so the splicer keeps track
of what it has not read yet: a read that fills the buffer is followed by another after the loop's batch
(`Loop.ready`); a side held back by its peer's pending bytes is read again once they are out; and a peer's EOF
that arrived with the last data (EPOLLRDHUP) is read right after it.

Why a bare epoll loop and not asyncio transports (which this proxy used until the eleventh session): with uvloop,
the loop's wake-ups, transports, futures and the task of each upstream connect cost the proxy 1.42-1.61x nginx's
CPU per new connection (bench/bench_passthrough.py). The level-triggered loop of the twelfth session measured
1.31x; BENCHMARKS.md has what edge triggering changed.

Half-close: EOF from one side is passed on as a write shutdown to the other, and the other direction keeps
flowing; the pair is closed once both sides have sent EOF and nothing is left to write, or when either side
fails.
"""
from __future__ import annotations

import _socket
import select
import socket
from typing import Callable, Protocol

EPOLLIN, EPOLLOUT = select.EPOLLIN, select.EPOLLOUT
EPOLLERR_OR_HUP = select.EPOLLERR | select.EPOLLHUP
PEER_CLOSED = select.EPOLLRDHUP | select.EPOLLHUP
# What a spliced socket is registered for; EPOLLOUT is added once a send to it falls short.
READ_EVENTS = EPOLLIN | select.EPOLLRDHUP | select.EPOLLET
READ_WRITE_EVENTS = READ_EVENTS | EPOLLOUT

# One read per event at most this big; with the kernel's socket buffers this keeps a fast sender busy without
# letting one connection hold more than this much of the proxy's memory per direction.
READ_SIZE = 256 * 1024


class Loop(Protocol):
    """What the splicer needs of the event loop it runs on."""

    epoll: select.epoll
    handlers: dict[int, object]  # fd -> what handles its events

    def close_later(self, fd: int, closable: Side) -> None:
        """Forget the fd's handler now; close the socket after the current batch of events."""

    def ready(self, handler: Side) -> None:
        """Call handler.on_event(EPOLLIN) after the current batch of events."""


class Side:
    """One connection of a spliced pair."""

    __slots__ = ("sock", "fd", "peer", "pending", "got_eof", "peer_closed", "watches_out", "quiet_ticks",
                 "splicer")

    def __init__(self, sock: _socket.socket, splicer: Splicer, watches_out: bool) -> None:
        self.sock = sock
        self.fd = sock.fileno()
        self.peer: Side = None  # type: ignore[assignment]  # linked before any event
        self.pending = b""  # received from the peer, not yet taken by this side's socket
        self.got_eof = False
        self.peer_closed = False  # epoll said the far end closed: a short read is followed by one for the EOF
        self.watches_out = watches_out  # EPOLLOUT is in its registration
        self.quiet_ticks = 0  # idle sweeps since this side last received data
        self.splicer = splicer

    def on_event(self, events: int) -> None:
        # The hot path: every read of every spliced connection comes through here, so the read is written out in
        # place rather than called.
        splicer = self.splicer
        if self.pending and events & EPOLLOUT:
            splicer.writable(self)
            if self.fd < 0:
                return
        if not events & EPOLLIN:
            if events & EPOLLERR_OR_HUP:
                splicer.close_pair(self)
            return
        if events & PEER_CLOSED:
            self.peer_closed = True
        peer = self.peer
        while not peer.pending and not self.got_eof:  # else writable() reads on once the peer has taken it
            try:
                count = self.sock.recv_into(splicer.buffer)
            except BlockingIOError:
                return
            except OSError:
                splicer.close_pair(self)
                return
            self.quiet_ticks = 0
            if not count:
                splicer.got_eof(self)
                return
            splicer.send(peer, splicer.view[:count])
            if self.fd < 0:
                return  # the send failed, and closed the pair
            if count == READ_SIZE:
                splicer.loop.ready(self)  # more may be waiting: after the other connections' turn
                return
            if not self.peer_closed:
                return  # a short read took all there was; the next arrival is a new edge
            # else the EOF came with this data, and no edge will report it again: read it now


class Splicer:
    """Copies between the sides of every spliced pair of one epoll set."""

    def __init__(self, loop: Loop, on_pair_closed: Callable[[Side], None]) -> None:
        self.loop = loop
        self.on_pair_closed = on_pair_closed
        self.buffer = bytearray(READ_SIZE)
        self.view = memoryview(self.buffer)

    def pair(self, client: _socket.socket, upstream: _socket.socket, first_bytes: bytes,
             client_missed: int = 0, upstream_missed: int = 0) -> Side:
        """Splice two connected sockets, sending `first_bytes` upstream first; returns the client's side.

        Both must be on the epoll set already, the client registered for READ_EVENTS and the upstream for
        READ_WRITE_EVENTS. `*_missed` are the events epoll reported for each since it was last read (its edges,
        which will not be reported again): they are handled here."""
        client_side, upstream_side = Side(client, self, False), Side(upstream, self, True)
        client_side.peer, upstream_side.peer = upstream_side, client_side
        handlers = self.loop.handlers
        handlers[client_side.fd] = client_side
        handlers[upstream_side.fd] = upstream_side
        self.send(upstream_side, first_bytes)
        if upstream_missed and upstream_side.fd >= 0:
            upstream_side.on_event(upstream_missed)
        if client_missed and client_side.fd >= 0:
            client_side.on_event(client_missed)
        return client_side

    def got_eof(self, side: Side) -> None:
        side.got_eof = True
        peer = side.peer
        if peer.got_eof:
            if not side.pending:
                self.close_pair(side)
            return  # else writable() closes the pair once the rest is out
        try:
            peer.sock.shutdown(socket.SHUT_WR)
        except OSError:
            self.close_pair(side)

    def send(self, side: Side, data: bytes | memoryview) -> None:
        try:
            sent = side.sock.send(data)
        except BlockingIOError:
            sent = 0
        except OSError:
            self.close_pair(side)
            return
        if sent < len(data):  # its peer is not read until this side has taken the rest
            side.pending = bytes(data[sent:])
            if not side.watches_out:
                side.watches_out = True
                self.loop.epoll.modify(side.fd, READ_WRITE_EVENTS)

    def writable(self, side: Side) -> None:
        data, side.pending = side.pending, b""
        self.send(side, data)
        if side.pending or side.fd < 0:
            return
        peer = side.peer
        if side.got_eof and peer.got_eof:
            self.close_pair(side)  # the last bytes are out
            return
        peer.on_event(EPOLLIN)  # held back while this side was full; its edges have passed

    def close_pair(self, side: Side) -> None:
        close_later = self.loop.close_later
        for each in (side, side.peer):
            if each.fd >= 0:
                close_later(each.fd, each)
                each.fd = -1
        self.on_pair_closed(side)

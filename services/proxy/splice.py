"""Splicing two connections together once the ClientHello has been routed: the proxy's hot path.

Each spliced connection is a `Side` on the proxy's epoll set (event_loop.py). What one side receives is sent
straight to the other. What the other cannot take at once waits in the side's `pending`, and the first side
is not read again until that has drained. So each direction holds at most one read's worth
(READ_SIZE) and a slow reader never makes the proxy buffer without bound.

Why a bare epoll loop and not asyncio transports (which this proxy used until the eleventh session): with uvloop,
the loop's wake-ups, transports, futures and the task of each upstream connect cost the proxy 1.42-1.61x nginx's
CPU per new connection (bench/bench_passthrough.py). A forwarder that only accepts, connects and splices with this
module measures 1.06-1.15x (--floor), and the proxy on this loop 1.34-1.41x, in the same runs.

Half-close: EOF from one side is passed on as a write shutdown to the other, and the other direction keeps
flowing; the pair is closed once both sides have sent EOF and nothing is left to write, or when either side
fails.
"""
from __future__ import annotations

import _socket
import select
import socket
from typing import Callable

EPOLLIN, EPOLLOUT = select.EPOLLIN, select.EPOLLOUT
EPOLLERR_OR_HUP = select.EPOLLERR | select.EPOLLHUP

# One read per event at most this big; with the kernel's socket buffers this keeps a fast sender busy without
# letting one connection hold more than this much of the proxy's memory per direction.
READ_SIZE = 256 * 1024


class Side:
    """One connection of a spliced pair."""

    __slots__ = ("sock", "fd", "peer", "pending", "got_eof", "quiet_ticks", "splicer")

    def __init__(self, sock: _socket.socket, splicer: Splicer) -> None:
        self.sock = sock
        self.fd = sock.fileno()
        self.peer: Side = None  # type: ignore[assignment]  # linked before any event
        self.pending = b""  # received from the peer, not yet taken by this side's socket
        self.got_eof = False
        self.quiet_ticks = 0  # idle sweeps since this side last received data
        self.splicer = splicer

    def on_event(self, events: int) -> None:
        if events & EPOLLOUT:
            self.splicer.writable(self)
        elif events & EPOLLIN:
            self.splicer.readable(self)
        elif events & EPOLLERR_OR_HUP:
            self.splicer.close_pair(self)


class Splicer:
    """Copies between the sides of every spliced pair of one epoll set."""

    def __init__(self, epoll: select.epoll, handlers: dict[int, object], close_later: Callable[[int, Side], None],
                 on_pair_closed: Callable[[Side], None]) -> None:
        self.epoll = epoll
        self.handlers = handlers  # fd -> what handles its events (the loop's table)
        self.close_later = close_later  # forgets the fd's handler, closes the socket after the batch of events
        self.on_pair_closed = on_pair_closed
        self.buffer = bytearray(READ_SIZE)
        self.view = memoryview(self.buffer)

    def pair(self, client: _socket.socket, upstream: _socket.socket, first_bytes: bytes) -> Side:
        """Splice two connected sockets (both already on the epoll set), sending `first_bytes` upstream first;
        returns the client's side."""
        client_side, upstream_side = Side(client, self), Side(upstream, self)
        client_side.peer, upstream_side.peer = upstream_side, client_side
        self.handlers[client_side.fd] = client_side
        self.handlers[upstream_side.fd] = upstream_side
        self.send(upstream_side, first_bytes)
        if upstream_side.fd >= 0 and not upstream_side.pending:  # else send() closed the pair, or watches it
            self.watch(client_side)
            self.watch(upstream_side)
        return client_side

    def readable(self, side: Side) -> None:
        try:
            count = side.sock.recv_into(self.buffer)
        except BlockingIOError:
            return
        except OSError:
            self.close_pair(side)
            return
        peer = side.peer
        side.quiet_ticks = 0
        if count:
            self.send(peer, self.view[:count])
            return
        side.got_eof = True
        if peer.got_eof:
            if side.pending:
                self.watch(side)  # writable() closes the pair once the rest is out
            else:
                self.close_pair(side)
            return
        try:
            peer.sock.shutdown(socket.SHUT_WR)
        except OSError:
            self.close_pair(side)
            return
        self.watch(side)

    def send(self, side: Side, data: bytes | memoryview) -> None:
        try:
            sent = side.sock.send(data)
        except BlockingIOError:
            sent = 0
        except OSError:
            self.close_pair(side)
            return
        if sent < len(data):  # stop reading the peer until this side has taken the rest
            side.pending = bytes(data[sent:])
            self.watch(side)
            self.watch(side.peer)

    def writable(self, side: Side) -> None:
        data, side.pending = side.pending, b""
        self.send(side, data)
        if side.pending or side.fd < 0:
            return
        if side.got_eof and side.peer.got_eof:
            self.close_pair(side)  # the last bytes are out
            return
        self.watch(side)
        self.watch(side.peer)

    def watch(self, side: Side) -> None:
        """Wait for a side to take what is pending for it, and read it while its peer has nothing pending."""
        reading = not side.got_eof and not side.peer.pending
        self.epoll.modify(side.fd, (EPOLLOUT if side.pending else 0) | (EPOLLIN if reading else 0))

    def close_pair(self, side: Side) -> None:
        for each in (side, side.peer):
            if each.fd >= 0:
                self.close_later(each.fd, each)
                each.fd = -1
        self.on_pair_closed(side)

"""Splicing two TCP connections together once the ClientHello has been routed: the proxy's hot path.

Each connection's protocol writes what it receives straight into the other connection's transport:
no task, no future and no extra buffer per chunk. Measured with minimal uvloop forwarders between a TLS
client and an nginx https backend on this machine (2 cores): this design cost 0.36 s of CPU per GiB
and 158 µs per new connection, a StreamReader/StreamWriter copy loop per direction 0.52 s/GiB and
198 µs, and os.splice() through a pipe pair per direction 0.32 s/GiB but 230 µs (the pipes and the
raw-fd callbacks cost more than the copies they save on loopback). Flow control comes from the transports: when
one side's write buffer passes its high-water mark, its protocol's pause_writing stops reading from the
other side until the buffer drains, so a slow reader never makes the proxy buffer without bound.

Half-close: EOF from one side is passed on as a write shutdown to the other, and the other direction
keeps flowing; the pair is closed once both sides have sent EOF, or either side closes or fails.
"""
from __future__ import annotations

import asyncio
from typing import Callable

# Per direction; with the kernel's socket buffers this keeps a fast sender busy without letting one
# connection hold more than this much of the proxy's memory.
WRITE_BUFFER_HIGH_WATER = 256 * 1024


class SpliceHalf(asyncio.Protocol):
    """The receiving end of one connection of a pair: what it receives goes out through `peer`."""

    __slots__ = ("transport", "peer", "quiet_ticks", "got_eof", "lost", "on_closed")

    def __init__(self, peer: SpliceHalf | None = None,
                 on_closed: Callable[[SpliceHalf], None] | None = None) -> None:
        self.transport: asyncio.Transport = None  # type: ignore[assignment]  # set before any callback
        self.peer: SpliceHalf = peer  # type: ignore[assignment]  # linked before data can flow
        self.quiet_ticks = 0  # idle sweeps since this side last received data
        self.got_eof = False
        self.lost = False
        self.on_closed = on_closed

    def attach(self, transport: asyncio.Transport) -> None:
        self.transport = transport
        transport.set_write_buffer_limits(high=WRITE_BUFFER_HIGH_WATER)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.attach(transport)  # type: ignore[arg-type]

    def data_received(self, data: bytes) -> None:
        try:
            self.peer.transport.write(data)
        except RuntimeError:
            # uvloop refuses writes to a transport closed earlier in this same loop iteration (the
            # peer reset); its connection_lost, which closes us, is already scheduled.
            self.transport.abort()
        self.quiet_ticks = 0

    def eof_received(self) -> bool:
        self.got_eof = True
        peer = self.peer
        if peer.got_eof or peer.transport.is_closing():
            peer.transport.close()
            return False  # closes our transport too
        peer.transport.write_eof()
        return True  # keep our transport open: the other direction may still be sending to it

    def pause_writing(self) -> None:
        self.peer.transport.pause_reading()

    def resume_writing(self) -> None:
        self.peer.transport.resume_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        peer = self.peer
        if exc is None:
            peer.transport.close()  # flushes what is still buffered for the peer first
        else:
            peer.transport.abort()
        if peer.lost:
            # Both are gone: unlink them so reference counting frees the pair without waiting for the GC.
            self.peer = peer.peer = None  # type: ignore[assignment]
        if self.on_closed is not None:
            self.on_closed(self)

    def abort_pair(self) -> None:
        self.transport.abort()
        self.peer.transport.abort()


def link(client: SpliceHalf, upstream: SpliceHalf) -> None:
    client.peer = upstream
    upstream.peer = client

"""TLS that ends in the proxy: a TLS listener in Terminate mode hands a host's connections here, by SNI like the
passthrough hosts. The handshake is made with the host's certificate (the table's context), and the plain stream
goes to the TLSRoute's backend, both ways, on the proxy's connection loop (event_loop.py).

Why here and not in nginx's stream module: the proxy already routes by SNI from a table it takes without a reload
(weights, wildcards, certificates), while nginx 1.22's stream module has no Lua to choose a certificate or a
backend per connection, so every route or certificate change would be a reload. The cost, measured with
bench/bench_terminate.py (BENCHMARKS.md), is OpenSSL's handshake, as in nginx; Python adds the copies through the
TLS object's memory buffers.

The TLS object (ssl.SSLObject) reads from and writes to memory buffers; this module moves bytes between those and
the two sockets. Both sockets are on the epoll set edge-triggered for reading and writing, so each is read until
it has nothing more (or until what it gave is still waiting to be taken by the other side: then it is read again
once that is out, as the relay does for passed-through pairs). Upstream bytes wait until the handshake is done. A close_notify or an EOF
from either side is passed on as a write shutdown (with a close_notify towards the client); the pair is closed once
both directions have ended and nothing is left to write, or when either side fails.

A backend with a BackendTLSPolicy (table.py BackendTls) gets the plain stream over TLS again, through a second TLS
object, client side: its handshake starts once connected, beside the client's, and the client's bytes wait until
both are done. A backend whose certificate does not verify for the policy's CAs and name gets no byte of the
client's: the client's connection is closed, counted (backend_tls_refused) and logged.
"""
from __future__ import annotations

import _socket
import logging
import socket
import ssl
from typing import Protocol

from services.common.logs import kv
from services.proxy.event_loop import EPOLLERR_OR_HUP, EPOLLIN, EPOLLOUT, READ_SIZE, READ_WRITE_EVENTS, EventLoop
from services.proxy.table import BackendTls

log = logging.getLogger(__name__)


class Counts(Protocol):
    backend_tls_refused: int  # backends whose certificate did not verify: their clients' connections closed


class Owner(Protocol):
    """What a termination needs of the server that made it."""

    loop: EventLoop
    read_buffer: bytearray  # one read, which this loop's connections share
    read_view: memoryview  # of read_buffer
    terminated: set[TlsTermination]

    @property
    def counters(self) -> Counts: ...


def _plain_from(tls: ssl.SSLObject) -> tuple[bytes, bool] | None:
    """The plain bytes `tls` has decrypted so far, and whether its peer ended the TLS session (close_notify); None
    on a TLS error."""
    chunks: list[bytes] = []
    while True:
        try:
            data = tls.read(READ_SIZE)
        except ssl.SSLWantReadError:
            break
        except ssl.SSLZeroReturnError:
            return b"".join(chunks), True
        except ssl.SSLError:
            return None
        if not data:
            break
        chunks.append(data)
    return b"".join(chunks), False


class _End:
    """One socket of a terminated connection, as the epoll set knows it."""

    __slots__ = ("sock", "fd", "termination", "is_client", "pending", "ended", "shut_after_pending")

    def __init__(self, sock: _socket.socket, termination: TlsTermination, is_client: bool) -> None:
        self.sock, self.fd, self.termination, self.is_client = sock, sock.fileno(), termination, is_client
        self.pending = b""  # bytes for this socket that it has not taken yet
        self.ended = False  # no more bytes come from this socket (EOF, or the client's close_notify)
        self.shut_after_pending = False  # the other side ended: shut this one's write side once `pending` is out

    def on_event(self, events: int) -> None:
        self.termination.on_event(self, events)


class _BackendSession:
    """The TLS object towards a backend (client side), between the upstream socket and the plain stream."""

    __slots__ = ("tls", "into_tls", "out_of_tls", "server_name", "ready")

    def __init__(self, backend: BackendTls) -> None:
        self.into_tls, self.out_of_tls = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.tls = backend.context.wrap_bio(self.into_tls, self.out_of_tls, server_side=False,
                                            server_hostname=backend.server_name)
        self.server_name = backend.server_name
        self.ready = False  # handshake done, certificate verified


class TlsTermination:
    __slots__ = ("owner", "client", "upstream", "tls", "into_tls", "out_of_tls", "handshaken", "quiet_ticks",
                 "backend")

    def __init__(self, owner: Owner, client: _socket.socket, upstream: _socket.socket, context: ssl.SSLContext,
                 first_bytes: bytes, *, upstream_missed: int, backend: BackendTls | None = None,
                 client_registered: bool = True) -> None:
        """`client` is on the epoll set when `client_registered` (registered for reading), `upstream` connected and
        registered for reading and writing; `first_bytes` the client's bytes read so far (its ClientHello); `upstream_missed`: the events
        epoll reported for the upstream since, which it will not report again; `backend`: the upstream's TLS (None:
        plain). The client is read here in any case: reading an edge-triggered socket until it has nothing more
        needs no event."""
        self.owner = owner
        self.client, self.upstream = _End(client, self, True), _End(upstream, self, False)
        self.into_tls, self.out_of_tls = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.tls = context.wrap_bio(self.into_tls, self.out_of_tls, server_side=True)
        self.handshaken = False
        self.quiet_ticks = 0  # idle sweeps (server.py) since data last came either way
        self.backend = None if backend is None else _BackendSession(backend)
        loop = owner.loop
        loop.handlers[self.client.fd] = self.client
        loop.handlers[self.upstream.fd] = self.upstream
        if client_registered:
            loop.epoll.modify(self.client.fd, READ_WRITE_EVENTS)
        else:
            loop.epoll.register(self.client.fd, READ_WRITE_EVENTS)
        owner.terminated.add(self)
        if self.backend is not None and not self._from_backend():  # its ClientHello
            return
        self.into_tls.write(first_bytes)
        if self._from_tls():
            self._read(self.client)  # the rest of the client's bytes, if any came meanwhile
        if upstream_missed and self.upstream.fd >= 0:
            self.on_event(self.upstream, upstream_missed)

    def on_event(self, end: _End, events: int) -> None:
        if end.pending and events & EPOLLOUT:
            self._flush(end)
        if end.fd < 0:
            return
        if events & EPOLLIN:
            self._read(end)
        elif events & EPOLLERR_OR_HUP:
            self.close()

    def _read(self, end: _End) -> None:
        """Read `end` until it has nothing more, or until the other side has bytes waiting."""
        other = self.upstream if end.is_client else self.client
        backend = self.backend
        if end.is_client:
            if self.handshaken and backend is not None and not backend.ready:
                return  # the client's bytes wait for the backend's handshake; read once it is done
        elif not self.handshaken and (backend is None or backend.ready):
            return  # read once the client's handshake is done (the backend's own handshake is read meanwhile)
        buffer, view = self.owner.read_buffer, self.owner.read_view
        while not other.pending and not end.ended and end.fd >= 0:
            try:
                count = end.sock.recv_into(buffer)
            except BlockingIOError:
                return
            except OSError:
                self.close()
                return
            self.quiet_ticks = 0
            if not count:
                self._ended(end)
                return
            if end.is_client:
                self.into_tls.write(view[:count])
                self._from_tls()
            elif backend is not None:
                backend.into_tls.write(view[:count])
                if not self._from_backend():
                    return
            else:
                try:
                    self.tls.write(view[:count])
                except ssl.SSLError:
                    self.close()
                    return
                self._send(self.client, self.out_of_tls.read())

    def _from_tls(self) -> bool:
        """Run the TLS object on what the client sent: the handshake, then plain bytes to the upstream. False when
        the connection was closed."""
        tls = self.tls
        if not self.handshaken:
            try:
                tls.do_handshake()
            except ssl.SSLWantReadError:
                self._send(self.client, self.out_of_tls.read())
                return self.client.fd >= 0
            except (ssl.SSLError, ValueError) as err:
                log.debug("TLS handshake failed; closing", extra={"error": str(err)})
                self.close()
                return False
            self.handshaken = True
            self._send(self.client, self.out_of_tls.read())
            if self.client.fd < 0:
                return False
            if self.backend is not None:
                if not self._from_backend():  # what the backend's TLS object holds for the client
                    return False
                if not self.backend.ready:
                    return True  # the client's bytes wait for the backend's handshake
            self._read(self.upstream)  # what the backend sent first waited for the handshake
        elif self.backend is not None and not self.backend.ready:
            return self.client.fd >= 0
        drained = _plain_from(tls)
        if drained is None:
            self.close()
            return False
        plain, closed_by_client = drained
        if self.out_of_tls.pending:  # the TLS object's own answers (a key update)
            self._send(self.client, self.out_of_tls.read())
        if plain and self.upstream.fd >= 0:
            self._to_upstream(plain)
        if closed_by_client and self.client.fd >= 0:
            self._ended(self.client)
        return self.client.fd >= 0

    def _to_upstream(self, plain: bytes) -> None:
        backend = self.backend
        if backend is None:
            self._send(self.upstream, plain)
            return
        try:
            backend.tls.write(plain)
        except ssl.SSLError:
            self.close()
            return
        self._send(self.upstream, backend.out_of_tls.read())

    def _from_backend(self) -> bool:
        """Run the backend's TLS object on what the backend sent: its handshake (then the client's bytes that
        waited), then plain bytes to the client once the client's handshake is done. False when the connection was
        closed."""
        backend = self.backend
        assert backend is not None
        tls = backend.tls
        if not backend.ready:
            try:
                tls.do_handshake()
            except ssl.SSLWantReadError:
                self._send(self.upstream, backend.out_of_tls.read())
                return self.upstream.fd >= 0
            except ssl.SSLCertVerificationError as err:
                self._refused(backend, err.verify_message or str(err))
                return False
            except (ssl.SSLError, ValueError) as err:
                self._refused(backend, str(err))
                return False
            backend.ready = True
            self._send(self.upstream, backend.out_of_tls.read())
            if self.upstream.fd < 0:
                return False
            if self.handshaken:
                if not self._from_tls():  # the client's bytes that waited
                    return False
                self._read(self.client)
                if self.client.fd < 0:
                    return False
        if not self.handshaken:
            return True  # the backend's bytes wait in its TLS object for the client's handshake
        drained = _plain_from(tls)
        if drained is None:
            self.close()
            return False
        plain, closed_by_backend = drained
        if backend.out_of_tls.pending:  # the TLS object's own answers (a key update)
            self._send(self.upstream, backend.out_of_tls.read())
        if plain and self.client.fd >= 0:
            try:
                self.tls.write(plain)
            except ssl.SSLError:
                self.close()
                return False
            self._send(self.client, self.out_of_tls.read())
        if closed_by_backend and self.upstream.fd >= 0:
            self._ended(self.upstream)
        return self.upstream.fd >= 0 and self.client.fd >= 0

    def _refused(self, backend: _BackendSession, error: str) -> None:
        """The backend's certificate (or handshake) failed: close the client's connection, count and log it."""
        self.owner.counters.backend_tls_refused += 1
        try:
            address = self.upstream.sock.getpeername()
            upstream = f"{address[0]}:{address[1]}"
        except OSError:
            upstream = "?"
        log.warning("TLS backend refused: its certificate does not verify; closing the client's connection",
                    extra=kv(upstream=upstream, name=backend.server_name, error=error))
        self.close()

    def _ended(self, end: _End) -> None:
        """No more bytes come from `end`: pass it on to the other side, as a close_notify towards the client."""
        if not self.handshaken or (self.backend is not None and not self.backend.ready):
            self.close()  # one side left mid-handshake: nothing was passed on yet
            return
        end.ended = True
        other = self.upstream if end.is_client else self.client
        if not end.is_client:
            try:
                self.tls.unwrap()
            except (ssl.SSLError, ValueError):
                pass  # the close_notify is written all the same; the client's comes later, or never
            self._send(self.client, self.out_of_tls.read())
        elif self.backend is not None and other.fd >= 0:
            try:
                self.backend.tls.unwrap()
            except (ssl.SSLError, ValueError):
                pass  # as above, towards the backend
            self._send(self.upstream, self.backend.out_of_tls.read())
        if other.fd < 0:
            return
        if other.pending:
            other.shut_after_pending = True
        else:
            self._shut(other)

    def _shut(self, end: _End) -> None:
        """Nothing more goes to `end`: shut its write side, or close the pair when nothing comes from it either."""
        other = self.upstream if end.is_client else self.client
        if end.ended and not other.pending:
            self.close()  # both directions ended, and everything is out
            return
        try:
            end.sock.shutdown(socket.SHUT_WR)
        except OSError:
            self.close()

    def _send(self, end: _End, data: bytes) -> None:
        if not data:
            return
        if end.pending:
            end.pending += data
            return
        try:
            sent = end.sock.send(data)
        except BlockingIOError:
            sent = 0
        except OSError:
            self.close()
            return
        if sent < len(data):
            end.pending = data[sent:]

    def _flush(self, end: _End) -> None:
        data, end.pending = end.pending, b""
        self._send(end, data)
        if end.pending or end.fd < 0:
            return
        if end.shut_after_pending:
            self._shut(end)
            if end.fd < 0:
                return
        other = self.upstream if end.is_client else self.client
        self._read(other)  # held back while this side was full; its edges have passed

    def close(self) -> None:
        """Close both sockets (after the loop's current batch of events)."""
        loop = self.owner.loop
        for end in (self.client, self.upstream):
            if end.fd >= 0:
                loop.close_later(end.fd, end)
                end.fd = -1
        self.owner.terminated.discard(self)


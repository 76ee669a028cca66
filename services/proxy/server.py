"""The passthrough listener: read each connection's ClientHello, route on its SNI, relay.

Per connection:
1. when the table's config says `use_proxy_protocol`, an inbound PROXY v1/v2 header (from the load
   balancer) gives the real client address;
2. the ClientHello is read within a size bound (relay/hello.c, in the relay module) and a time bound (the hello
   timeout);
   connections still waiting for theirs are capped per process: past the cap the oldest is closed, so a
   flood of idle connections cannot crowd out clients that do send a hello;
3. a host of the table (table.py: exact name, then the longest wildcard) goes to one of its backends (by
   weight), to its endpoints (round robin, the next one on connect failure); any other host, no SNI, or not TLS
   at all goes to nginx's passthrough TLS socket behind a PROXY v1 header that carries the real client address,
   where nginx terminates TLS or answers with its default server. That is a Unix socket in a root-only directory
   (services/nginxconf/paths.py): nginx trusts the address in the header, so nobody but this proxy may connect
   there;
4. passed through: both connections go to the C relay (relay.py), which replays the bytes read so far upstream
   and copies both ways from then on. A host whose TLS ends here (a TLS listener in Terminate mode) is handshaken with its certificate instead, and the
   plain stream goes upstream (terminate.py).

Connections live on the connection loop's thread (event_loop.py); the methods of PassthroughServer are called
from the asyncio loop. The table is looked up per connection, so table changes apply to new connections and
never touch established ones.
"""
from __future__ import annotations

import asyncio
import _socket
import errno
import functools
import logging
import os
import select
import socket
import ssl
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

from services.common.ipv6 import ipv6_available, is_no_ipv6_error
from services.common.logs import kv
from services.common.settings import ProxySettings
from services.proxy.event_loop import (EPOLLERR_OR_HUP, EPOLLIN, EPOLLOUT, PEER_CLOSED, READ_EVENTS, READ_SIZE,
                                       READ_WRITE_EVENTS, Deadlines, EventLoop)
from services.proxy.proxy_protocol import Address, ProxyProtocolError, parse_header, v1_header
from services.proxy.relay import NO_SNI, NOT_TLS, Relay
from services.proxy.table import BackendTls, Endpoint, RoutingTable
from services.proxy.terminate import TlsTermination

log = logging.getLogger(__name__)

LISTEN_BACKLOG = 4096
# An established connection is closed after this many idle sweeps without data either way; sweeps run
# every idle_timeout / IDLE_SWEEPS, so the cut comes between 1 and 1.25 idle timeouts.
IDLE_SWEEPS = 4
ACCEPT_PAUSE_SECONDS = 0.1  # out of descriptors: stop accepting this long rather than spin
DRAIN_POLL_SECONDS = 0.05
NONBLOCKING_STREAM = socket.SOCK_STREAM | socket.SOCK_NONBLOCK
# What each connection uses, as module globals: a lookup each rather than two.
AF_INET, AF_INET6, AF_UNIX, EINPROGRESS = socket.AF_INET, socket.AF_INET6, socket.AF_UNIX, errno.EINPROGRESS
IPPROTO_TCP, TCP_NODELAY, EPOLLERR = socket.IPPROTO_TCP, socket.TCP_NODELAY, select.EPOLLERR

# Where a connection is spliced to: a passthrough endpoint (address, port), or nginx's Unix socket (its path).
Upstream = Endpoint | str


@dataclass
class Counters:
    accepted: int = 0
    passthrough: int = 0  # spliced to a passthrough backend
    terminated: int = 0  # TLS ended here, the plain stream to a backend (TLS listeners in Terminate mode)
    to_nginx: int = 0  # spliced to nginx: other hosts, no SNI, not TLS
    no_sni: int = 0
    not_tls: int = 0
    malformed: int = 0  # bad ClientHello or PROXY header: closed
    hello_timeouts: int = 0  # no complete ClientHello in time: closed
    shed_pending: int = 0  # closed because too many connections were waiting for their ClientHello
    no_endpoints: int = 0  # passthrough host without endpoints: closed
    backend_tls_refused: int = 0  # a terminated host's TLS backend whose certificate did not verify: closed
    connect_failures: int = 0  # one upstream connect attempt failed
    unreachable: int = 0  # every upstream of a connection failed: closed
    idle_closed: int = 0  # established connections closed after the idle timeout
    relay_failed: int = 0  # relayed pairs closed on an error of either socket (a reset, a refused send)
    bytes_to_upstream: int = 0  # relayed from clients (their ClientHello included)
    bytes_to_client: int = 0  # relayed from upstreams


class PassthroughServer:
    def __init__(self, table: RoutingTable, *, nginx_socket: str | Path,
                 options: ProxySettings = ProxySettings()) -> None:
        self.table = table
        self.options = options
        self.nginx: tuple[Upstream, ...] = (str(nginx_socket),)
        self.counters = Counters()
        # Insertion-ordered, so the first key is the connection that has waited longest for its hello.
        self.pending: dict[_Incoming, None] = {}
        self.terminated: set[TlsTermination] = set()  # each connection whose TLS ends here
        self.loop = EventLoop()
        self.relay = Relay(self.loop)  # the passed-through pairs; raises RelayUnavailable without its library
        self.hello = self.relay.hello
        # What connections read before they are relayed, or while their TLS ends here, one read at a time.
        self.read_buffer = bytearray(READ_SIZE)
        self.read_view = memoryview(self.read_buffer)
        self.hello_deadlines = Deadlines(self.loop, options.hello_timeout, _Incoming.hello_expired)
        self.connect_deadlines = Deadlines(self.loop, options.connect_timeout, _Connecting.timed_out)
        self._listeners: list[_Listener] = []
        self.port = 0  # the port listened on, once started
        self.ipv6 = False  # whether it is listened on over IPv6 too (when the machine has IPv6)

    async def start(self, port: int, host: str | None = None, ipv6: bool = True) -> None:
        """Listen on `port` (every address when `host` is None: IPv4 and, with `ipv6`, IPv6 on a socket of its
        own) with SO_REUSEPORT, so several proxy processes share it and the kernel spreads connections over them;
        then start the connection loop."""
        opened: list[_Listener] = []
        try:
            for family, kind, proto, _, address in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                                      flags=socket.AI_PASSIVE):
                if family == socket.AF_INET6 and not ipv6:
                    continue
                listener = self._open(family, kind, proto, address)
                if listener is not None:
                    opened.append(listener)
        except BaseException:
            for listener in opened:
                listener.sock.close()
            raise
        self.port, self.ipv6 = port, ipv6
        for listener in opened:
            self._accept_on(listener)
        self.loop.call_later(self.options.idle_timeout / IDLE_SWEEPS, self._sweep_idle)
        self.loop.start("connections")

    def _open(self, family: int, kind: int, proto: int, address: Any) -> _Listener | None:
        """A listening socket on `address`; None (logged) for IPv6 on a machine without it."""
        sock = None
        try:
            sock = socket.socket(family, kind, proto)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            # Accepted connections inherit it: small TLS records go out at once, one system call fewer each.
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.bind(address)
            sock.listen(LISTEN_BACKLOG)
            sock.setblocking(False)
        except OSError as err:
            if sock is not None:
                sock.close()
            if family == socket.AF_INET6 and is_no_ipv6_error(err):
                log.warning("this machine has no IPv6: listening on IPv4 only", extra=kv(error=err))
                return None
            raise
        return _Listener(self, sock)

    def _accept_on(self, listener: _Listener) -> None:
        self._listeners.append(listener)
        self.loop.handlers[listener.sock.fileno()] = listener
        self.loop.epoll.register(listener.sock.fileno(), EPOLLIN)

    def listen_ipv6(self, enabled: bool) -> None:
        """Open or close the IPv6 listener once started, when the ConfigMap's disable-ipv6 changes."""
        if enabled == self.ipv6:
            return
        self.ipv6 = enabled

        def change() -> None:
            ipv6 = [listener for listener in self._listeners if listener.family == socket.AF_INET6]
            if enabled and not ipv6 and ipv6_available():
                try:
                    listener = self._open(socket.AF_INET6, socket.SOCK_STREAM, 0, ("::", self.port))
                except OSError as err:
                    log.error("cannot listen on IPv6", extra=kv(port=self.port, error=err))
                    return
                if listener is not None:
                    self._accept_on(listener)
                    log.info("listening on IPv6 (disable-ipv6 is off)", extra=kv(port=self.port))
            elif ipv6 and not enabled:
                for listener in ipv6:
                    self._listeners.remove(listener)
                    listener.close()
                log.info("closed the IPv6 listener (disable-ipv6)", extra=kv(port=self.port))
        self.loop.call_soon_threadsafe(change)

    @property
    def established(self) -> int:
        """Connections past their ClientHello and upstream connect: relayed, or with their TLS ended here."""
        return self.relay.active + len(self.terminated)

    def status(self) -> dict[str, Any]:
        relayed = self.relay.counters()
        counters = self.counters
        counters.relay_failed = relayed.failed
        counters.passthrough = relayed.opened - counters.to_nginx
        counters.bytes_to_upstream, counters.bytes_to_client = relayed.bytes_to_upstream, relayed.bytes_to_client
        return {"active": self.established, "pending_hellos": len(self.pending), **asdict(counters)}

    def stop_accepting(self) -> None:
        """Close the listeners and the connections that have not sent their ClientHello yet."""
        def stop() -> None:
            for listener in self._listeners:
                listener.close()
            for incoming in list(self.pending):
                incoming.close()
        self.loop.call_soon_threadsafe(stop)

    async def drain(self) -> None:
        """Let established connections finish for the drain timeout, then cut the rest and stop the loop."""
        deadline = asyncio.get_running_loop().time() + self.options.drain_timeout
        while self.established and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(DRAIN_POLL_SECONDS)

        def cut() -> None:
            self.relay.close_all()
            for termination in list(self.terminated):
                termination.close()
        self.loop.call_soon_threadsafe(cut)
        self.loop.stop_threadsafe()
        await asyncio.to_thread(self.loop.join, 1.0)

    def _sweep_idle(self) -> None:
        self.counters.idle_closed += self.relay.sweep(IDLE_SWEEPS)
        for termination in list(self.terminated):
            termination.quiet_ticks += 1
            if termination.quiet_ticks > IDLE_SWEEPS:
                self.counters.idle_closed += 1
                termination.close()
        self.loop.call_later(self.options.idle_timeout / IDLE_SWEEPS, self._sweep_idle)

    def route(self, incoming: _Incoming, verdict: str | int, first_bytes: bytes) -> None:
        """Pick the upstream for a connection whose ClientHello is complete (`verdict`: its SNI host name, NO_SNI or
        NOT_TLS; `first_bytes`: what it sent so far), then connect and splice."""
        counters = self.counters
        destination = self.table.lookup(verdict) if isinstance(verdict, str) else None
        tls = backend_tls = None
        targets: tuple[Upstream, ...]
        if destination is None:
            if verdict == NOT_TLS:
                counters.not_tls += 1
            elif verdict == NO_SNI:
                counters.no_sni += 1
            targets = self.nginx
            client, local = incoming.addresses()
            first_bytes = v1_header(client, local) + first_bytes
        else:
            targets = destination.targets()
            if not targets:
                counters.no_endpoints += 1
                log.info("passthrough host has no endpoints; closing", extra=kv(host=verdict))
                incoming.close()
                return
            tls = destination.tls
            if tls is not None:
                backend_tls = destination.backend_tls[destination.chosen]
        _Connecting(self, incoming, targets, first_bytes, tls, backend_tls).next_target()

    def relay_pair(self, incoming: _Incoming, upstream: _socket.socket, to_nginx: bool, first_bytes: bytes,
                   upstream_on_set: bool, upstream_missed: int) -> None:
        """Hand a routed client and its connected upstream to the relay (relay.Relay.add says how each may be on the
        epoll set)."""
        if to_nginx:
            self.counters.to_nginx += 1  # the passed-through are the relay's other pairs (status)
        client_on_set = incoming.registered
        try:
            self.relay.add(incoming.hand_over(), client_on_set, upstream.detach(), upstream_on_set, upstream_missed,
                           first_bytes)
        except OSError as err:  # out of memory, or of epoll's watches (fs.epoll.max_user_watches)
            log.warning("cannot relay a connection; closed", extra=kv(error=err))


class _Listener:
    __slots__ = ("server", "sock", "fd", "family", "accept_read", "wrap")

    def __init__(self, server: PassthroughServer, sock: socket.socket) -> None:
        self.server, self.sock, self.fd, self.family = server, sock, sock.fileno(), int(sock.family)
        self.accept_read = server.relay.accept_read
        # wrap(fd): the C socket type on an accepted descriptor, for connections that need one (the socket module's
        # Python wrapper costs microseconds a connection, for nothing used here).
        self.wrap = functools.partial(_socket.socket, self.family, socket.SOCK_STREAM, 0)

    def on_event(self, events: int) -> None:
        # One connection per event, as nginx without multi_accept: the epoll set reports the listener again
        # while more are waiting, and the connections already open get their turn in between.
        try:
            accepted = self.accept_read(self.fd)
        except OSError as err:
            if err.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                log.warning("cannot accept: out of resources; pausing", extra=kv(error=err))
                self._pause()
            return  # ECONNABORTED and the like: that client is gone
        if accepted is None:
            return  # taken by another process sharing the port
        _Incoming(self.server, accepted[0], self.wrap, accepted[1])

    def _pause(self) -> None:
        loop = self.server.loop
        loop.epoll.modify(self.sock.fileno(), 0)

        def resume() -> None:
            if self.sock.fileno() >= 0:  # not closed since (stop_accepting)
                loop.epoll.modify(self.sock.fileno(), EPOLLIN)
        loop.call_later(ACCEPT_PAUSE_SECONDS, resume)

    def close(self) -> None:
        if self.sock.fileno() >= 0:
            self.server.loop.close_later(self.sock.fileno(), self)


class _Incoming:
    """A client connection from accept until its ClientHello is complete; then the server routes it."""

    __slots__ = ("server", "fd", "wrap", "_sock", "raw", "needed", "proxy_bytes", "proxy_header", "waiting",
                 "registered")

    def __init__(self, server: PassthroughServer, fd: int, wrap: Callable[[int], _socket.socket],
                 first: bytes | None) -> None:
        """`first`: what the connection had sent when it was accepted (None: nothing yet; b"": an EOF or an error)."""
        self.server = server
        self.fd = fd
        self.wrap = wrap  # wrap(fd): the socket object, made only when needed (relay.Relay.accept_read: why)
        self._sock: _socket.socket | None = None
        self.raw: bytearray | None = None  # what it sent so far, while its hello is incomplete after a first read
        self.needed = 1  # bytes needed in all before the hello's verdict (relay/hello.c); 0 once routed
        self.proxy_bytes: bytearray | None = None  # collects an inbound PROXY header when one is due
        self.proxy_header: tuple[Address, Address] | None = None
        self.waiting = False  # in server.pending, with a deadline for its hello (and header)
        self.registered = False  # on the loop's epoll set (only when its hello was not whole at accept)
        server.counters.accepted += 1
        table = server.table
        if table.use_proxy_protocol:
            self.proxy_bytes = bytearray()
        # Read at accept, before registering: the hello has usually arrived by then, and then no event is needed
        # for it. What arrives from here on is reported once registered (epoll looks at the socket then).
        if first is not None:
            if not first:
                self.close()  # EOF before the hello is complete: nothing to route
                return
            if self._take(first):
                return  # closed, or routed: the relay (or the TLS termination) watches it from here
            if len(first) == READ_SIZE:
                self._read(False)  # there may be more (edge-triggered from here: all of it is read)
                if self.fd < 0 or not self.needed:
                    return
        loop = server.loop
        loop.handlers[fd] = self
        loop.epoll.register(fd, READ_EVENTS)
        self.registered = True
        self._wait(table.proxy_header_timeout)

    @property
    def sock(self) -> _socket.socket:
        sock = self._sock
        if sock is None:
            sock = self._sock = self.wrap(self.fd)
        return sock

    def _wait(self, proxy_header_timeout: float) -> None:
        """Start the bounds of waiting for the hello: its deadline, the per-process cap."""
        server = self.server
        self.waiting = True
        if self.proxy_bytes is not None:
            # proxy-protocol-header-timeout: a load balancer that sends no header in time is cut off early.
            server.loop.call_later(proxy_header_timeout, self._header_expired)
        pending = server.pending
        pending[self] = None
        if len(pending) > server.options.max_pending_hellos:
            server.counters.shed_pending += 1
            next(iter(pending)).close()
        server.hello_deadlines.add(self)

    def on_event(self, events: int) -> None:
        if events & EPOLLIN:
            if self.needed:  # else routed: what came is read once relayed (or by the termination)
                self._read(bool(events & PEER_CLOSED))
        elif events & EPOLLERR_OR_HUP:
            self.close()  # while connecting upstream, the attempt ends too (_Connecting)

    def _read(self, peer_closed: bool) -> None:
        """Read what has arrived (the socket is edge-triggered: all of it); route once the hello is complete."""
        server = self.server
        while True:
            try:
                count = self.sock.recv_into(server.read_buffer)
            except BlockingIOError:
                return
            except OSError:
                self.close()
                return
            if not count:
                self.close()  # EOF before the hello is complete: nothing to route
                return
            if self._take(bytes(server.read_view[:count])):
                return
            if count < READ_SIZE and not peer_closed:
                return  # all there was; the next arrival is a new edge

    def _take(self, data: bytes) -> bool:
        """Add bytes read; route once the hello is complete. Returns whether the connection is done here (routed, or
        closed)."""
        server = self.server
        try:
            if self.proxy_bytes is not None:
                data = self._take_proxy_header(data)
            if self.raw is not None:
                self.raw += data
                data = self.raw  # type: ignore[assignment]
            verdict = server.hello(data) if len(data) >= self.needed else self.needed
        except (server.relay.hello_error, ProxyProtocolError) as err:  # looked up only when raised
            server.counters.malformed += 1
            log.debug("closing connection", extra=kv(peer=self._peer(), error=err))
            self.close()
            return True
        if isinstance(verdict, str) or verdict <= 0:
            # What else waits (more, an EOF) is reported once the socket is on the relay's set.
            self.needed = 0
            if self.waiting:
                self._leave_pending()
            server.route(self, verdict, data if self.raw is None else bytes(data))
            return True
        self.needed = verdict
        if self.raw is None:
            self.raw = bytearray(data)
        return False

    def _take_proxy_header(self, data: bytes) -> bytes:
        """Collect the PROXY header; returns the bytes after it (empty while it is incomplete)."""
        buf = self.proxy_bytes
        buf += data  # type: ignore[operator]
        header = parse_header(buf)
        if header is None:
            return b""
        self.proxy_bytes = None
        if header.source is not None and header.destination is not None:
            self.proxy_header = (header.source, header.destination)
        return bytes(buf[header.length:])

    def _header_expired(self) -> None:
        if self.proxy_bytes is not None and self.fd >= 0:
            self.server.counters.hello_timeouts += 1
            log.debug("no PROXY header in time; closing", extra=kv(peer=self._peer()))
            self.close()

    def hello_expired(self) -> None:
        if self.waiting and self.fd >= 0:
            self.server.counters.hello_timeouts += 1
            log.debug("no ClientHello in time; closing", extra=kv(peer=self._peer()))
            self.close()

    def close(self) -> None:
        """Close the client connection (before it is spliced)."""
        self._leave_pending()
        if self.fd >= 0:
            self.server.loop.close_later(self.fd, self)
            self.fd = -1

    def hand_over(self) -> int:
        """Leave the loop's handlers (routed and connected): returns the socket's descriptor, which the caller owns
        now, on the epoll set still when `registered`."""
        if self.registered:
            del self.server.loop.handlers[self.fd]
        fd, self.fd = self.fd, -1
        if self._sock is not None:
            self._sock.detach()  # or the object would close the descriptor once freed
        return fd

    def _leave_pending(self) -> None:
        if self.waiting:
            self.waiting = False
            del self.server.pending[self]

    def addresses(self) -> tuple[Address, Address]:
        """(client, the address it connected to): from the PROXY header when there was one."""
        if self.proxy_header is not None:
            return self.proxy_header
        peer = self.sock.getpeername()
        local = self.sock.getsockname()
        return (peer[0], peer[1]), (local[0], local[1])

    def _peer(self) -> str:
        try:
            peer = self.sock.getpeername()
        except OSError:
            return "?"
        return f"{peer[0]}:{peer[1]}"


class _Connecting:
    """The upstream connection of a routed client, one target after the other until one answers."""

    __slots__ = ("server", "incoming", "targets", "first_bytes", "tls", "backend_tls", "index", "sock", "fd")

    def __init__(self, server: PassthroughServer, incoming: _Incoming, targets: tuple[Upstream, ...],
                 first_bytes: bytes, tls: ssl.SSLContext | None, backend_tls: BackendTls | None = None) -> None:
        self.server, self.incoming, self.targets, self.first_bytes = server, incoming, targets, first_bytes
        self.tls = tls  # the host's TLS ends here, with this context; None: passed through
        self.backend_tls = backend_tls  # with `tls`: the stream goes to the backend over TLS again; None: plain
        self.index = -1  # of the target being tried
        self.sock: _socket.socket = None  # type: ignore[assignment]
        self.fd = -1  # of the attempt under way

    def next_target(self) -> None:
        server, targets = self.server, self.targets
        while True:
            index = self.index = self.index + 1
            if index == len(targets):
                server.counters.unreachable += 1
                self.incoming.close()
                return
            target = targets[index]
            if isinstance(target, str):
                sock = _socket.socket(AF_UNIX, NONBLOCKING_STREAM)
            else:
                sock = _socket.socket(AF_INET6 if ":" in target[0] else AF_INET, NONBLOCKING_STREAM)
                sock.setsockopt(IPPROTO_TCP, TCP_NODELAY, 1)
            result = sock.connect_ex(target)
            if result == EINPROGRESS:
                break
            if result == 0:
                if self.tls is None:  # nginx's Unix socket, usually: connected at once
                    server.relay_pair(self.incoming, sock, targets is server.nginx, self.first_bytes, False, 0)
                    return
                break
            sock.close()
            self._failed(os.strerror(result))
        fd = self.fd = sock.fileno()
        self.sock = sock
        loop = server.loop
        loop.handlers[fd] = self
        loop.epoll.register(fd, READ_WRITE_EVENTS)  # EPOLLOUT: connected; as the relay and the termination need
        server.connect_deadlines.add(self)  # taken out when the attempt ends

    def on_event(self, events: int) -> None:
        if self.incoming.fd < 0:  # the client left meanwhile
            self._drop_attempt()
            return
        if events & EPOLLERR or not events & EPOLLOUT:
            error = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            self._drop_attempt()
            self._failed(os.strerror(error) if error else "connection closed")
            self.next_target()
            return
        server = self.server
        fd, self.fd = self.fd, -1  # connected: the relay or the termination owns the socket now
        del server.connect_deadlines.entries[self]
        incoming = self.incoming
        if self.tls is not None:
            server.counters.terminated += 1
            TlsTermination(server, incoming.sock, self.sock, self.tls, self.first_bytes,
                           upstream_missed=events & ~EPOLLOUT, backend=self.backend_tls,
                           client_registered=incoming.registered)
            return
        del server.loop.handlers[fd]
        server.relay_pair(incoming, self.sock, self.targets is server.nginx, self.first_bytes, True, events & ~EPOLLOUT)

    def _failed(self, error: str) -> None:
        self.server.counters.connect_failures += 1
        target = self.targets[self.index]
        log.warning("cannot connect upstream", extra=kv(
            upstream=target if isinstance(target, str) else f"{target[0]}:{target[1]}", error=error))

    def timed_out(self) -> None:
        """The attempt under way took longer than the connect timeout."""
        self._drop_attempt()
        if self.incoming.fd >= 0:
            self._failed("timeout")
            self.next_target()

    def _drop_attempt(self) -> None:
        server = self.server
        server.connect_deadlines.discard(self)
        server.loop.close_later(self.fd, self)
        self.fd = -1

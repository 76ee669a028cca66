"""The passthrough listener: read each connection's ClientHello, route on its SNI, splice.

Per connection:
1. when the table's config says `use_proxy_protocol`, an inbound PROXY v1/v2 header (from the load
   balancer) gives the real client address;
2. the ClientHello is read within a size bound (clienthello.py) and a time bound (the hello timeout);
   connections still waiting for theirs are capped per process: past the cap the oldest is closed, so a
   flood of idle connections cannot crowd out clients that do send a hello;
3. a passthrough host goes to its endpoints (round robin, the next one on connect failure); any other
   host, no SNI, or not TLS at all goes to nginx's passthrough TLS socket behind a PROXY v1 header that
   carries the real client address, where nginx terminates TLS or answers with its default server. That
   is a Unix socket in a root-only directory (services/nginxconf/paths.py): nginx trusts the address in the
   header, so nobody but this proxy may connect there;
4. the bytes read so far are replayed upstream and both connections are spliced (splice.py).

The table is looked up per connection, so table changes apply to new connections and never touch
established ones.
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from services.common.logs import kv
from services.common.settings import ProxySettings
from services.proxy.clienthello import ClientHelloError, ClientHelloReader, Hello, HelloKind
from services.proxy.proxy_protocol import Address, ProxyProtocolError, parse_header, v1_header
from services.proxy.splice import SpliceHalf, link
from services.proxy.table import Endpoint, RoutingTable

log = logging.getLogger(__name__)

LISTEN_BACKLOG = 4096
# An established connection is closed after this many idle sweeps without data either way; sweeps run
# every idle_timeout / IDLE_SWEEPS, so the cut comes between 1 and 1.25 idle timeouts.
IDLE_SWEEPS = 4

# Where a connection is spliced to: a passthrough endpoint (address, port), or nginx's Unix socket (its path).
Upstream = Endpoint | str


@dataclass
class Counters:
    accepted: int = 0
    passthrough: int = 0  # spliced to a passthrough backend
    to_nginx: int = 0  # spliced to nginx: other hosts, no SNI, not TLS
    no_sni: int = 0
    not_tls: int = 0
    malformed: int = 0  # bad ClientHello or PROXY header: closed
    hello_timeouts: int = 0  # no complete ClientHello in time: closed
    shed_pending: int = 0  # closed because too many connections were waiting for their ClientHello
    no_endpoints: int = 0  # passthrough host without endpoints: closed
    connect_failures: int = 0  # one upstream connect attempt failed
    unreachable: int = 0  # every upstream of a connection failed: closed
    idle_closed: int = 0


class PassthroughServer:
    def __init__(self, table: RoutingTable, *, nginx_socket: str | Path,
                 options: ProxySettings = ProxySettings()) -> None:
        self.table = table
        self.options = options
        self.nginx: tuple[Upstream, ...] = (str(nginx_socket),)
        self.counters = Counters()
        # Insertion-ordered, so the first key is the connection that has waited longest for its hello.
        self.pending: dict[_HelloPhase, None] = {}
        self.spliced: set[SpliceHalf] = set()  # the client side of each established pair
        self._forget_spliced = self.spliced.discard
        self._servers: list[asyncio.AbstractServer] = []
        self._sweeper: asyncio.Task[None] | None = None
        self.loop: asyncio.AbstractEventLoop = None  # type: ignore[assignment]  # set by start()

    async def start(self, port: int, host: str | None = None) -> None:
        """Listen on `port` (every address when `host` is None) with SO_REUSEPORT, so several proxy
        processes share it and the kernel spreads connections over them."""
        self.loop = loop = asyncio.get_running_loop()
        server = await loop.create_server(lambda: _HelloPhase(self), host=host, port=port,
                                          reuse_port=True, backlog=LISTEN_BACKLOG)
        self._servers.append(server)
        self._sweeper = self._sweeper or asyncio.create_task(self._sweep_idle())

    def status(self) -> dict[str, Any]:
        return {"active": len(self.spliced), "pending_hellos": len(self.pending), **asdict(self.counters)}

    def stop_accepting(self) -> None:
        """Close the listeners and the connections that have not sent their ClientHello yet."""
        for server in self._servers:
            server.close()
        for conn in list(self.pending):
            conn.close()

    async def drain(self) -> None:
        """Let established connections finish for the drain timeout, then cut the rest."""
        deadline = self.loop.time() + self.options.drain_timeout
        while self.spliced and self.loop.time() < deadline:
            await asyncio.sleep(0.05)
        for half in list(self.spliced):
            half.abort_pair()
        if self._sweeper:
            self._sweeper.cancel()

    async def _sweep_idle(self) -> None:
        period = self.options.idle_timeout / IDLE_SWEEPS
        while True:
            await asyncio.sleep(period)
            for half in list(self.spliced):
                peer = half.peer
                half.quiet_ticks += 1
                peer.quiet_ticks += 1
                if half.quiet_ticks > IDLE_SWEEPS and peer.quiet_ticks > IDLE_SWEEPS:
                    self.counters.idle_closed += 1
                    half.abort_pair()

    def route(self, conn: _HelloPhase, hello: Hello) -> None:
        """Pick the upstream for a connection whose ClientHello is complete, then connect and splice."""
        counters = self.counters
        targets: tuple[Upstream, ...] | None = (
            self.table.endpoints_for(hello.server_name) if hello.kind is HelloKind.SNI else None)
        if targets is None:
            if hello.kind is HelloKind.NOT_TLS:
                counters.not_tls += 1
            elif hello.kind is HelloKind.NO_SNI:
                counters.no_sni += 1
            targets = self.nginx
            client, local = conn.addresses()
            first_bytes = v1_header(client, local) + conn.hello.raw
        elif not targets:
            counters.no_endpoints += 1
            log.info("passthrough host has no endpoints; closing", extra=kv(host=hello.server_name))
            conn.transport.close()
            return
        else:
            first_bytes = bytes(conn.hello.raw)
        conn.transport.pause_reading()
        conn.connecting = self.loop.create_task(self._splice(conn, targets=targets, first_bytes=first_bytes))

    async def _splice(self, conn: _HelloPhase, *, targets: tuple[Upstream, ...], first_bytes: bytes) -> None:
        loop = self.loop
        client = SpliceHalf(on_closed=self._forget_spliced)
        client.attach(conn.transport)
        for target in targets:
            try:
                async with asyncio.timeout(self.options.connect_timeout):
                    if isinstance(target, str):
                        _, upstream = await loop.create_unix_connection(lambda: SpliceHalf(peer=client), target)
                    else:
                        _, upstream = await loop.create_connection(lambda: SpliceHalf(peer=client), *target)
                break
            except (OSError, TimeoutError) as err:
                self.counters.connect_failures += 1
                log.warning("cannot connect upstream", extra=kv(
                    upstream=target if isinstance(target, str) else f"{target[0]}:{target[1]}",
                    error=str(err) or "timeout"))
        else:
            self.counters.unreachable += 1
            conn.transport.close()
            return
        conn.connecting = None
        if conn.transport.is_closing():  # the client left while we were connecting
            upstream.transport.abort()
            return
        if targets is self.nginx:
            self.counters.to_nginx += 1
        else:
            self.counters.passthrough += 1
        link(client, upstream)
        upstream.transport.write(first_bytes)
        conn.transport.set_protocol(client)
        self.spliced.add(client)
        conn.transport.resume_reading()


class _HelloPhase(asyncio.Protocol):
    """A connection from accept until its ClientHello is complete; then the server routes it."""

    __slots__ = ("server", "transport", "hello", "proxy_bytes", "header_deadline", "proxy_header", "deadline", "connecting")

    def __init__(self, server: PassthroughServer) -> None:
        self.server = server
        self.hello = ClientHelloReader()
        self.proxy_bytes: bytearray | None = None  # collects an inbound PROXY header when one is due
        self.header_deadline: asyncio.TimerHandle | None = None
        self.proxy_header: tuple[Address, Address] | None = None
        self.connecting: asyncio.Task[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        server = self.server
        self.transport: asyncio.Transport = transport  # type: ignore[assignment]
        server.counters.accepted += 1
        if server.table.use_proxy_protocol:
            self.proxy_bytes = bytearray()
            # proxy-protocol-header-timeout: a load balancer that sends no header in time is cut off early.
            self.header_deadline = server.loop.call_later(server.table.proxy_header_timeout, self._header_expired)
        pending = server.pending
        pending[self] = None
        if len(pending) > server.options.max_pending_hellos:
            oldest = next(iter(pending))
            server.counters.shed_pending += 1
            oldest.close()
        self.deadline = server.loop.call_later(server.options.hello_timeout, self._expire)

    def data_received(self, data: bytes) -> None:
        try:
            if self.proxy_bytes is not None:
                data = self._take_proxy_header(data)
                if not data:
                    return
            hello = self.hello.feed(data)
        except (ClientHelloError, ProxyProtocolError) as err:
            self.server.counters.malformed += 1
            log.debug("closing connection", extra=kv(peer=self._peer(), error=err))
            self.close()
            return
        if hello is not None:
            self._leave_pending()
            self.server.route(self, hello)

    def _take_proxy_header(self, data: bytes) -> bytes:
        """Collect the PROXY header; returns the bytes after it (empty while it is incomplete)."""
        buf = self.proxy_bytes
        buf += data  # type: ignore[operator]
        header = parse_header(buf)  # type: ignore[arg-type]
        if header is None:
            return b""
        self.proxy_bytes = None
        if self.header_deadline is not None:
            self.header_deadline.cancel()
        if header.source is not None and header.destination is not None:
            self.proxy_header = (header.source, header.destination)
        return bytes(buf[header.length:])  # type: ignore[index]

    def eof_received(self) -> bool:
        return False  # EOF before the hello is complete: nothing to route

    def connection_lost(self, exc: Exception | None) -> None:
        self._leave_pending()
        if self.header_deadline is not None:
            self.header_deadline.cancel()
        if self.connecting is not None:
            self.connecting.cancel()

    def _header_expired(self) -> None:
        if self.proxy_bytes is not None:
            self.server.counters.hello_timeouts += 1
            log.debug("no PROXY header in time; closing", extra=kv(peer=self._peer()))
            self.close()

    def _expire(self) -> None:
        self.server.counters.hello_timeouts += 1
        log.debug("no ClientHello in time; closing", extra=kv(peer=self._peer()))
        self.close()

    def close(self) -> None:
        self._leave_pending()
        self.transport.abort()

    def _leave_pending(self) -> None:
        if self.server.pending.pop(self, 0) is None:
            self.deadline.cancel()

    def addresses(self) -> tuple[Address, Address]:
        """(client, the address it connected to): from the PROXY header when there was one."""
        if self.proxy_header is not None:
            return self.proxy_header
        peer = self.transport.get_extra_info("peername")
        local = self.transport.get_extra_info("sockname")
        return (peer[0], peer[1]), (local[0], local[1])

    def _peer(self) -> str:
        peer = self.transport.get_extra_info("peername")
        return f"{peer[0]}:{peer[1]}" if peer else "?"


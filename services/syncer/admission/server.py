"""The webhook's HTTPS server: HTTP/1.1 on asyncio streams, small on purpose, every read bounded.

Bounds, per connection: the TLS handshake within HANDSHAKE_SECONDS (with the certificate of the moment:
tls_files.py), a request head of at most MAX_HEAD_BYTES, the whole request (head and body) within
REQUEST_SECONDS of its first byte, the answer written within WRITE_SECONDS, and IDLE_SECONDS between requests
on a kept-alive connection (longer than the 90 s a Go client keeps an idle connection, so that the API server
closes it first and never sends a POST onto a connection being closed). At most MAX_CONNECTIONS per process:
past it the connection that has waited longest (in its handshake, or for its next request) is closed for the new
one, so that connections held open by anyone who reaches the port cannot lock the API server out; when every one
is inside a request (each bounded by REQUEST_SECONDS), the new one is closed. A body is at most wire.MAX_BODY_BYTES: a longer Content-Length is
answered 400 without reading the body, as is a body without a Content-Length (the API server always sends one).

Any path is served (ingress-nginx's webhook answers on every path too, so a configuration written for
/networking/v1beta1/ingresses or / keeps working); only POST is, other methods get 405.

Each process binds the port with SO_REUSEPORT, as the passthrough proxy does: the kernel spreads connections
over the processes, with no process in front to hold a shared socket. Its cost is that connections waiting in
the accept queue of a process that dies are reset; the API server reports that call as failed, and the next
one reaches another process.
"""
from __future__ import annotations

import asyncio
import logging
import socket
from typing import Callable

from services.common.logs import kv
from services.syncer.admission.tls_files import ReloadingCertificate
from services.syncer.admission.wire import MAX_BODY_BYTES

log = logging.getLogger("webhook")

HANDSHAKE_SECONDS = 5.0
REQUEST_SECONDS = 10.0
WRITE_SECONDS = 10.0
IDLE_SECONDS = 120.0
MAX_HEAD_BYTES = 16 * 1024
# After a refused request, what the client still sends is read and dropped for this long, up to this much.
LINGER_SECONDS = 2.0
LINGER_MAX_BYTES = 2 * MAX_BODY_BYTES
MAX_CONNECTIONS = 512
BACKLOG = 1024

# (the request's path, its body) → (HTTP status, content type, body)
Handler = Callable[[str, bytes], tuple[int, str, bytes]]

_REASONS = {200: "OK", 400: "Bad Request", 405: "Method Not Allowed", 408: "Request Timeout"}


class _Refused(Exception):
    """A request answered with an error status, after which the connection closes."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def split_address(address: str) -> tuple[str | None, int]:
    """`[ADDR]:PORT` → (host, port); an empty host is every address (None)."""
    host, _, port = address.rpartition(":")
    host = host[1:-1] if host.startswith("[") else host
    return host or None, int(port)


def response(status: int, content_type: str, body: bytes, *, close: bool) -> bytes:
    head = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}", f"Content-Type: {content_type}",
            f"Content-Length: {len(body)}"]
    if close:
        head.append("Connection: close")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


class AdmissionServer:
    def __init__(self, certificate: ReloadingCertificate, handle: Handler) -> None:
        self.certificate = certificate
        self.handle = handle
        self.connections: set[asyncio.Task[None]] = set()
        # The connections not inside a request (in their handshake, or waiting for one), with when they began to
        # wait: past MAX_CONNECTIONS the one waiting longest is closed for a new one, so that idle connections
        # held open by anyone who reaches the port cannot lock the API server out.
        self._waiting: dict[asyncio.Task[None], float] = {}
        self.requests = 0
        self._listeners: list[socket.socket] = []
        self._accepting: list[asyncio.Task[None]] = []

    async def start(self, address: str) -> None:
        host, port = split_address(address)
        loop = asyncio.get_running_loop()
        found = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        for family, kind, proto, _, bound in dict.fromkeys((f, k, p, "", a) for f, k, p, _, a in found):
            listener = socket.socket(family, kind, proto)
            self._listeners.append(listener)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            if family == socket.AF_INET6:
                listener.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)  # the IPv4 socket has its own
            listener.bind(bound)
            listener.listen(BACKLOG)
            listener.setblocking(False)
        self._accepting = [asyncio.create_task(self._accept(listener)) for listener in self._listeners]

    @property
    def ports(self) -> list[int]:
        return sorted({listener.getsockname()[1] for listener in self._listeners})

    def close(self) -> None:
        for task in [*self._accepting, *self.connections]:
            task.cancel()
        for listener in self._listeners:
            listener.close()

    async def _accept(self, listener: socket.socket) -> None:
        """Accept, then TLS from the first byte with the certificate of the moment: a server started with one
        SSLContext could not change it, and upgrading a plain stream later loses a ClientHello read before."""
        loop = asyncio.get_running_loop()
        while True:
            try:
                accepted, _ = await loop.sock_accept(listener)
            except OSError as err:  # out of descriptors, say: the next connection may do
                log.warning("accept failed", extra=kv(error=err))
                await asyncio.sleep(0.1)
                continue
            if len(self.connections) >= MAX_CONNECTIONS and not self._close_longest_waiting():
                accepted.close()
                continue
            # An answer is one write: sent at once, not held back for the ACK of the last one.
            accepted.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            task = asyncio.create_task(self._connection(accepted))
            self.connections.add(task)
            self._waiting[task] = loop.time()
            task.add_done_callback(self._forget)

    def _forget(self, task: asyncio.Task[None]) -> None:
        self.connections.discard(task)
        self._waiting.pop(task, None)

    def _close_longest_waiting(self) -> bool:
        if not self._waiting:
            return False  # every connection is inside a request, each bounded by REQUEST_SECONDS
        oldest = min(self._waiting, key=self._waiting.__getitem__)
        del self._waiting[oldest]
        oldest.cancel()
        return True

    async def _connection(self, accepted: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=MAX_HEAD_BYTES)
        protocol = asyncio.StreamReaderProtocol(reader)
        try:
            async with asyncio.timeout(HANDSHAKE_SECONDS):
                transport, _ = await loop.connect_accepted_socket(
                    lambda: protocol, accepted, ssl=self.certificate.current(),
                    ssl_handshake_timeout=HANDSHAKE_SECONDS)
        except (OSError, TimeoutError):
            accepted.close()  # no TLS in time, or not TLS at all
            return
        writer = asyncio.StreamWriter(transport, protocol, reader, loop)
        try:
            while await self._one_request(reader, writer):
                pass
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ValueError):
            pass  # the client went away, was too slow, or spoke no HTTP: nothing to answer
        finally:
            await _close(writer)

    async def _one_request(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Read, handle and answer one request; whether the connection stays open for another."""
        lingering = False
        task = asyncio.current_task()
        assert task is not None
        async with asyncio.timeout(IDLE_SECONDS):
            first = await reader.readexactly(1)
        self._waiting.pop(task, None)
        try:
            async with asyncio.timeout(REQUEST_SECONDS):
                method, path, keep_alive, length = _read_head(first + await reader.readuntil(b"\r\n\r\n"))
                body = await reader.readexactly(length)
        except _Refused as refused:
            status, content_type, body, keep_alive = refused.status, "text/plain", f"{refused}\n".encode(), False
            lingering = True
        except TimeoutError:
            status, content_type, body, keep_alive = 408, "text/plain", b"request not received in time\n", False
        else:
            self.requests += 1
            if method != "POST":
                status, content_type, body = 405, "text/plain", b"only POST is served\n"
            else:
                status, content_type, body = self.handle(path, body)
        async with asyncio.timeout(WRITE_SECONDS):
            writer.write(response(status, content_type, body, close=not keep_alive))
            await writer.drain()
        if lingering:
            await _discard_unread(reader)
        if keep_alive:
            self._waiting[task] = asyncio.get_running_loop().time()
        return keep_alive


async def _discard_unread(reader: asyncio.StreamReader) -> None:
    """Read what the client still sends (a refused body) for a moment before closing: a socket closed with
    unread data resets the connection, and the client would see the reset instead of the 400."""
    discarded = 0
    try:
        async with asyncio.timeout(LINGER_SECONDS):
            while discarded < LINGER_MAX_BYTES and (chunk := await reader.read(64 * 1024)):
                discarded += len(chunk)
    except TimeoutError:
        pass


async def _close(writer: asyncio.StreamWriter) -> None:
    """Close after what was written is sent (TLS close_notify included); cut the connection if that stalls."""
    writer.close()
    try:
        async with asyncio.timeout(HANDSHAKE_SECONDS):
            await writer.wait_closed()
    except (OSError, TimeoutError):
        writer.transport.abort()
    except asyncio.CancelledError:
        writer.transport.abort()
        raise


def _read_head(head: bytes) -> tuple[str, str, bool, int]:
    """(method, path, keep-alive, body length) of a request head; _Refused when it cannot be served."""
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise _Refused(400, "not an HTTP/1.x request line")
    method, path, version = parts
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if line:
            name, colon, value = line.partition(":")
            if not colon:
                raise _Refused(400, "malformed header line")
            headers[name.strip().lower()] = value.strip()
    connection = headers.get("connection", "").lower()
    keep_alive = connection != "close" and (version == "HTTP/1.1" or connection == "keep-alive")
    if "transfer-encoding" in headers:
        raise _Refused(400, "a chunked body is not served: send Content-Length")
    text = headers.get("content-length", "0" if method != "POST" else "")
    if not text.isdigit():
        raise _Refused(400, "a POST needs a Content-Length")
    length = int(text)
    if length > MAX_BODY_BYTES:
        log.warning("request refused: body too large", extra=kv(bytes=length, limit=MAX_BODY_BYTES))
        raise _Refused(400, f"the body is {length} bytes, over the {MAX_BODY_BYTES} an AdmissionReview may have")
    return method, path, keep_alive, length

"""The webhook's HTTPS server (services/syncer/admission/server.py) with real TLS and real sockets: what a client
that is not the API server gets, and that a kept-alive connection serves one review after another."""
from __future__ import annotations

import asyncio
import socket
import ssl
import threading
from pathlib import Path
from typing import Iterator

import pytest

from services.syncer.admission import server as server_mod
from services.syncer.admission.server import AdmissionServer
from services.syncer.admission.tls_files import ReloadingCertificate
from services.tools.webhook_certificate import make_pair
from tests.support.net import free_port, wait_for

SERVER_NAME = "webhook.test.svc"


class Running:
    """An AdmissionServer answering every POST with its path and body length, in a thread's event loop."""

    def __init__(self, directory: Path) -> None:
        pair = make_pair("webhook", "test")
        for name in ("ca", "cert", "key"):
            (directory / name).write_text(pair[name])
        self.ca = directory / "ca"
        self.port = free_port()
        self.loop = asyncio.new_event_loop()
        certificate = ReloadingCertificate(str(directory / "cert"), str(directory / "key"))
        self.server = AdmissionServer(certificate, lambda path, body: (200, "text/plain",
                                                                      f"{path} {len(body)}".encode()))
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self.server.start(f"127.0.0.1:{self.port}"), self.loop).result(10)

    def stop(self) -> None:
        async def close() -> None:
            tasks = [*self.server.connections]
            self.server.close()
            await asyncio.gather(*tasks, return_exceptions=True)
        asyncio.run_coroutine_threadsafe(close(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()

    def tls(self) -> ssl.SSLSocket:
        context = ssl.create_default_context(cafile=str(self.ca))
        return context.wrap_socket(socket.create_connection(("127.0.0.1", self.port), timeout=10),
                                   server_hostname=SERVER_NAME)


@pytest.fixture
def running(tmp_path, monkeypatch) -> Iterator[Running]:
    monkeypatch.setattr(server_mod, "HANDSHAKE_SECONDS", 0.5)
    monkeypatch.setattr(server_mod, "REQUEST_SECONDS", 0.5)
    started = Running(tmp_path)
    yield started
    started.stop()


def exchange(connection: ssl.SSLSocket, request: bytes) -> bytes:
    """Send `request`, read until the peer closes (or the one answer, for a kept-alive connection)."""
    connection.sendall(request)
    received = b""
    while b"\r\n\r\n" not in received or len(received.partition(b"\r\n\r\n")[2]) < _length(received):
        chunk = connection.recv(65536)
        if not chunk:
            break
        received += chunk
    return received


def _length(received: bytes) -> int:
    for line in received.partition(b"\r\n\r\n")[0].split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return int(line.split(b":")[1])
    return 0


def post(body: bytes, path: str = "/networking/v1/ingresses", extra: str = "") -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: {SERVER_NAME}\r\nContent-Length: {len(body)}\r\n{extra}\r\n").encode() + body


def test_a_kept_alive_connection_serves_one_request_after_another_on_any_path(running):
    with running.tls() as connection:
        assert exchange(connection, post(b"{}")).endswith(b"\r\n\r\n/networking/v1/ingresses 2")
        assert exchange(connection, post(b"{}" * 10, path="/")).endswith(b"\r\n\r\n/ 20")


@pytest.mark.parametrize("request_bytes,status", [
    (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", b"405"),
    (b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", b"400"),
    (b"POST / HTTP/1.1\r\nHost: x\r\n\r\n", b"400"),
    (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4194304\r\n\r\n", b"400"),  # refused unread
    (b"BREW / HTCPCP/1.0\r\n\r\n", b"400"),
], ids=["get", "chunked", "no-length", "4MiB", "not-http"])
def test_what_the_api_server_never_sends_is_refused_with_a_status(running, request_bytes, status):
    with running.tls() as connection:
        assert exchange(connection, request_bytes).startswith(b"HTTP/1.1 " + status)


def test_a_head_over_the_limit_closes_the_connection(running):
    with running.tls() as connection:
        answer = exchange(connection, b"POST / HTTP/1.1\r\nX-Big: " + b"a" * (server_mod.MAX_HEAD_BYTES + 1) + b"\r\n\r\n")
    assert answer == b""


def test_a_client_that_speaks_no_tls_or_stalls_is_cut(running):
    with socket.create_connection(("127.0.0.1", running.port), timeout=10) as plain:
        plain.sendall(b"POST / HTTP/1.1\r\n\r\n")
        assert plain.recv(100) == b""  # not a ClientHello: closed
    with socket.create_connection(("127.0.0.1", running.port), timeout=10) as silent:
        assert silent.recv(100) == b""  # no handshake within HANDSHAKE_SECONDS: closed
    with running.tls() as slow:
        slow.sendall(b"POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\n{")
        assert exchange(slow, b"").startswith(b"HTTP/1.1 408")  # the rest not within REQUEST_SECONDS


def test_a_new_certificate_is_served_to_new_connections(running, tmp_path):
    rotated = make_pair("webhook", "test")
    (tmp_path / "cert").write_text(rotated["cert"])
    (tmp_path / "key").write_text(rotated["key"])
    (tmp_path / "new-ca").write_text(rotated["ca"])
    running.ca = tmp_path / "new-ca"

    def served() -> bool:
        try:
            with running.tls() as connection:
                return exchange(connection, post(b"{}")).startswith(b"HTTP/1.1 200")
        except ssl.SSLError:
            return False
    wait_for(served, 10, what="the new certificate served")


def test_connections_held_open_cannot_lock_a_client_out(running, monkeypatch):
    """Past MAX_CONNECTIONS the connection that waited longest is closed for the new one."""
    monkeypatch.setattr(server_mod, "MAX_CONNECTIONS", 3)
    monkeypatch.setattr(server_mod, "HANDSHAKE_SECONDS", 30.0)
    held = [socket.create_connection(("127.0.0.1", running.port), timeout=10)]  # no handshake
    held += [running.tls(), running.tls()]  # handshaken, no request
    try:
        with running.tls() as newcomer:
            assert exchange(newcomer, post(b"{}")).startswith(b"HTTP/1.1 200")
        assert held[0].recv(100) == b""  # the longest waiting, closed
    finally:
        for connection in held:
            connection.close()

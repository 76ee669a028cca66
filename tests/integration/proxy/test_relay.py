"""The C relay (relay/, services/proxy/relay.py) between real TCP connections on loopback: each test makes pairs of
connections, hands the proxy's two ends to the relay on a running connection loop, and drives the far ends as a
client and a backend would."""
from __future__ import annotations

import hashlib
import os
import socket
import struct
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest

from services.proxy.event_loop import EventLoop
from services.proxy.relay import LIBRARY_ENV, Relay, RelayCounters
from tests.integration.proxy.harness import REPO, closed_by_peer, free_port, wait_for

MIB = 1024 * 1024


class Relayed:
    """A connection loop with its relay, and a listener that makes the TCP connections of each pair."""

    def __init__(self) -> None:
        self.loop = EventLoop()
        self.relay = Relay(self.loop)
        self.loop.start("test-relay")
        self.listener = socket.create_server(("127.0.0.1", 0), backlog=1024)

    def on_loop(self, command) -> None:
        """Run `command` on the loop's thread and wait for it (the relay is the loop thread's)."""
        done = threading.Event()

        def run() -> None:
            command()
            done.set()
        self.loop.call_soon_threadsafe(run)
        assert done.wait(10)

    def connection(self) -> tuple[socket.socket, socket.socket]:
        """(the far end, the proxy's end) of a new TCP connection."""
        far = socket.create_connection(self.listener.getsockname())
        ours, _ = self.listener.accept()
        ours.setblocking(False)
        far.settimeout(30)
        return far, ours

    def pair(self, first_bytes: bytes = b"") -> tuple[socket.socket, socket.socket]:
        """(client, backend): the far ends of a pair the relay holds, `first_bytes` sent to the backend first."""
        client, client_ours = self.connection()
        backend, upstream_ours = self.connection()
        self.on_loop(lambda: self.relay.add(client_ours.detach(), False, upstream_ours.detach(), False, 0,
                                            first_bytes))
        return client, backend

    def counters(self) -> RelayCounters:
        return self.relay.counters()

    def close(self) -> None:
        self.on_loop(self.relay.close_all)
        self.loop.stop_threadsafe()
        self.loop.join(5)
        self.listener.close()


@pytest.fixture
def relayed() -> Iterator[Relayed]:
    each = Relayed()
    yield each
    each.close()


def reset(sock: socket.socket) -> bool:
    """Whether the (non-blocking) socket's peer has reset it."""
    try:
        sock.recv(1, socket.MSG_PEEK)
    except BlockingIOError:
        return False
    except ConnectionResetError:
        return True
    return False


def received(sock: socket.socket, count: int) -> bytes:
    data = bytearray()
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        assert chunk, f"EOF after {len(data)} of {count} bytes"
        data += chunk
    return bytes(data)


def test_first_bytes_reach_the_backend_before_the_clients_and_answers_come_back(relayed):
    client, backend = relayed.pair(b"hello ")
    client.sendall(b"world")
    assert received(backend, 11) == b"hello world"
    backend.sendall(b"answer")
    assert received(client, 6) == b"answer"
    assert relayed.counters().bytes_to_upstream == 11
    assert relayed.counters().bytes_to_client == 6


def test_client_half_close_reaches_the_backend_which_still_answers(relayed):
    client, backend = relayed.pair()
    client.sendall(b"request")
    client.shutdown(socket.SHUT_WR)
    assert received(backend, 7) == b"request"
    assert backend.recv(1) == b""  # the client's EOF, passed on
    backend.sendall(b"response after the EOF")
    assert received(client, 22) == b"response after the EOF"
    backend.close()
    assert client.recv(1) == b""
    wait_for(lambda: relayed.counters().active == 0, what="the pair closed once both sides ended")
    assert relayed.counters().failed == 0


def test_backend_half_close_reaches_the_client_which_still_sends(relayed):
    client, backend = relayed.pair()
    backend.sendall(b"banner")
    backend.shutdown(socket.SHUT_WR)
    assert received(client, 6) == b"banner"
    assert client.recv(1) == b""
    client.sendall(b"more from the client")
    assert received(backend, 20) == b"more from the client"
    client.close()
    assert backend.recv(1) == b""
    wait_for(lambda: relayed.counters().active == 0, what="the pair closed once both sides ended")


def test_64_mib_each_way_arrive_byte_exact_through_slow_readers(relayed):
    client, backend = relayed.pair()
    down, up = os.urandom(64 * MIB), os.urandom(64 * MIB)
    sent = [threading.Thread(target=backend.sendall, args=(down,)), threading.Thread(target=client.sendall, args=(up,))]
    for thread in sent:
        thread.start()
    got: dict[str, bytes] = {}

    def read(name: str, sock: socket.socket, count: int) -> None:
        digest, left = hashlib.sha256(), count
        while left:
            chunk = sock.recv(min(left, 48 * 1024))  # smaller than the relay's reads: its sends fall short
            assert chunk
            digest.update(chunk)
            left -= len(chunk)
        got[name] = digest.digest()
    readers = [threading.Thread(target=read, args=("down", client, len(down))),
               threading.Thread(target=read, args=("up", backend, len(up)))]
    for thread in readers:
        thread.start()
    for thread in sent + readers:
        thread.join(120)
    assert got == {"down": hashlib.sha256(down).digest(), "up": hashlib.sha256(up).digest()}
    assert relayed.counters().bytes_to_client == len(down)


def test_a_backend_reset_closes_the_clients_connection(relayed):
    client, backend = relayed.pair(b"hello")
    assert received(backend, 5) == b"hello"
    backend.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    backend.close()  # RST
    assert closed_by_peer(client)
    wait_for(lambda: relayed.counters().active == 0, what="the pair closed")
    assert relayed.counters().failed == 1


def test_an_upstream_reset_before_the_first_bytes_closes_the_pair(relayed):
    client, client_ours = relayed.connection()
    backend, upstream_ours = relayed.connection()
    backend.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    backend.close()  # RST: the relay's first send fails
    wait_for(lambda: reset(upstream_ours), what="the reset to arrive")
    relayed.on_loop(lambda: relayed.relay.add(client_ours.detach(), False, upstream_ours.detach(), False, 0,
                                              b"hello"))
    assert closed_by_peer(client)
    wait_for(lambda: relayed.counters().active == 0, what="the pair closed")
    assert relayed.counters().failed == 1


def test_many_pairs_at_once_each_get_their_own_bytes(relayed):
    pairs = [relayed.pair(f"pair {i}:".encode()) for i in range(300)]
    errors: list[str] = []

    def talk(i: int, client: socket.socket, backend: socket.socket) -> None:
        payload = os.urandom(64 * 1024 + i)
        client.sendall(payload)
        client.shutdown(socket.SHUT_WR)
        prefix = f"pair {i}:".encode()
        if received(backend, len(prefix) + len(payload)) != prefix + payload or backend.recv(1) != b"":
            errors.append(f"pair {i}: wrong bytes upstream")
        backend.sendall(payload[::-1])
        backend.close()
        if received(client, len(payload)) != payload[::-1] or client.recv(1) != b"":
            errors.append(f"pair {i}: wrong bytes back")
        client.close()
    threads = [threading.Thread(target=talk, args=(i, *pair)) for i, pair in enumerate(pairs)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    wait_for(lambda: relayed.counters().active == 0, what="every pair closed")
    assert relayed.counters().opened == 300


def test_idle_sweeps_close_only_the_pairs_without_traffic(relayed):
    quiet_client, _quiet_backend = relayed.pair()
    busy_client, busy_backend = relayed.pair()
    closed: list[int] = []
    for _ in range(3):
        busy_client.sendall(b"x")
        assert received(busy_backend, 1) == b"x"
        relayed.on_loop(lambda: closed.append(relayed.relay.sweep(1)))
    assert closed == [0, 1, 0]  # the quiet pair on its second sweep (more than 1 without data)
    assert quiet_client.recv(1) == b""
    busy_client.sendall(b"still relayed")
    assert received(busy_backend, 13) == b"still relayed"


def test_closing_every_pair_at_the_drain_deadline_ends_both_sides(relayed):
    pairs = [relayed.pair() for _ in range(5)]
    closed: list[int] = []
    relayed.on_loop(lambda: closed.append(relayed.relay.close_all()))
    assert closed == [5]
    for client, backend in pairs:
        assert client.recv(1) == b""
        assert backend.recv(1) == b""
    assert relayed.counters().active == 0


def test_the_proxy_does_not_start_without_the_relay_library(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir(mode=0o700)
    result = subprocess.run([sys.executable, "-m", "services.cli", "proxy", f"--https-port={free_port()}",
                             f"--run-dir={run_dir}"], cwd=REPO, capture_output=True, text=True, timeout=30,
                            env={**os.environ, LIBRARY_ENV: str(tmp_path / "missing.so")})
    assert result.returncode != 0
    assert "missing.so" in result.stderr + result.stdout
    assert "make setup" in result.stderr + result.stdout

"""What the proxy's connection loop holds back and gives up on: a client that does not read, an upstream that
does not answer."""
import hashlib
import random
import socket
import threading
import time
from contextlib import contextmanager
from typing import Iterator

from tests.integration.proxy.conftest import proxy_env
from tests.integration.proxy.harness import (PASS_HOST, ProxyProcess, TcpEcho, ThreadedServer, TlsClient, free_port,
                                             wait_for)
from tests.unit.proxy.hello_bytes import client_hello

TOTAL = 64 * 1024 * 1024
BLOCK = bytes(range(256)) * 256  # 64 KiB


class Streamer(ThreadedServer):
    """A plain TCP backend: reads the ClientHello the proxy replays, then sends TOTAL bytes and counts them."""

    def __init__(self) -> None:
        self.sent = 0
        super().__init__()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            conn.recv(65536)
            while self.sent < TOTAL:
                conn.sendall(BLOCK)
                self.sent += len(BLOCK)


@contextmanager
def proxy_with_a_silent_first_endpoint(setup, next_endpoint: str) -> Iterator[tuple[int, ProxyProcess]]:
    """A proxy of its own, with a 0.5 s connect timeout, routing PASS_HOST to an endpoint that never answers (a
    listener whose accept queue is full: the kernel drops further SYNs) and then to `next_endpoint`."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(0)
    fillers = [socket.socket() for _ in range(2)]
    for filler in fillers:
        filler.setblocking(False)
        filler.connect_ex(silent.getsockname())  # the first fills the queue, the second waits behind it
    port = free_port()
    setup.table.set(f"host/{PASS_HOST}", [f"127.0.0.1:{silent.getsockname()[1]}", next_endpoint])
    proxy = ProxyProcess(port, setup.run_dir, env={**proxy_env(), "PYNGRESS_PROXY_CONNECT_TIMEOUT": "0.5"})
    try:
        proxy.wait_serving(setup.table.publisher.seq)
        yield port, proxy
    finally:
        proxy.stop()
        for each in fillers + [silent]:
            each.close()
        setup.publish(f"host/{PASS_HOST}", [setup.backend_a.address])


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def test_a_client_that_does_not_read_holds_the_backend_back(setup):
    streamer = Streamer()
    setup.publish(f"host/{PASS_HOST}", [streamer.address])
    try:
        before = rss_bytes(setup.proxy.proc.pid)
        client = socket.create_connection(("127.0.0.1", setup.port))
        client.sendall(client_hello(PASS_HOST))
        wait_for(lambda: streamer.sent > 0, what="the backend to start sending")
        time.sleep(2)  # the client reads nothing meanwhile
        # The socket buffers on both sides take a few MiB; the proxy keeps at most one read per direction.
        assert streamer.sent < TOTAL / 2
        assert rss_bytes(setup.proxy.proc.pid) - before < 16 * 1024 * 1024
        expected, received, count = hashlib.sha256(), hashlib.sha256(), 0
        for _ in range(TOTAL // len(BLOCK)):
            expected.update(BLOCK)
        client.settimeout(30)
        while count < TOTAL and (data := client.recv(1 << 20)):
            received.update(data)
            count += len(data)
        client.close()
        assert count == TOTAL
        assert received.digest() == expected.digest()
    finally:
        streamer.close()
        setup.publish(f"host/{PASS_HOST}", [setup.backend_a.address])


def test_an_endpoint_that_does_not_answer_in_time_gives_way_to_the_next(setup):
    with proxy_with_a_silent_first_endpoint(setup, setup.backend_b.address) as (port, proxy):
        for _ in range(2):  # round robin: one of the two starts at the silent endpoint
            client = TlsClient(port, setup.pki.client_context(), PASS_HOST).handshake()
            assert client.read_line() == b"backend-b"
            client.close()
        wait_for(lambda: proxy.status()["connect_failures"] >= 1, what="the timed-out attempt in the status file")

def echoed_through_proxy(port: int, seed: int) -> tuple[bytes, bytes]:
    """One client: the hello and the first bytes at once, then random writes (one byte to a few reads' worth)
    while the echo is read, then a half-close; returns the digests of what was sent and what came back."""
    rng = random.Random(seed)
    sent, received = hashlib.sha256(), hashlib.sha256()
    # Sent right after the connect, made before it: the module's proxy closes a connection without a hello after
    # 1.5 s, and thirty client threads (with as many writers) sharing one GIL on a loaded machine can take that long
    # between the connect and a writer thread's first send.
    first = client_hello(PASS_HOST) + rng.randbytes(rng.choice([1, 5000]))  # before the upstream exists
    sent.update(first)
    with socket.create_connection(("127.0.0.1", port), timeout=60) as client:
        client.sendall(first)

        def write() -> None:
            for _ in range(rng.randrange(1, 12)):
                chunk = rng.randbytes(rng.choice([1, 700, 65536, 262144, 600_000]))
                client.sendall(chunk)
                sent.update(chunk)
                if rng.random() < 0.3:
                    time.sleep(0.01)
            client.shutdown(socket.SHUT_WR)

        writer = threading.Thread(target=write)
        writer.start()
        while data := client.recv(rng.choice([1000, 1 << 20])):
            received.update(data)
        writer.join()
    return sent.digest(), received.digest()


def test_many_clients_writing_and_reading_at_once_get_every_byte_back(setup):
    """Edge-triggered sockets report each arrival once: a lost one would leave a connection hanging or short.
    Thirty clients at once, with writes of every size from one byte to several reads' worth, data sent before
    the upstream is connected, slow and fast readers, and half-closes."""
    echo = TcpEcho()
    setup.publish(f"host/{PASS_HOST}", [echo.address])
    try:
        results: list[tuple[bytes, bytes]] = []
        clients = [threading.Thread(target=lambda seed=seed: results.append(echoed_through_proxy(setup.port, seed)))
                   for seed in range(30)]
        for client in clients:
            client.start()
        for client in clients:
            client.join(120)
        assert len(results) == 30
        assert all(sent == received for sent, received in results)
    finally:
        echo.close()
        setup.publish(f"host/{PASS_HOST}", [setup.backend_a.address])


def test_bytes_and_eof_sent_while_the_upstream_connects_are_passed_on(setup):
    """The client's socket is edge-triggered from the ClientHello on: what it sends while the proxy is still
    connecting upstream (here to an endpoint that never answers, then to the next) is reported once, and must
    reach the upstream once connected, its EOF too."""
    echo = TcpEcho()
    try:
        with proxy_with_a_silent_first_endpoint(setup, echo.address) as (port, proxy):
            for _ in range(2):  # round robin: one of the two starts at the silent endpoint
                with socket.create_connection(("127.0.0.1", port), timeout=10) as client:
                    hello = client_hello(PASS_HOST)
                    client.sendall(hello)
                    time.sleep(0.2)  # routed, still connecting
                    client.sendall(b"sent while connecting")
                    client.shutdown(socket.SHUT_WR)
                    received = b""
                    while data := client.recv(65536):
                        received += data
                assert received == hello + b"sent while connecting"
            wait_for(lambda: proxy.status()["connect_failures"] >= 1, what="the silent endpoint tried")
    finally:
        echo.close()

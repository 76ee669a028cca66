"""What the proxy's connection loop holds back and gives up on: a client that does not read, an upstream that
does not answer."""
import hashlib
import socket
import threading
import time

from tests.integration.proxy.conftest import proxy_env
from tests.integration.proxy.harness import PASS_HOST, ProxyProcess, TlsClient, free_port, wait_for
from tests.unit.proxy.hello_bytes import client_hello

TOTAL = 64 * 1024 * 1024
BLOCK = bytes(range(256)) * 256  # 64 KiB


class Streamer:
    """A plain TCP backend: reads the ClientHello the proxy replays, then sends TOTAL bytes and counts them."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self.sent = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        conn, _ = self.listener.accept()
        with conn:
            conn.recv(65536)
            while self.sent < TOTAL:
                conn.sendall(BLOCK)
                self.sent += len(BLOCK)


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
        setup.publish(f"host/{PASS_HOST}", [setup.backend_a.address])


def test_an_endpoint_that_does_not_answer_in_time_gives_way_to_the_next(setup):
    # A listener whose accept queue is full: the kernel drops further SYNs, so connecting hangs.
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(0)
    fillers = [socket.socket() for _ in range(2)]
    for filler in fillers:
        filler.setblocking(False)
        filler.connect_ex(silent.getsockname())  # the first fills the queue, the second waits behind it
    port = free_port()
    setup.table.set(f"host/{PASS_HOST}", [f"127.0.0.1:{silent.getsockname()[1]}", setup.backend_b.address])
    proxy = ProxyProcess(port, setup.run_dir, env={**proxy_env(), "PYNGRESS_PROXY_CONNECT_TIMEOUT": "0.5"})
    try:
        proxy.wait_serving(setup.table.publisher.seq)
        for _ in range(2):  # round robin: one of the two starts at the silent endpoint
            client = TlsClient(port, setup.pki.client_context(), PASS_HOST).handshake()
            assert client.read_line() == b"backend-b"
            client.close()
        wait_for(lambda: proxy.status()["connect_failures"] >= 1, what="the timed-out attempt in the status file")
    finally:
        proxy.stop()
        for each in fillers + [silent]:
            each.close()
        setup.publish(f"host/{PASS_HOST}", [setup.backend_a.address])

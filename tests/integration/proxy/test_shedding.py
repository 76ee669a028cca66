"""Clients that never finish a ClientHello, send too much or send garbage are shed, and other clients
are served meanwhile. (The module's proxy runs with a 1.5 s hello timeout and 100 pending hellos.)"""
import selectors
import socket
import time

from tests.integration.proxy.harness import PASS_HOST, TlsClient, closed_by_peer
from tests.unit.proxy.hello_bytes import client_hello, huge_hello


def served(setup) -> bool:
    client = TlsClient(setup.port, setup.pki.client_context(), PASS_HOST).handshake()
    try:
        return client.read_line() == b"backend-a"
    finally:
        client.close()


def test_hello_at_one_byte_per_second_is_dropped_at_the_deadline(setup):
    hello = client_hello(PASS_HOST)
    with socket.create_connection(("127.0.0.1", setup.port), timeout=10) as sock:
        sent = 0
        dropped = False
        for byte in hello[:20]:
            try:
                sock.send(bytes([byte]))
            except OSError:
                dropped = True
                break
            sent += 1
            sock.settimeout(1.0)
            try:
                if sock.recv(1) == b"":
                    dropped = True
                    break
            except socket.timeout:
                continue
            except ConnectionResetError:
                dropped = True
                break
        assert dropped and sent < len(hello)
    assert served(setup)


def test_64_kib_client_hello_is_shed_while_others_are_served(setup):
    before = setup.proxy.status()["malformed"]
    with socket.create_connection(("127.0.0.1", setup.port), timeout=10) as sock:
        try:
            sock.sendall(huge_hello(PASS_HOST))
        except (BrokenPipeError, ConnectionResetError):
            pass  # shed while we were still sending
        assert served(setup)
        assert closed_by_peer(sock)
    assert setup.backend_a.accepted > 0
    assert _eventually(lambda: setup.proxy.status()["malformed"] > before)


def test_malformed_tls_is_closed_and_garbage_goes_to_nginx(setup):
    with socket.create_connection(("127.0.0.1", setup.port), timeout=10) as sock:
        sock.sendall(b"\x16\x03\x01\x00\x08\x01\x00\x00\x04\x00\x00\x00\x00")  # a 4-byte "ClientHello"
        assert closed_by_peer(sock)
    with socket.create_connection(("127.0.0.1", setup.port), timeout=10) as sock:
        sock.sendall(bytes(range(256)) * 4)
        response = b""
        while chunk := sock.recv(65536):
            response += chunk
        assert response.startswith(b"HTTP/1.1 400")  # nginx's answer to a non-TLS client
    assert served(setup)


def test_a_thousand_idle_connections_are_shed_while_another_client_is_served(setup):
    before = setup.proxy.status()
    idle = []
    selector = selectors.DefaultSelector()
    try:
        for _ in range(1000):
            sock = socket.create_connection(("127.0.0.1", setup.port), timeout=10)
            sock.setblocking(False)
            selector.register(sock, selectors.EVENT_READ)
            idle.append(sock)
        # Served while the idle ones are still pending (the newest 100 wait for the hello timeout).
        assert served(setup)
        open_count = len(idle)
        deadline = time.monotonic() + 15
        while open_count and time.monotonic() < deadline:
            for key, _ in selector.select(timeout=0.5):
                try:
                    data = key.fileobj.recv(1)
                except ConnectionResetError:
                    data = b""
                assert data == b""
                selector.unregister(key.fileobj)
                open_count -= 1
        assert open_count == 0
    finally:
        selector.close()
        for sock in idle:
            sock.close()
    # The status file is rewritten every 2 s. The oldest were shed at once, the newest at their deadline.
    assert _eventually(lambda: setup.proxy.status()["shed_pending"] - before["shed_pending"] >= 800)
    assert _eventually(lambda: setup.proxy.status()["hello_timeouts"] > before["hello_timeouts"])


def _eventually(check, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True

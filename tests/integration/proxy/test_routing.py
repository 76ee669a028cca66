"""Routing by SNI through a real `pyngress proxy`: passthrough backends, nginx for everything else."""
import ipaddress
import socket
import struct

from tests.integration.proxy.harness import OTHER_HOST, PASS_HOST, TlsClient, free_port, https_get
from tests.unit.proxy.hello_bytes import reframe


def test_passthrough_host_reaches_its_backend_with_the_backends_certificate(setup):
    client = TlsClient(setup.port, setup.pki.client_context(), PASS_HOST).handshake()
    assert client.peer_cn() == "backend-a"
    assert client.read_line() == b"backend-a"
    client.send(b"ping\n")
    assert client.read_line() == b"ping"
    client.close()


def test_sni_is_matched_case_insensitively(setup):
    client = TlsClient(setup.port, setup.pki.client_context(), PASS_HOST.upper()).handshake()
    assert client.read_line() == b"backend-a"
    client.close()


def test_next_endpoint_when_one_refuses(setup):
    dead = f"127.0.0.1:{free_port()}"
    setup.publish(f"host/{PASS_HOST}", [dead, setup.backend_b.address])
    try:
        # Round robin starts at each endpoint in turn: both orders must end at the live backend.
        for _ in range(3):
            client = TlsClient(setup.port, setup.pki.client_context(), PASS_HOST).handshake()
            assert client.read_line() == b"backend-b"
            client.close()
    finally:
        setup.publish(f"host/{PASS_HOST}", [setup.backend_a.address])


def test_other_hosts_are_terminated_by_nginx_with_the_real_client_address(setup):
    client = TlsClient(setup.port, setup.pki.client_context(), OTHER_HOST).handshake()
    local_port = client.sock.getsockname()[1]
    assert client.peer_cn() == "nginx"
    client.send(f"GET / HTTP/1.1\r\nHost: {OTHER_HOST}\r\nConnection: close\r\n\r\n".encode())
    body = client.read_all().decode().split("\r\n\r\n", 1)[1]
    assert body == f"127.0.0.1:{local_port} {OTHER_HOST}\n"
    client.close()


def ca_only_context(setup):
    """Verifies the chain but not the name: to see which certificate a server chose."""
    ctx = setup.pki.client_context()
    ctx.check_hostname = False
    return ctx


def test_no_sni_goes_to_nginxs_default_server(setup):
    cn, body = https_get(setup.port, ca_only_context(setup), None)
    assert cn == "nginx"
    assert body.startswith("127.0.0.1:") and body.endswith(" \n")  # empty $ssl_server_name


def test_plain_http_goes_to_nginx_which_answers_400(setup):
    with socket.create_connection(("127.0.0.1", setup.port), timeout=10) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        response = b""
        while chunk := sock.recv(65536):
            response += chunk
    assert response.startswith(b"HTTP/1.1 400")
    assert b"plain HTTP request was sent to HTTPS port" in response


def send_one_byte_per_segment(sock: socket.socket, data: bytes) -> None:
    for i in range(len(data)):
        sock.send(data[i:i + 1])


def test_client_hello_in_one_byte_segments(setup):
    client = TlsClient(setup.port, setup.pki.client_context(), PASS_HOST).handshake(send_one_byte_per_segment)
    assert client.peer_cn() == "backend-a"
    assert client.read_line() == b"backend-a"
    client.close()


def test_client_hello_fragmented_over_tls_records(setup):
    def fragmented(sock: socket.socket, data: bytes) -> None:
        sock.sendall(reframe(data, [5, 1, 60, 2, 100]))
    client = TlsClient(setup.port, setup.pki.client_context(), PASS_HOST).handshake(fragmented)
    assert client.peer_cn() == "backend-a"
    assert client.read_line() == b"backend-a"
    client.close()


def test_half_close_keeps_the_other_direction_flowing(setup):
    client = TlsClient(setup.port, setup.pki.client_context(), PASS_HOST).handshake()
    assert client.read_line() == b"backend-a"
    client.send(b"x" * 100000)
    client.shutdown_write()
    echoed = b""
    while len(echoed) < 100000:
        echoed += client._read_some()
    assert echoed[:100000] == b"x" * 100000
    client.buffer = echoed[100000:]
    assert client.read_line() == b"backend-a saw EOF after 100000 bytes"
    client.close()


def test_table_change_applies_to_new_connections_and_keeps_established_ones(setup):
    established = TlsClient(setup.port, setup.pki.client_context(), PASS_HOST).handshake()
    assert established.read_line() == b"backend-a"
    setup.publish(f"host/{PASS_HOST}", [setup.backend_b.address])
    try:
        fresh = TlsClient(setup.port, setup.pki.client_context(), PASS_HOST).handshake()
        assert fresh.read_line() == b"backend-b"
        fresh.close()
        established.send(b"still here\n")
        assert established.read_line() == b"still here"
        setup.publish(f"host/{PASS_HOST}", None)  # no longer passthrough: nginx answers for it now
        client = TlsClient(setup.port, ca_only_context(setup), PASS_HOST).handshake()
        assert client.peer_cn() == "nginx"
        client.close()
        established.send(b"and here\n")
        assert established.read_line() == b"and here"
    finally:
        established.close()
        setup.publish(f"host/{PASS_HOST}", [setup.backend_a.address])


def proxy_v2(source: str, port: int) -> bytes:
    addresses = ipaddress.IPv4Address(source).packed + ipaddress.IPv4Address("10.9.8.7").packed
    payload = addresses + struct.pack(">HH", port, 443)
    return b"\r\n\r\n\x00\r\nQUIT\n\x21\x11" + struct.pack(">H", len(payload)) + payload


def test_inbound_proxy_protocol_v1_and_v2(setup):
    setup.publish("config", {"use_proxy_protocol": True})
    try:
        _, body = https_get(setup.port, setup.pki.client_context(), OTHER_HOST,
                            prefix=b"PROXY TCP4 203.0.113.7 10.9.8.7 40000 443\r\n")
        assert body == f"203.0.113.7:40000 {OTHER_HOST}\n"
        _, body = https_get(setup.port, setup.pki.client_context(), OTHER_HOST, prefix=proxy_v2("198.51.100.9", 41000))
        assert body == f"198.51.100.9:41000 {OTHER_HOST}\n"
        # A passthrough backend gets the TLS stream without the header.
        client = TlsClient(setup.port, setup.pki.client_context(), PASS_HOST,
                           prefix=b"PROXY TCP4 203.0.113.7 10.9.8.7 40000 443\r\n").handshake()
        assert client.read_line() == b"backend-a"
        client.close()
        # Without a header, the connection is refused: only the load balancer may connect.
        with socket.create_connection(("127.0.0.1", setup.port), timeout=10) as sock:
            sock.sendall(b"\x16\x03\x01\x00\x05hello")
            assert sock.recv(100) == b""
    finally:
        setup.publish("config", {"use_proxy_protocol": False})


def test_a_proxy_header_not_sent_in_time_closes_the_connection(setup):
    # proxy-protocol-header-timeout: well before the ClientHello's own timeout (5 s here).
    setup.publish("config", {"use_proxy_protocol": True, "proxy_protocol_header_timeout": 0.3})
    try:
        with socket.create_connection(("127.0.0.1", setup.port), timeout=10) as sock:
            sock.sendall(b"PROXY TCP4 203.0.113.7 ")  # and nothing more
            sock.settimeout(3)
            assert sock.recv(100) == b""
        # A header in time is read as before.
        _, body = https_get(setup.port, setup.pki.client_context(), OTHER_HOST,
                            prefix=b"PROXY TCP4 203.0.113.7 10.9.8.7 40000 443\r\n")
        assert body == f"203.0.113.7:40000 {OTHER_HOST}\n"
    finally:
        setup.publish("config", {"use_proxy_protocol": False})


def test_status_file_counts_what_happened(setup):
    status = setup.proxy.status()
    assert status["component"] == f"proxy-{setup.proxy.proc.pid}"
    assert status["passthrough"] >= 1 and status["to_nginx"] >= 1 and status["not_tls"] >= 1
    assert status["table_hosts"] == 1

"""TCP and UDP services (--tcp-services-configmap, --udp-services-configmap) through the whole controller:
echo servers behind nginx's stream ports, endpoints moved without a reload, the PROXY protocol both ways,
and bad entries reported while the others are served."""
from __future__ import annotations

import socket
import socketserver
import threading
from functools import partial
from typing import Iterator

import pytest

from tests.support import k8s
from tests.e2e.ingress.conftest import reachable
from tests.support.controller import Controller, ManifestsCluster
from tests.support.net import free_port, wait_for

TCP_CONFIGMAP, UDP_CONFIGMAP = "ingress/tcp-services", "ingress/udp-services"
ECHO_PORT = free_port()
ADDRESSES = {"A": "127.0.9.2", "B": "127.0.9.3"}


class _TcpEcho(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        # What arrives within a moment, as one answer (nginx writes a PROXY header and the data apart).
        data = self.request.recv(4096)
        self.request.settimeout(0.2)
        try:
            while chunk := self.request.recv(4096):
                data += chunk
        except TimeoutError:
            pass
        self.request.sendall(self.server.name.encode() + b":" + data)


class _UdpEcho(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        data, sock = self.request
        sock.sendto(self.server.name.encode() + b":" + data, self.client_address)


def _serve(server_class, handler, name: str) -> socketserver.BaseServer:
    server = server_class((ADDRESSES[name], ECHO_PORT), handler)
    server.name = name
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return server


@pytest.fixture(scope="module")
def echoes() -> Iterator[None]:
    socketserver.ThreadingTCPServer.allow_reuse_address = True
    servers = [_serve(socketserver.ThreadingTCPServer, _TcpEcho, name) for name in ADDRESSES]
    servers += [_serve(socketserver.ThreadingUDPServer, _UdpEcho, name) for name in ADDRESSES]
    yield
    for server in servers:
        server.shutdown()


@pytest.fixture(scope="module")
def stage(echoes) -> Iterator[tuple[Controller, ManifestsCluster]]:
    # Where nginx's workers can read the endpoints file (pytest's tmp_path has 0700 parents).
    with reachable([f"--tcp-services-configmap={TCP_CONFIGMAP}", f"--udp-services-configmap={UDP_CONFIGMAP}"]) as started:
        yield started


def configmap(reference: str, data: dict[str, str]) -> dict:
    namespace, name = reference.split("/")
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace}, "data": data}


def echo_service(name: str, *endpoints: str, protocol: str = "TCP") -> list[dict]:
    service, slice_ = k8s.service(name, port=7000), k8s.endpoint_slice(name, [ADDRESSES[e] for e in endpoints], ECHO_PORT)
    service["spec"]["ports"][0]["protocol"] = slice_["ports"][0]["protocol"] = protocol
    return [service, slice_]


def tcp(port: int, data: bytes, host: str = "127.0.0.1") -> bytes:
    with socket.create_connection((host, port), timeout=3) as connection:
        connection.sendall(data)
        return connection.recv(4096)


def udp(port: int, data: bytes, host: str = "127.0.0.1") -> bytes:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(2)
        sock.sendto(data, (host, port))
        return sock.recv(4096)


def answers(send, port: int, data: bytes, expected: bytes) -> None:
    def check() -> bool:
        try:
            return send(port, data) == expected
        except OSError:
            return False
    wait_for(check, 20, what=f"port {port} answering {expected!r}")


def test_tcp_and_udp_services_follow_their_endpoints_without_reload(stage):
    controller, cluster = stage
    tcp_port, udp_port = free_port(), free_port()
    cluster.apply(*echo_service("tcp-echo", "A"), *echo_service("dns-echo", "A", protocol="UDP"))
    cluster.apply(configmap(TCP_CONFIGMAP, {str(tcp_port): "default/tcp-echo:7000"}),
                  configmap(UDP_CONFIGMAP, {str(udp_port): "default/dns-echo:7000"}))
    answers(tcp, tcp_port, b"hello", b"A:hello")
    answers(udp, udp_port, b"query", b"A:query")

    reloads = controller.settled_reloads()
    cluster.apply(*echo_service("tcp-echo", "B"), *echo_service("dns-echo", "B", protocol="UDP"))
    answers(tcp, tcp_port, b"hello", b"B:hello")
    answers(udp, udp_port, b"query", b"B:query")
    assert controller.metric("nginx_ingress_controller_success") == reloads

    # No endpoints: the connection is closed, nothing else answers for it. The client sends nothing: nginx closes
    # before it reads, and bytes it had not read would turn its close into a reset, or not, by a race.
    cluster.apply(*echo_service("tcp-echo"))
    wait_for(lambda: tcp(tcp_port, b"") == b"", 20, what="the connection closed without endpoints")


def test_proxy_protocol_in_and_out(stage):
    controller, cluster = stage
    both, out_only = free_port(), free_port()
    cluster.apply(*echo_service("proxied", "A"))
    cluster.apply(configmap(TCP_CONFIGMAP, {str(both): "default/proxied:7000:PROXY:PROXY",
                                            str(out_only): "default/proxied:7000::PROXY"}))
    header = f"PROXY TCP4 203.0.113.7 127.0.0.1 41000 {both}\r\n".encode()
    # The client's PROXY header is read, and the one sent on carries the client it names (to the address
    # and port the client connected to).
    def reply_to_proxied() -> bytes:
        try:
            return tcp(both, header + b"hi")
        except OSError:
            return b""
    reply = wait_for(reply_to_proxied, 20, what="the PROXY-both port answering")
    assert reply == f"A:PROXY TCP4 203.0.113.7 127.0.0.1 41000 {both}\r\nhi".encode(), reply
    # Without the inbound one, the header sent on names the real peer.
    reply = wait_for(lambda: tcp(out_only, b"hi"), 20, what="the PROXY-out port answering")
    assert reply.startswith(b"A:PROXY TCP4 127.0.0.1 ") and reply.endswith(b"\r\nhi"), reply


def test_bad_entries_are_reported_and_the_others_served(stage):
    controller, cluster = stage
    good = free_port()
    cluster.apply(*echo_service("tcp-echo", "A"))
    cluster.apply(configmap(TCP_CONFIGMAP, {
        str(good): "default/tcp-echo:7000", str(controller.http_port): "default/tcp-echo:7000",
        "70000": "default/tcp-echo:7000", str(free_port()): "default/tcp-echo", str(free_port()): "x;y"}))
    cluster.apply(configmap(UDP_CONFIGMAP, {str(free_port()): "default/dns-echo:7000:PROXY"}))
    answers(tcp, good, b"hello", b"A:hello")
    messages = (f"port {controller.http_port} is the HTTP port; choose another port",
                "entry '70000': the key must be the port to listen on, 1-65535",
                "the value must be NAMESPACE/SERVICE:PORT", "the PROXY protocol is for TCP services only")
    # The status record follows the reload by a moment.
    wait_for(lambda: all(m in " ".join(controller.problems()) for m in messages), 15, what="the entries reported")
    assert controller.get("/", "nothing.example.com").status_code == 404  # HTTP still served on its port


def test_tcp_and_udp_services_answer_over_ipv6_too(stage):
    # ingress-nginx's stream servers listen on [::] beside the IPv4 port unless disable-ipv6 is set.
    controller, cluster = stage
    tcp_port, udp_port = free_port(), free_port()
    cluster.apply(*echo_service("tcp6-echo", "A"), *echo_service("dns6-echo", "A", protocol="UDP"))
    cluster.apply(configmap(TCP_CONFIGMAP, {str(tcp_port): "default/tcp6-echo:7000"}),
                  configmap(UDP_CONFIGMAP, {str(udp_port): "default/dns6-echo:7000"}))
    answers(partial(tcp, host="::1"), tcp_port, b"hello", b"A:hello")
    answers(partial(udp, host="::1"), udp_port, b"query", b"A:query")
    answers(tcp, tcp_port, b"hello", b"A:hello")


def test_a_killed_master_keeps_serving_the_tcp_services(stage):
    # The launcher keeps the applied nginx.conf (the stream ports are nginx's own, not the holder's): a restarted
    # master serves the TCP services at once instead of starting from the bootstrap configuration.
    controller, cluster = stage
    tcp_port = free_port()
    cluster.apply(*echo_service("tcp-restart-echo", "B"))
    cluster.apply(configmap(TCP_CONFIGMAP, {str(tcp_port): "default/tcp-restart-echo:7000"}))
    answers(tcp, tcp_port, b"hello", b"B:hello")
    old_master = controller.kill9("nginx")
    wait_for(lambda: controller.pid("nginx") not in (0, old_master), 15, what="a new nginx master")
    answers(tcp, tcp_port, b"again", b"B:again")
    assert "listens elsewhere" not in controller.log_path.read_text(errors="replace")

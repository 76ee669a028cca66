"""TLS listeners in Terminate mode, TLSRoute weights and wildcard host names, through the whole controller
(--enable-ssl-passthrough) with real TLS handshakes, from the conformance suite's cases (our manifests):
TLSRouteTerminateSimpleSameNamespace, TLSRouteMixedTerminationSameNamespace (a Terminate and a Passthrough listener
on one port), BackendTLSPolicyTLSRouteTerminate (TLS again to a backend with a policy: verified, wrong CA and wrong
name refused), and the weighted and wildcard TLSRoutes the passthrough proxy now takes, in manifests mode; the status
of TLSRouteListenerTerminateSupportedKinds, TLSRouteMixedTerminationSameNamespace and
BackendTLSPolicyTLSRouteTerminate through the API test server."""
from __future__ import annotations

import json
import socket
import socketserver
import ssl
import threading
from collections import Counter
from typing import Iterator

import pytest
import requests

from tests.e2e.gateway.api_stage import api_gateway_stage
from tests.e2e.gateway.test_conformance_cases import ACCEPTED, RESOLVED, api, gateway_status, route_parents  # noqa: F401
from tests.e2e.gateway.test_gateway_tls_validation import TlsApiCluster
from tests.e2e.tls.pki import TestCA, served_certificate, start_tls_echo, tls_secret
from tests.support import gateway_objects as gw
from tests.support.gateway_status import conditions, listener_status
from tests.support import k8s
from tests.support.controller import start_manifests_controller
from tests.support.net import wait_for

from .conftest import GatewayStage

PLAIN_IPS = ("127.0.42.2", "127.0.42.3")  # plain TCP backends, one per address
TLS_IPS = ("127.0.42.4", "127.0.42.5")  # TLS backends with their own certificates
TERMINATE_HOST = "tls.term.example"
PASSTHROUGH_HOST = "abc.term.example"


BIG = 8 * 1024 * 1024


class _Plain(socketserver.BaseRequestHandler):
    """Says who it is, then echoes each line back (a long one cut, with its length): what the client reads proves
    the stream reached it in clear. To "big" it answers BIG bytes and closes."""

    def handle(self) -> None:
        self.request.sendall(f"plain {self.server.server_address[0]}\n".encode())
        with self.request.makefile("rb") as lines:
            for line in lines:
                if line == b"big\n":
                    self.request.sendall(bytes(BIG))
                    return
                echo = line if len(line) <= 64 else line[:8] + f"... {len(line)} bytes\n".encode()
                self.request.sendall(b"echo " + echo)


@pytest.fixture(scope="module")
def ca(tmp_path_factory) -> TestCA:
    return TestCA(tmp_path_factory.mktemp("terminate-pki"))


@pytest.fixture(scope="module")
def plain_port() -> int:
    servers = []
    port = 0
    for ip in PLAIN_IPS:
        server = socketserver.ThreadingTCPServer((ip, port), _Plain)
        server.daemon_threads = True
        port = server.server_address[1]
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        servers.append(server)
    yield port
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def tls_port(ca, tmp_path_factory) -> int:
    servers = []
    port = 0
    for ip in TLS_IPS:
        servers.append(start_tls_echo((ip, port), ca.issue(f"backend {ip}"), tmp_path_factory.mktemp("tls-backend")))
        port = servers[-1].server_address[1]
    yield port
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def stage(tmp_path_factory, echo, ca, plain_port, tls_port):
    """A controller with --enable-ssl-passthrough, a Gateway with a Terminate and a Passthrough TLS listener on 443,
    and Services "plain-a"/"plain-b" (plain TCP) and "tls-a"/"tls-b" (TLS with their own certificates)."""
    controller, cluster = start_manifests_controller(tmp_path_factory.mktemp("terminate"), ["--enable-ssl-passthrough"])
    services = []
    for prefix, ips, port in (("plain", PLAIN_IPS, plain_port), ("tls", TLS_IPS, tls_port)):
        for letter, ip in zip("ab", ips):
            services += [k8s.service(f"{prefix}-{letter}", port=3000), k8s.endpoint_slice(f"{prefix}-{letter}", [ip], port)]
    cluster.apply(*services, tls_secret("terminate-cert", ca.issue(TERMINATE_HOST, (TERMINATE_HOST,))),
                  gw.gateway_class(),
                  gw.gateway("mixed", listeners=[
                      gw.listener("tls-terminate", port=443, protocol="TLS", hostname=TERMINATE_HOST,
                                  certificate="terminate-cert", kinds=["TLSRoute"]),
                      gw.listener("tls-passthrough", hostname=PASSTHROUGH_HOST, passthrough=True, kinds=["TLSRoute"]),
                      gw.listener("wild", hostname="*.wild.example", passthrough=True)]))
    yield GatewayStage(controller, cluster, echo)
    controller.stop()


def plain_through_tls(stage, host: str, ca: TestCA) -> tuple[str, str]:
    """(the first line, the echo of "ping") over TLS to `host`, the server's certificate verified for `host`."""
    context = ssl.create_default_context(cafile=str(ca.cert_path))
    with socket.create_connection(("127.0.0.1", stage.controller.https_port), timeout=5) as raw, \
            context.wrap_socket(raw, server_hostname=host) as tls, tls.makefile("rwb") as stream:
        first = stream.readline().decode().strip()
        stream.write(b"ping\n")
        stream.flush()
        return first, stream.readline().decode().strip()


def backend_seen(stage, host: str, ca: TestCA) -> str | None:
    """The common name of the certificate seen for SNI `host`; None when the handshake fails (nginx's own
    certificate, or a connection closed)."""
    try:
        return served_certificate(stage.controller.https_port, host, [ca.cert_path], check_hostname=False)["commonName"]
    except (ssl.SSLError, OSError):
        return None


def test_a_terminate_listener_ends_tls_and_the_backend_gets_plain_bytes(stage, ca):
    """TLSRouteTerminateSimpleSameNamespace."""
    stage.cluster.apply(gw.tls_route("terminated", gw.backend_ref("plain-a", 3000),
                                     parents=[{"name": "mixed", "sectionName": "tls-terminate"}],
                                     hostnames=[TERMINATE_HOST]))

    def answered() -> bool:
        try:
            return plain_through_tls(stage, TERMINATE_HOST, ca) == (f"plain {PLAIN_IPS[0]}", "echo ping")
        except (ssl.SSLError, OSError):
            return False
    wait_for(answered, 15, what="TLS ended with the listener's certificate, the plain stream at plain-a")


def test_terminated_streams_carry_large_transfers_both_ways_and_the_backends_end(stage, ca):
    stage.cluster.apply(gw.tls_route("terminated", gw.backend_ref("plain-a", 3000),
                                     parents=[{"name": "mixed", "sectionName": "tls-terminate"}],
                                     hostnames=[TERMINATE_HOST]))
    wait_for(lambda: plain_through_tls(stage, TERMINATE_HOST, ca)[0] == f"plain {PLAIN_IPS[0]}", 15,
             what="the terminated host at plain-a")
    context = ssl.create_default_context(cafile=str(ca.cert_path))
    with socket.create_connection(("127.0.0.1", stage.controller.https_port), timeout=10) as raw, \
            context.wrap_socket(raw, server_hostname=TERMINATE_HOST) as tls:
        tls.sendall(b"big\n")
        received = bytearray()
        while data := tls.recv(1 << 20):  # b"": the backend's EOF, passed on as a close_notify
            received += data
    assert len(received) == len(f"plain {PLAIN_IPS[0]}\n") + BIG
    with socket.create_connection(("127.0.0.1", stage.controller.https_port), timeout=10) as raw, \
            context.wrap_socket(raw, server_hostname=TERMINATE_HOST) as tls, tls.makefile("rwb") as stream:
        stream.readline()
        stream.write(b"x" * (BIG - 1) + b"\n")
        stream.flush()
        assert stream.readline() == f"echo xxxxxxxx... {BIG} bytes\n".encode()


def metric(stage, name: str, label: str = "") -> float:
    """The sum of the controller's `name` series (with `label`, e.g. 'outcome="terminated"')."""
    text = requests.get(f"http://127.0.0.1:{stage.controller.healthz_port}/metrics", timeout=5).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(name + "{") and label in line)


def client_hello(host: str) -> bytes:
    """A real ClientHello for SNI `host`, as the first bytes a TLS client sends."""
    client = ssl.create_default_context().wrap_bio(ssl.MemoryBIO(), outgoing := ssl.MemoryBIO(), server_hostname=host)
    with pytest.raises(ssl.SSLWantReadError):
        client.do_handshake()
    return outgoing.read()


def test_a_client_that_leaves_mid_handshake_leaves_no_connection_behind(stage, ca):
    stage.cluster.apply(gw.tls_route("terminated", gw.backend_ref("plain-a", 3000),
                                     parents=[{"name": "mixed", "sectionName": "tls-terminate"}],
                                     hostnames=[TERMINATE_HOST]))
    wait_for(lambda: plain_through_tls(stage, TERMINATE_HOST, ca)[0] == f"plain {PLAIN_IPS[0]}", 15,
             what="the terminated host at plain-a")
    terminated = metric(stage, "pyngress_passthrough_connections_total", 'outcome="terminated"')
    for _ in range(3):
        with socket.create_connection(("127.0.0.1", stage.controller.https_port), timeout=5) as raw:
            raw.sendall(client_hello(TERMINATE_HOST))
            raw.settimeout(0.5)
            try:
                while raw.recv(65536):  # the server's whole first flight, so that the close is a FIN, not a reset
                    pass
            except TimeoutError:
                pass
    wait_for(lambda: metric(stage, "pyngress_passthrough_connections_total", 'outcome="terminated"') >= terminated + 3
             and metric(stage, "pyngress_passthrough_active_connections") == 0, 15,
             what="the three handshakes counted, and no connection left open")


def test_mixed_termination_on_one_port_routes_each_host_by_its_mode(stage, ca):
    """TLSRouteMixedTerminationSameNamespace: the Passthrough host's backend shows its own certificate, while the
    Terminate host (above) shows the listener's."""
    stage.cluster.apply(gw.tls_route("passed", gw.backend_ref("tls-a", 3000),
                                     parents=[{"name": "mixed", "sectionName": "tls-passthrough"}],
                                     hostnames=[PASSTHROUGH_HOST]),
                        gw.tls_route("terminated", gw.backend_ref("plain-a", 3000),
                                     parents=[{"name": "mixed", "sectionName": "tls-terminate"}],
                                     hostnames=[TERMINATE_HOST]))
    wait_for(lambda: backend_seen(stage, PASSTHROUGH_HOST, ca) == f"backend {TLS_IPS[0]}", 15,
             what="the Passthrough host at its backend's own certificate")
    wait_for(lambda: backend_seen(stage, TERMINATE_HOST, ca) == TERMINATE_HOST, 15,
             what="the Terminate host with the listener's certificate")


def test_weights_split_connections_between_backends(stage, ca):
    stage.cluster.apply(gw.tls_route("split", gw.backend_ref("tls-a", 3000, weight=3),
                                     gw.backend_ref("tls-b", 3000, weight=1), gw.backend_ref("tls-a", 3000, weight=0),
                                     parents=[{"name": "mixed", "sectionName": "wild"}],
                                     hostnames=["split.wild.example"]))
    wait_for(lambda: backend_seen(stage, "split.wild.example", ca) in (f"backend {TLS_IPS[0]}",
                                                                        f"backend {TLS_IPS[1]}"), 15,
             what="split.wild.example passed through")
    # Each proxy process cycles through a 3:1 schedule, so 40 connections over any processes land within a few of
    # 30:10 (the kernel spreads connections over the processes).
    seen = Counter(backend_seen(stage, "split.wild.example", ca) for _ in range(40))
    assert set(seen) == {f"backend {TLS_IPS[0]}", f"backend {TLS_IPS[1]}"}
    assert 26 <= seen[f"backend {TLS_IPS[0]}"] <= 34, seen


def test_terminate_weights_split_connections_too(stage, ca):
    stage.cluster.apply(gw.tls_route("terminated", gw.backend_ref("plain-a", 3000, weight=1),
                                     gw.backend_ref("plain-b", 3000, weight=1),
                                     parents=[{"name": "mixed", "sectionName": "tls-terminate"}],
                                     hostnames=[TERMINATE_HOST]))

    def both() -> bool:
        try:
            return {plain_through_tls(stage, TERMINATE_HOST, ca)[0] for _ in range(6)} == {
                f"plain {ip}" for ip in PLAIN_IPS}
        except (ssl.SSLError, OSError):
            return False
    wait_for(both, 15, what="terminated connections at both plain backends")


def test_wildcards_most_specific_first_and_hosts_served_elsewhere_stay_with_nginx(stage, ca):
    stage.cluster.apply(
        gw.tls_route("wide", gw.backend_ref("tls-a", 3000), parents=[{"name": "mixed", "sectionName": "wild"}],
                     hostnames=["*.wild.example"]),
        gw.tls_route("deeper", gw.backend_ref("tls-b", 3000), parents=[{"name": "mixed", "sectionName": "wild"}],
                     hostnames=["*.deep.wild.example", "exact.wild.example"]),
        k8s.ingress("web", [k8s.rule("web.wild.example", ("/", "Prefix", "app", 80))]))
    wide, deeper = f"backend {TLS_IPS[0]}", f"backend {TLS_IPS[1]}"
    wait_for(lambda: backend_seen(stage, "one.wild.example", ca) == wide, 15, what="*.wild.example passed through")
    assert backend_seen(stage, "two.labels.wild.example", ca) == wide  # a wildcard covers several labels
    wait_for(lambda: backend_seen(stage, "x.deep.wild.example", ca) == deeper, 15, what="the longest wildcard wins")
    assert backend_seen(stage, "exact.wild.example", ca) == deeper  # an exact name before any wildcard
    assert backend_seen(stage, "wild.example", ca) is None  # not covered by *.wild.example: nginx's certificate
    wait_for(lambda: backend_seen(stage, "web.wild.example", ca) is None, 15,
             what="an Ingress host under the wildcard left to nginx")


def test_terminate_and_passthrough_listeners_on_one_port_are_accepted_with_their_routes(api, ca):  # noqa: F811
    """TLSRouteListenerTerminateSupportedKinds, and the status part of TLSRouteMixedTerminationSameNamespace: both
    listeners Accepted, supporting TLSRoute, one route attached to each; the routes Accepted with ResolvedRefs."""
    ns = "conf-terminate"
    api.cluster.apply(
        *api.backend("GW-CONF-TERMINATE", "term-app", namespace=ns),
        tls_secret("term-cert", ca.issue("tls.example.com", ("tls.example.com",)), namespace=ns),
        gw.gateway("mixed", ns=ns, listeners=[
            gw.listener("tls-terminate", port=443, protocol="TLS", hostname="tls.example.com", certificate="term-cert",
                        kinds=["TLSRoute"]),
            gw.listener("tls-passthrough", hostname="abc.example.com", passthrough=True, kinds=["TLSRoute"])]),
        gw.tls_route("terminated", gw.backend_ref("term-app"), ns=ns, hostnames=["tls.example.com"],
                     parents=[{"name": "mixed"}]),
        gw.tls_route("passed", gw.backend_ref("term-app"), ns=ns, hostnames=["abc.example.com"],
                     parents=[{"name": "mixed"}]))
    for route in ("terminated", "passed"):
        route_parents(api, "TLSRoute", route, ns, {"Accepted": ACCEPTED, "ResolvedRefs": RESOLVED})

    def both_attached() -> bool:
        status = gateway_status(api, "mixed", ns)
        return all(listener_status(status, name)["attachedRoutes"] == 1 for name in ("tls-terminate", "tls-passthrough"))
    wait_for(both_attached, 15, what="one route attached to each listener")
    status = gateway_status(api, "mixed", ns)
    for name in ("tls-terminate", "tls-passthrough"):
        listener = listener_status(status, name)
        assert listener["supportedKinds"] == [{"group": gw.GROUP, "kind": "TLSRoute"}]
        assert conditions(listener)["Accepted"] == ACCEPTED


# --- BackendTLSPolicyTLSRouteTerminate: TLS again from the proxy to the backend ------------------------------------

SECURE_IP = "127.0.42.6"  # a TLS backend whose certificate names SECURE_NAME, from the test CA
SECURE_NAME = "backend.term.example"


@pytest.fixture(scope="module")
def secure_backend(ca, tmp_path_factory):
    server = start_tls_echo((SECURE_IP, 0), ca.issue(SECURE_NAME, (SECURE_NAME,)), tmp_path_factory.mktemp("secure"))
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def terminate_to_secure(stage, ca: TestCA, port: int, other_ca: TestCA, *, hostname: str, ca_map: str) -> None:
    """The Terminate host's route to the TLS backend "secure", with a policy of `hostname` and ConfigMap `ca_map`
    ("test-ca": the CA that signed the backend's certificate; "other-ca": another)."""
    stage.cluster.apply(
        k8s.service("secure", port=8443, port_name="btls"), k8s.endpoint_slice("secure", [SECURE_IP], port, port_name="btls"),
        k8s.config_map("test-ca", {"ca.crt": ca.cert_path.read_text()}),
        k8s.config_map("other-ca", {"ca.crt": other_ca.cert_path.read_text()}),
        gw.backend_tls_policy("secure-policy", "secure", ca_map, hostname=hostname, section="btls"),
        gw.tls_route("terminated", gw.backend_ref("secure", 8443), parents=[{"name": "mixed", "sectionName": "tls-terminate"}],
                     hostnames=[TERMINATE_HOST]))


def secure_answer(stage, ca: TestCA) -> dict | None:
    """The TLS backend's JSON answer to a GET over the terminated host; None when the connection is closed first."""
    context = ssl.create_default_context(cafile=str(ca.cert_path))
    try:
        with socket.create_connection(("127.0.0.1", stage.controller.https_port), timeout=5) as raw, \
                context.wrap_socket(raw, server_hostname=TERMINATE_HOST) as tls:
            tls.sendall(f"GET / HTTP/1.1\r\nHost: {TERMINATE_HOST}\r\nConnection: close\r\n\r\n".encode())
            answer = b""
            while data := tls.recv(65536):
                answer += data
    except (ssl.SSLError, OSError):
        return None
    head, _, body = answer.partition(b"\r\n\r\n")
    return json.loads(body) if head.startswith(b"HTTP/1.") else None


@pytest.fixture(scope="module")
def other_ca(tmp_path_factory) -> TestCA:
    return TestCA(tmp_path_factory.mktemp("other-pki"))


def test_a_backend_tls_policy_makes_the_proxy_verify_the_terminated_hosts_backend(stage, ca, other_ca, secure_backend):
    """BackendTLSPolicyTLSRouteTerminate: the client's TLS ends at the listener's certificate, and the stream goes to
    the backend over TLS, the backend's certificate verified against the policy's ConfigMap, for its hostname, which
    is also the SNI the backend sees."""
    terminate_to_secure(stage, ca, secure_backend, other_ca, hostname=SECURE_NAME, ca_map="test-ca")
    wait_for(lambda: (secure_answer(stage, ca) or {}).get("sni") == SECURE_NAME, 15,
             what="the terminated stream at the TLS backend, with the policy's hostname as SNI")
    assert backend_seen(stage, TERMINATE_HOST, ca) == TERMINATE_HOST  # the client still sees the listener's certificate


@pytest.mark.parametrize("wrong", ["ca", "hostname"])
def test_a_backend_whose_certificate_does_not_verify_gets_the_client_connection_closed(stage, ca, other_ca,
                                                                                      secure_backend, wrong):
    """A policy whose CA did not sign the backend's certificate, or whose hostname the certificate does not hold:
    the client's connection is closed before any byte reaches the backend, and the refusal is counted."""
    terminate_to_secure(stage, ca, secure_backend, other_ca, hostname=SECURE_NAME, ca_map="test-ca")
    wait_for(lambda: (secure_answer(stage, ca) or {}).get("sni") == SECURE_NAME, 15, what="the verified backend")
    refused = metric(stage, "pyngress_passthrough_connections_total", 'outcome="backend_tls_refused"')
    terminate_to_secure(stage, ca, secure_backend, other_ca, hostname="other.term.example" if wrong == "hostname"
                        else SECURE_NAME, ca_map="other-ca" if wrong == "ca" else "test-ca")
    wait_for(lambda: secure_answer(stage, ca) is None, 15, what=f"the backend refused for its {wrong}")
    wait_for(lambda: metric(stage, "pyngress_passthrough_connections_total", 'outcome="backend_tls_refused"')
             > refused, 10, what="the refusal counted")


@pytest.fixture(scope="module")
def policy_api(tmp_path_factory, echo) -> Iterator[GatewayStage]:
    """A controller watching the API test server, which also takes BackendTLSPolicies, with the passthrough proxy."""
    with api_gateway_stage(tmp_path_factory.mktemp("btls-terminate-api"), tmp_path_factory.mktemp("kubeconfig"), echo,
                           "--enable-ssl-passthrough", "--election-id=btls-terminate",
                           cluster_type=TlsApiCluster) as stage:
        yield stage


def test_a_policy_of_a_terminated_tlsroutes_backend_is_accepted_for_its_gateway(policy_api, ca):
    """The status part of BackendTLSPolicyTLSRouteTerminate: the policy of the TLSRoute's backend Service has the
    route's Gateway among its ancestors, Accepted with its references resolved."""
    ns = "conf-btls-terminate"
    policy = gw.backend_tls_policy("secure-policy", "term-tls-app", "tls-checks-ca", hostname="abc.example.com", ns=ns,
                                   section="btls")
    policy_api.cluster.apply(
        k8s.service("term-tls-app", port=8443, namespace=ns, port_name="btls"),
        k8s.endpoint_slice("term-tls-app", ["127.0.42.7"], 8443, namespace=ns, port_name="btls"),
        k8s.config_map("tls-checks-ca", {"ca.crt": ca.cert_path.read_text()}, namespace=ns),
        tls_secret("term-cert", ca.issue("tls.example.com", ("tls.example.com",)), namespace=ns),
        gw.gateway("btls-terminate", ns=ns, listeners=[
            gw.listener("tls-terminate", port=443, protocol="TLS", hostname="tls.example.com", certificate="term-cert",
                        kinds=["TLSRoute"])]),
        gw.tls_route("btls-terminate", gw.backend_ref("term-tls-app", 8443), ns=ns, hostnames=["tls.example.com"],
                     parents=[{"name": "btls-terminate"}]),
        policy)
    route_parents(policy_api, "TLSRoute", "btls-terminate", ns, {"Accepted": ACCEPTED, "ResolvedRefs": RESOLVED})
    found: dict[str, tuple[str, str]] = {}

    def written() -> bool:
        obj = policy_api.cluster.policy("secure-policy", ns)
        for entry in (obj.get("status") or {}).get("ancestors") or ():
            if entry["controllerName"] == gw.CONTROLLER and entry["ancestorRef"]["name"] == "btls-terminate":
                found.update(conditions(entry))
                return True
        return False
    wait_for(written, 15, what="the policy's ancestor entry for the TLSRoute's Gateway")
    assert found["Accepted"] == ACCEPTED and found["ResolvedRefs"] == RESOLVED

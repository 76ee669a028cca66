"""TLSRoute through the whole controller in manifests mode, with the conformance suite's cases (our manifests): a TLS
listener in Passthrough mode hands a host's connections, by SNI and untouched, to its backend, which shows its own
certificate; hostnames are the intersection with the listener's; a cross-namespace backend needs a ReferenceGrant;
without --enable-ssl-passthrough the listener is not served."""
from __future__ import annotations

import ssl

import pytest

from tests.e2e.tls.pki import TestCA, served_certificate, start_tls_echo
from tests.support import gateway_objects as gw
from tests.support import k8s
from tests.support.controller import start_manifests_controller
from tests.support.net import wait_for

from .conftest import GatewayStage

BACKEND_IP = "127.0.41.2"
BACKEND_NAME = "tlsroute backend"  # the common name of the backend's own certificate, which no Secret holds


@pytest.fixture(scope="module")
def ca(tmp_path_factory) -> TestCA:
    return TestCA(tmp_path_factory.mktemp("tlsroute-pki"))


@pytest.fixture(scope="module")
def backend_port(ca, tmp_path_factory) -> int:
    server = start_tls_echo((BACKEND_IP, 0), ca.issue(BACKEND_NAME), tmp_path_factory.mktemp("tlsroute-backend"))
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def passthrough(tmp_path_factory, echo):
    """A controller with --enable-ssl-passthrough and a TLS Passthrough listener for *.pt.example."""
    controller, cluster = start_manifests_controller(tmp_path_factory.mktemp("tlsroute"), ["--enable-ssl-passthrough"])
    cluster.apply(gw.gateway_class(), gw.gateway("pt", listeners=[gw.listener("tls", hostname="*.pt.example",
                                                                               passthrough=True)]))
    yield GatewayStage(controller, cluster, echo)
    controller.stop()


def backend(port: int, name: str = "secure", ns: str = "default") -> list[dict]:
    return [k8s.service(name, port=443, namespace=ns), k8s.endpoint_slice(name, [BACKEND_IP], port, namespace=ns)]


def certificate_seen(stage, host: str, ca: TestCA) -> str | None:
    """The common name of the certificate a client verifying against the test CA sees for SNI `host`; None when the
    handshake fails (nginx's own certificate, or a connection closed)."""
    try:
        return served_certificate(stage.controller.https_port, host, [ca.cert_path], check_hostname=False)["commonName"]
    except (ssl.SSLError, OSError):
        return None


def test_a_host_is_passed_through_to_its_backend_by_sni(passthrough, ca, backend_port):
    passthrough.cluster.apply(*backend(backend_port), gw.tls_route("simple", gw.backend_ref("secure", 443),
                                                                   parents=[{"name": "pt"}],
                                                                   hostnames=["abc.pt.example"]))
    wait_for(lambda: certificate_seen(passthrough, "abc.pt.example", ca) == BACKEND_NAME, 15,
             what="abc.pt.example passed through to the backend's own certificate")
    assert certificate_seen(passthrough, "other.pt.example", ca) is None  # nginx's certificate: not passed through


def test_hostnames_are_the_intersection_with_the_listener(passthrough, ca, backend_port):
    passthrough.cluster.apply(*backend(backend_port), gw.tls_route(
        "intersect", gw.backend_ref("secure", 443), parents=[{"name": "pt"}], version=f"{gw.GROUP}/v1alpha2",
        hostnames=["one.pt.example", "two.elsewhere.example"]))
    wait_for(lambda: certificate_seen(passthrough, "one.pt.example", ca) == BACKEND_NAME, 15,
             what="the host within the listener's hostname")
    assert certificate_seen(passthrough, "two.elsewhere.example", ca) is None


def test_a_route_with_no_hostname_in_the_listener_is_not_served(passthrough, ca, backend_port):
    passthrough.cluster.apply(*backend(backend_port), gw.tls_route(
        "outside", gw.backend_ref("secure", 443), parents=[{"name": "pt"}], hostnames=["outside.example"]))
    wait_for(lambda: any("TLSRoute default/outside" in p and "NoMatchingListenerHostname" in p
                         for p in passthrough.controller.problems()), 10, what="the route refused")
    assert certificate_seen(passthrough, "outside.example", ca) is None


def test_a_backend_in_another_namespace_needs_a_reference_grant(passthrough, ca, backend_port):
    host = "vault.pt.example"
    passthrough.cluster.apply(*backend(backend_port, "vault", ns="vault"), gw.tls_route(
        "vault", gw.backend_ref("vault", 443, ns="vault"), parents=[{"name": "pt"}], hostnames=[host]))
    wait_for(lambda: any("TLSRoute default/vault" in p and "RefNotPermitted" in p
                         for p in passthrough.controller.problems()), 10, what="the reference refused")
    assert certificate_seen(passthrough, host, ca) is None
    passthrough.cluster.apply(gw.reference_grant("tlsroutes", ns="vault", from_namespace="default",
                                                 from_kind="TLSRoute"))
    wait_for(lambda: certificate_seen(passthrough, host, ca) == BACKEND_NAME, 15, what="passed through once granted")


def test_without_ssl_passthrough_a_tls_listener_is_not_served(stage):
    stage.cluster.apply(gw.gateway("no-pt", listeners=[gw.listener("tls", hostname="x.pt.example", passthrough=True)]))
    wait_for(lambda: any("Gateway default/no-pt" in p and "--enable-ssl-passthrough" in p
                         for p in stage.controller.problems()), 10, what="the TLS listener refused")

"""TLS on both sides of Gateway routes, through the whole controller in API mode (real nginx, real certificates): a
Gateway's client-certificate validation (spec.tls.frontend), BackendTLSPolicies verifying the backends nginx speaks
TLS to, and the client certificate a Gateway shows them (spec.tls.backend), each as its conformance case asserts it
(GatewayFrontendClientCertificateValidation, GatewayFrontendClientCertificateValidationInsecureFallback,
GatewayFrontendInvalidDefaultClientCertificateValidation, GatewayInvalidFrontendClientCertificateValidation,
BackendTLSPolicy, BackendTLSPolicyInvalidCACertificateRef, BackendTLSPolicyInvalidKind,
BackendTLSPolicyConflictResolution, BackendTLSPolicyObservedGenerationBump, BackendTLSPolicyGRPCRoute,
GatewayTLSBackendClientCertificate, GatewayInvalidTLSBackendConfiguration), status included.

A refused client is one whose request gets no answer: the conformance suite counts any answer, even a 400, as served.
"""
from __future__ import annotations

import http.client
import json
import socket
import ssl
import subprocess
from pathlib import Path
from typing import Any, Iterator

import pytest
from kubernetes import client

from tests.e2e.gateway.conftest import GatewayStage
from tests.e2e.gateway.test_status import gateway_status
from tests.e2e.gateway.api_stage import GatewayApiCluster, api_gateway_stage
from tests.e2e.tls.pki import Pair, TestCA, https_get, start_tls_echo, tls_secret
from tests.integration.proxy.harness import Nginx, http_temp_paths
from tests.support import gateway_objects as gw
from tests.support import k8s
from tests.support.client_pki import Pki
from tests.support.gateway_status import conditions, listener_status
from tests.support.net import free_port, wait_for

REFUSED = "refused"
TLS_BACKEND_IP, MTLS_BACKEND_IP, GRPCS_BACKEND_IP = "127.0.36.2", "127.0.36.3", "127.0.36.4"
GRPC_HOST = "grpc-tls.example"
BACKEND_HOST = "abc.example.com"  # the name the TLS backends' certificates hold
POLICIES = "backendtlspolicies"


class TlsApiCluster(GatewayApiCluster):
    """GatewayApiCluster that also applies and reads BackendTLSPolicies."""

    def apply(self, *objects: dict) -> None:
        for obj in objects:
            if obj["kind"] != "BackendTLSPolicy":
                super().apply(obj)
                continue
            self._ensure_namespace(obj)
            ns, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
            try:
                self.custom.create_namespaced_custom_object(gw.GROUP, "v1", ns, POLICIES, obj)
            except client.ApiException as err:
                if err.status != 409:
                    raise
                current = self.custom.get_namespaced_custom_object(gw.GROUP, "v1", ns, POLICIES, name)
                self.custom.replace_namespaced_custom_object(gw.GROUP, "v1", ns, POLICIES, name, {
                    **obj, "metadata": {**obj["metadata"], "resourceVersion": current["metadata"]["resourceVersion"]}})

    def policy(self, name: str, ns: str = "default") -> dict[str, Any]:
        return self.custom.get_namespaced_custom_object(gw.GROUP, "v1", ns, POLICIES, name)


@pytest.fixture(scope="module")
def stage(tmp_path_factory, echo) -> Iterator[GatewayStage]:
    with api_gateway_stage(tmp_path_factory.mktemp("gateway-tls"), tmp_path_factory.mktemp("kubeconfig"), echo,
                           "--publish-status-address=192.0.2.36", "--election-id=gateway-tls",
                           cluster_type=TlsApiCluster) as stage:
        yield stage


@pytest.fixture(scope="module")
def server_ca(tmp_path_factory) -> TestCA:
    """Signs the listeners' and the TLS backends' certificates."""
    return TestCA(tmp_path_factory.mktemp("server-ca"))


@pytest.fixture(scope="module")
def clients(tmp_path_factory) -> Pki:
    """Client CAs A and B; "good" is A's client certificate, "intruder" B's."""
    return Pki(tmp_path_factory.mktemp("client-pki"))


def client_cert(pki: Pki, name: str) -> tuple[Path, Path]:
    return pki.dir / f"{name}.crt", pki.dir / f"{name}.key"


def ca_config_map(name: str, pem: str, ns: str = "default") -> dict:
    return k8s.config_map(name, {"ca.crt": pem}, namespace=ns)


def ca_ref(name: str, kind: str = "ConfigMap", ns: str | None = None) -> dict:
    ref = {"group": "", "kind": kind, "name": name}
    return {**ref, "namespace": ns} if ns else ref


def validation(*refs: dict, mode: str | None = None) -> dict:
    found: dict[str, Any] = {"caCertificateRefs": list(refs)}
    return {"validation": {**found, "mode": mode} if mode else found}


def with_tls(gateway: dict, tls: dict) -> dict:
    return {**gateway, "spec": {**gateway["spec"], "tls": tls}}


def tls_answer(stage: GatewayStage, host: str, ca: TestCA, cert: tuple[Path, Path] | None = None,
               path: str = "/", port: int | None = None) -> str:
    """The echo backend that answered a request over TLS to `host` (its certificate checked against `ca`) on `port`
    (default: the controller's HTTPS port), its status when not 200, or REFUSED when the connection closed
    unanswered."""
    try:
        response = https_get(port or stage.controller.https_port, host, path, [ca.cert_path], client_cert=cert)
    except (http.client.RemoteDisconnected, ConnectionResetError, ssl.SSLError):
        return REFUSED
    if response.status != 200:
        return str(response.status)
    return json.loads(response.body)["backend"]


def expect_tls(stage: GatewayStage, host: str, ca: TestCA, want: str, cert: tuple[Path, Path] | None = None,
               path: str = "/", port: int | None = None) -> None:
    seen: list[str] = []
    wait_for(lambda: seen.append(tls_answer(stage, host, ca, cert, path, port)) or seen[-1] == want, 20,
             what=f"https://{host}{path} with {cert and cert[0].name} → {want} (last: {seen[-1:]})")


def listener_conditions(stage: GatewayStage, gateway: str, listener: str) -> dict[str, tuple[str, str]]:
    return conditions(listener_status(gateway_status(stage, gateway), listener))


@pytest.fixture(scope="module")
def listener_certificate(stage, server_ca) -> None:
    hosts = ("first.example", "second.example", "third.example", "fourth.example", "fifth.example", "own.example")
    stage.cluster.apply(tls_secret("listener-tls", server_ca.issue(hosts[0], hosts)))


def test_client_certificates_default_and_per_port(stage, server_ca, clients, listener_certificate):
    """GatewayFrontendClientCertificateValidation: the default validation for the listener on 443, the per-port one
    for the listener on the controller's HTTPS port and for one on a port of its own (as the case's 8443); a
    certificate of the other CA, or none, gets no answer."""
    port, own_port = stage.controller.https_port, free_port()
    stage.cluster.apply(ca_config_map("ca-a", clients.text("ca-a.crt")), ca_config_map("ca-b", clients.text("ca-b.crt")),
                        *stage.backend("GW-MTLS-1"), *stage.backend("GW-MTLS-2"))
    stage.cluster.apply(with_tls(gw.gateway("mtls", listeners=[
        gw.listener("https", port=443, protocol="HTTPS", certificate="listener-tls"),
        gw.listener("https-with-hostname", port=port, protocol="HTTPS", hostname="second.example",
                    certificate="listener-tls"),
        gw.listener("https-own-port", port=own_port, protocol="HTTPS", hostname="own.example",
                    certificate="listener-tls")]),
        {"frontend": {"default": validation(ca_ref("ca-a")),
                      "perPort": [{"port": port, "tls": validation(ca_ref("ca-b"))},
                                  {"port": own_port, "tls": validation(ca_ref("ca-b"))}]}}))
    stage.cluster.apply(
        gw.http_route("mtls-first", hostnames=["first.example"], parents=[{"name": "mtls"}],
                      rules=[gw.rule(gw.backend_ref("gw-mtls-1"))]),
        gw.http_route("mtls-second", parents=[{"name": "mtls", "sectionName": "https-with-hostname"},
                                              {"name": "mtls", "sectionName": "https-own-port"}],
                      rules=[gw.rule(gw.backend_ref("gw-mtls-2"))]))
    good, intruder = client_cert(clients, "good"), client_cert(clients, "intruder")
    expect_tls(stage, "first.example", server_ca, "GW-MTLS-1", good)
    assert tls_answer(stage, "first.example", server_ca, intruder) == REFUSED
    assert tls_answer(stage, "first.example", server_ca) == REFUSED
    expect_tls(stage, "second.example", server_ca, "GW-MTLS-2", intruder)
    assert tls_answer(stage, "second.example", server_ca, good) == REFUSED
    expect_tls(stage, "own.example", server_ca, "GW-MTLS-2", intruder, port=own_port)
    assert tls_answer(stage, "own.example", server_ca, good, port=own_port) == REFUSED
    assert tls_answer(stage, "own.example", server_ca, port=own_port) == REFUSED
    for listener in ("https", "https-with-hostname", "https-own-port"):
        found = listener_conditions(stage, "mtls", listener)
        assert found["Accepted"] == ("True", "Accepted") and found["ResolvedRefs"] == ("True", "ResolvedRefs")
    assert "InsecureFrontendValidationMode" not in conditions(gateway_status(stage, "mtls"))


def test_insecure_fallback_serves_every_client_and_says_so(stage, server_ca, clients, listener_certificate):
    """GatewayFrontendClientCertificateValidationInsecureFallback."""
    stage.cluster.apply(ca_config_map("ca-a", clients.text("ca-a.crt")), *stage.backend("GW-FALLBACK"))
    stage.cluster.apply(with_tls(gw.gateway("fallback", listeners=[
        gw.listener("https", port=443, protocol="HTTPS", hostname="third.example", certificate="listener-tls")]),
        {"frontend": {"default": validation(ca_ref("ca-a"), mode="AllowInsecureFallback")}}),
        gw.http_route("fallback", parents=[{"name": "fallback"}], rules=[gw.rule(gw.backend_ref("gw-fallback"))]))
    expect_tls(stage, "third.example", server_ca, "GW-FALLBACK", client_cert(clients, "good"))
    assert tls_answer(stage, "third.example", server_ca, client_cert(clients, "intruder")) == "GW-FALLBACK"
    assert tls_answer(stage, "third.example", server_ca) == "GW-FALLBACK"
    wait_for(lambda: conditions(gateway_status(stage, "fallback")).get("InsecureFrontendValidationMode")
             == ("True", "ConfigurationChanged"), 15, what="InsecureFrontendValidationMode")


def test_invalid_default_validation_refuses_only_the_https_listener(stage, server_ca, listener_certificate):
    """GatewayFrontendInvalidDefaultClientCertificateValidation: the HTTP listener serves; the HTTPS one is not
    accepted, and its host is not served over TLS with its certificate."""
    stage.cluster.apply(*stage.backend("GW-MISSING-CA"))
    stage.cluster.apply(with_tls(gw.gateway("missing-ca", listeners=[
        gw.listener("https", port=443, protocol="HTTPS", hostname="fourth.example", certificate="listener-tls"),
        gw.listener("http", hostname="fourth.example")]),
        {"frontend": {"default": validation(ca_ref("does-not-exist"))}}),
        gw.http_route("missing-ca", parents=[{"name": "missing-ca"}], rules=[gw.rule(gw.backend_ref("gw-missing-ca"))]))
    stage.expect_answer("fourth.example", "/", "GW-MISSING-CA")
    https = listener_conditions(stage, "missing-ca", "https")
    assert (https["ResolvedRefs"], https["Accepted"], https["Programmed"][0]) == (
        ("False", "InvalidCACertificateRef"), ("False", "NoValidCACertificate"), "False")
    http = listener_conditions(stage, "missing-ca", "http")
    assert all(http[kind][0] == "True" for kind in ("Accepted", "ResolvedRefs", "Programmed"))
    assert tls_answer(stage, "fourth.example", server_ca) == REFUSED  # not its certificate: the handshake fails


def test_invalid_references_are_reported_per_listener(stage, clients, listener_certificate):
    """GatewayInvalidFrontendClientCertificateValidation: a kind other than ConfigMap, and a ConfigMap of another
    namespace without a ReferenceGrant, refuse only the listeners they apply to; a ReferenceGrant then lets it
    resolve."""
    port = stage.controller.https_port
    stage.cluster.apply(ca_config_map("ca-elsewhere", clients.text("ca-a.crt"), ns="other"))
    stage.cluster.apply(with_tls(gw.gateway("bad-refs", listeners=[
        gw.listener("http", hostname="fifth.example"),
        gw.listener("https-grant-missing", port=443, protocol="HTTPS", hostname="fifth.example",
                    certificate="listener-tls"),
        gw.listener("https-invalid-kind", port=port, protocol="HTTPS", hostname="sixth.example",
                    certificate="listener-tls")]),
        {"frontend": {"default": validation(ca_ref("ca-elsewhere", ns="other")),
                      "perPort": [{"port": port, "tls": validation(ca_ref("web", kind="Service"))}]}}))
    missing = listener_conditions(stage, "bad-refs", "https-grant-missing")
    assert (missing["ResolvedRefs"], missing["Accepted"]) == (("False", "RefNotPermitted"),
                                                              ("False", "NoValidCACertificate"))
    kind = listener_conditions(stage, "bad-refs", "https-invalid-kind")
    assert (kind["ResolvedRefs"], kind["Accepted"]) == (("False", "InvalidCACertificateKind"),
                                                        ("False", "NoValidCACertificate"))
    assert listener_conditions(stage, "bad-refs", "http")["Accepted"] == ("True", "Accepted")
    stage.cluster.apply(gw.reference_grant("ca-for-gateways", ns="other", from_namespace="default",
                                           from_kind="Gateway", to_kind="ConfigMap"))
    wait_for(lambda: listener_conditions(stage, "bad-refs", "https-grant-missing")["Accepted"] == ("True", "Accepted"),
             15, what="the listener accepted once the ReferenceGrant allows the ConfigMap")


# --- BackendTLSPolicy ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tls_backends(server_ca, clients, tmp_path_factory) -> Iterator[tuple[int, int]]:
    """(port of an HTTPS echo server for BACKEND_HOST, port of one that also requires a client certificate of CA A)."""
    pair = server_ca.issue(BACKEND_HOST)
    plain = start_tls_echo((TLS_BACKEND_IP, 0), pair, tmp_path_factory.mktemp("tls-backend"))
    mutual = start_tls_echo((MTLS_BACKEND_IP, 0), pair, tmp_path_factory.mktemp("mtls-backend"),
                            client_ca=clients.dir / "ca-a.crt")
    yield plain.server_address[1], mutual.server_address[1]
    for server in (plain, mutual):
        server.shutdown()
        server.server_close()


def tls_service(name: str, ip: str, port: int, ns: str = "default") -> list[dict]:
    return [k8s.service(name, 443, namespace=ns, port_name="btls"),
            k8s.endpoint_slice(name, [ip], port, namespace=ns, port_name="btls")]


def policy(name: str, service: str, *refs: dict, hostname: str = BACKEND_HOST, ns: str = "default",
           section: str | None = None, target_ns: str | None = None) -> dict:
    target = {"group": "", "kind": "Service", "name": service}
    if section:
        target["sectionName"] = section
    if target_ns:
        target["namespace"] = target_ns  # not a field of a policy's targetRefs: an attacker's try
    return {"apiVersion": f"{gw.GROUP}/v1", "kind": "BackendTLSPolicy", "metadata": {"name": name, "namespace": ns},
            "spec": {"targetRefs": [target], "validation": {"caCertificateRefs": list(refs), "hostname": hostname}}}


def system_ca_policy(name: str, service: str) -> dict:
    """A policy trusting the system's CAs (wellKnownCACertificates: System) instead of a ConfigMap's."""
    found = policy(name, service)
    validation = found["spec"]["validation"]
    del validation["caCertificateRefs"]
    validation["wellKnownCACertificates"] = "System"
    return found


def policy_conditions(stage: GatewayStage, name: str, gateway: str, ns: str = "default") -> dict[str, tuple[str, str]]:
    """The conditions of pyngress's ancestor entry for `gateway` in the policy's status, once written."""
    found: dict[str, tuple[str, str]] = {}

    def written() -> bool:
        obj = stage.cluster.policy(name, ns)
        for entry in (obj.get("status") or {}).get("ancestors") or ():
            if entry["controllerName"] == gw.CONTROLLER and entry["ancestorRef"]["name"] == gateway and all(
                    c.get("observedGeneration") == obj["metadata"]["generation"] for c in entry["conditions"]):
                found.update(conditions(entry))
                return True
        return False
    wait_for(written, 15, what=f"BackendTLSPolicy {name}'s ancestor {gateway}")
    return found


def backend_answer(stage: GatewayStage, path: str, host: str = BACKEND_HOST) -> dict:
    return stage.answer(host, path)


def test_backend_tls_policies_verify_the_backend(stage, server_ca, clients, tls_backends):
    """BackendTLSPolicy, BackendTLSPolicyInvalidCACertificateRef, BackendTLSPolicyInvalidKind,
    BackendTLSPolicyConflictResolution: a policy's CA and hostname verify the backend (its SNI the hostname); a wrong
    name or CA fails the request (502), a policy whose CA does not resolve answers 500 for its backends, and of two
    policies for one Service the older applies."""
    plain, _ = tls_backends
    stage.cluster.apply(ca_config_map("server-ca", server_ca.cert_path.read_text()),
                        ca_config_map("client-ca-b", clients.text("ca-b.crt")))
    services = {"/ok": "btls-ok", "/host-mismatch": "btls-host", "/cert-mismatch": "btls-cert",
                "/nonexistent": "btls-nocm", "/invalid-kind": "btls-kind", "/system-ca": "btls-system"}
    for service in services.values():
        stage.cluster.apply(*tls_service(service, TLS_BACKEND_IP, plain))
    stage.cluster.apply(
        policy("normative", "btls-ok", ca_ref("server-ca"), section="btls"),
        policy("host-mismatch", "btls-host", ca_ref("server-ca"), hostname="other.example.com"),
        policy("cert-mismatch", "btls-cert", ca_ref("client-ca-b")),
        policy("nonexistent-ca", "btls-nocm", ca_ref("no-such-config-map")),
        policy("invalid-kind", "btls-kind", ca_ref("server-ca", kind="Secret")),
        system_ca_policy("system-ca", "btls-system"),
        gw.gateway("backends", listeners=[gw.listener("http", hostname=BACKEND_HOST)]),
        gw.http_route("backends", parents=[{"name": "backends"}], rules=[
            gw.rule(gw.backend_ref(service, 443), matches=[gw.path_match(path, "Exact")])
            for path, service in services.items()]))
    wait_for(lambda: backend_answer(stage, "/ok")["status"] == 200, 20, what="served through verified TLS")
    seen = backend_answer(stage, "/ok")
    assert (seen["backend"], seen["sni"]) == ("tls-backend", BACKEND_HOST)
    # Each right after a verified request to the same backend: neither its TLS session nor its connection is reused.
    for path in ("/host-mismatch", "/cert-mismatch"):
        assert backend_answer(stage, "/ok")["status"] == 200
        assert backend_answer(stage, path)["status"] == 502, path
    assert backend_answer(stage, "/nonexistent")["status"] == 500
    assert backend_answer(stage, "/invalid-kind")["status"] == 500
    assert backend_answer(stage, "/system-ca")["status"] == 502  # the system's CAs do not trust the test CA
    accepted = {"Accepted": ("True", "Accepted"), "ResolvedRefs": ("True", "ResolvedRefs")}
    for name in ("normative", "host-mismatch", "cert-mismatch", "system-ca"):
        assert policy_conditions(stage, name, "backends") == accepted
    assert policy_conditions(stage, "nonexistent-ca", "backends") == {
        "Accepted": ("False", "NoValidCACertificate"), "ResolvedRefs": ("False", "InvalidCACertificateRef")}
    assert policy_conditions(stage, "invalid-kind", "backends") == {
        "Accepted": ("False", "NoValidCACertificate"), "ResolvedRefs": ("False", "InvalidKind")}
    # BackendTLSPolicyConflictResolution: a younger policy for the same Service does not apply.
    stage.cluster.apply(policy("host-mismatch-younger", "btls-host", ca_ref("server-ca")))
    assert policy_conditions(stage, "host-mismatch-younger", "backends")["Accepted"] == ("False", "Conflicted")
    assert backend_answer(stage, "/host-mismatch")["status"] == 502
    # The ConfigMap appears: the policy resolves, its backend is served verified.
    stage.cluster.apply(ca_config_map("no-such-config-map", server_ca.cert_path.read_text()))
    wait_for(lambda: backend_answer(stage, "/nonexistent")["status"] == 200, 20, what="served once the CA resolves")
    assert policy_conditions(stage, "nonexistent-ca", "backends") == accepted
    # BackendTLSPolicyObservedGenerationBump: a new hostname, a new generation observed; the old name no longer passes.
    stage.cluster.apply(policy("normative", "btls-ok", ca_ref("server-ca"), section="btls", hostname="foo.example.com"))
    assert stage.cluster.policy("normative")["metadata"]["generation"] == 2
    assert policy_conditions(stage, "normative", "backends") == accepted  # written for generation 2
    wait_for(lambda: backend_answer(stage, "/ok")["status"] == 502, 20, what="502 for the new hostname")


@pytest.fixture(scope="module")
def grpcs_backend(server_ca, tmp_path_factory) -> Iterator[int]:
    """The port of an nginx speaking HTTP/2 over TLS (as a gRPC server with TLS does) as BACKEND_HOST, answering with
    the SNI and protocol it saw."""
    directory = tmp_path_factory.mktemp("grpcs-backend")
    pair = server_ca.issue(BACKEND_HOST)
    (directory / "tls.crt").write_text(pair.cert)
    (directory / "tls.key").write_text(pair.key)
    port = free_port()
    backend = Nginx(directory, f"""
http {{
    access_log off;
    {http_temp_paths(directory)}
    server {{
        listen {GRPCS_BACKEND_IP}:{port} ssl http2;
        ssl_certificate {directory}/tls.crt;
        ssl_certificate_key {directory}/tls.key;
        location / {{ return 200 "backend=grpcs sni=$ssl_server_name protocol=$server_protocol\n"; }}
    }}
}}""")
    try:
        wait_for(lambda: socket.create_connection((GRPCS_BACKEND_IP, port), timeout=1).close() is None, 10,
                 what="the gRPC-over-TLS backend")
        yield port
    finally:
        backend.stop()


def grpc_call(stage: GatewayStage, path: str) -> str:
    """A gRPC-shaped call (HTTP/2 over TLS) to GRPC_HOST: the backend's answer, or nginx's status code."""
    port = stage.controller.https_port
    out = subprocess.run(["curl", "-sk", "--http2", "-X", "POST", "--resolve", f"{GRPC_HOST}:{port}:127.0.0.1",
                          "-H", "Content-Type: application/grpc", "-H", "TE: trailers", "--data-binary", "",
                          "-w", "%{http_code}", f"https://{GRPC_HOST}:{port}{path}"],
                         capture_output=True, text=True, timeout=10, check=True).stdout
    body, status = out[:-3], out[-3:]
    return body.strip() if body.startswith("backend=") else status


def test_backend_tls_policy_for_grpc_routes(stage, server_ca, grpcs_backend):
    """BackendTLSPolicyGRPCRoute: a GRPCRoute's backend verified as an HTTPRoute's is (grpcs); a wrong hostname
    fails the call."""
    stage.cluster.apply(ca_config_map("server-ca", server_ca.cert_path.read_text()),
                        tls_secret("grpc-listener-tls", server_ca.issue(GRPC_HOST)),
                        *tls_service("grpcs-app", GRPCS_BACKEND_IP, grpcs_backend),
                        *tls_service("grpcs-mismatch", GRPCS_BACKEND_IP, grpcs_backend),
                        policy("grpc-normative", "grpcs-app", ca_ref("server-ca")),
                        policy("grpc-host-mismatch", "grpcs-mismatch", ca_ref("server-ca"), hostname="other.example"),
                        gw.gateway("grpc-tls", listeners=[gw.listener("https", port=443, protocol="HTTPS",
                                                                      hostname=GRPC_HOST,
                                                                      certificate="grpc-listener-tls")]),
                        gw.grpc_route("grpc-tls", parents=[{"name": "grpc-tls"}], hostnames=[GRPC_HOST], rules=[
                            gw.rule(gw.backend_ref("grpcs-app", 443), matches=[gw.grpc_method("echo.Echo", "One")]),
                            gw.rule(gw.backend_ref("grpcs-mismatch", 443),
                                    matches=[gw.grpc_method("echo.Echo", "Two")])]))
    wait_for(lambda: grpc_call(stage, "/echo.Echo/One").startswith("backend="), 20, what="the verified gRPC backend")
    assert grpc_call(stage, "/echo.Echo/One") == f"backend=grpcs sni={BACKEND_HOST} protocol=HTTP/2.0"
    assert grpc_call(stage, "/echo.Echo/Two") == "502"
    for name in ("grpc-normative", "grpc-host-mismatch"):
        assert policy_conditions(stage, name, "grpc-tls") == {"Accepted": ("True", "Accepted"),
                                                              "ResolvedRefs": ("True", "ResolvedRefs")}


def test_gateway_shows_its_client_certificate_to_backends(stage, server_ca, clients, tls_backends):
    """GatewayTLSBackendClientCertificate and GatewayInvalidTLSBackendConfiguration."""
    _, mutual = tls_backends
    good = Pair(clients.text("good.crt"), clients.text("good.key"))
    stage.cluster.apply(ca_config_map("server-ca", server_ca.cert_path.read_text()), tls_secret("nginx-client", good),
                        *tls_service("mtls-app", MTLS_BACKEND_IP, mutual),
                        policy("mtls-app", "mtls-app", ca_ref("server-ca")),
                        tls_secret("elsewhere-client", good, namespace="other"))
    stage.cluster.apply(
        with_tls(gw.gateway("shows-certificate", listeners=[gw.listener("http", hostname="client.example")]),
                 {"backend": {"clientCertificateRef": {"group": "", "kind": "Secret", "name": "nginx-client"}}}),
        gw.http_route("shows-certificate", parents=[{"name": "shows-certificate"}],
                      rules=[gw.rule(gw.backend_ref("mtls-app", 443))]))
    wait_for(lambda: backend_answer(stage, "/", "client.example")["status"] == 200, 20,
             what="the backend that requires a client certificate served")
    assert backend_answer(stage, "/", "client.example")["client_cert"] == "client-good"
    assert conditions(gateway_status(stage, "shows-certificate"))["ResolvedRefs"] == ("True", "ResolvedRefs")
    invalid = {"missing-secret": ({"name": "no-such-secret"}, "InvalidClientCertificateRef"),
               "wrong-kind": ({"kind": "WrongKind", "name": "nginx-client"}, "InvalidClientCertificateRef"),
               "wrong-group": ({"group": "wrong.group.company.io", "name": "nginx-client"},
                               "InvalidClientCertificateRef"),
               "no-grant": ({"name": "elsewhere-client", "namespace": "other"}, "RefNotPermitted")}
    for name, (ref, _) in invalid.items():
        stage.cluster.apply(with_tls(gw.gateway(name, listeners=[gw.listener("http", hostname=f"{name}.example")]),
                                     {"backend": {"clientCertificateRef": {"group": "", "kind": "Secret", **ref}}}))
    for name, (_, reason) in invalid.items():
        found = conditions(gateway_status(stage, name))
        assert (found["ResolvedRefs"], found["Accepted"]) == (("False", reason), ("True", "Accepted")), name


def test_a_tenants_policy_reaches_neither_another_namespaces_service_nor_its_config_map(stage, server_ca, tls_backends):
    """A BackendTLSPolicy's targetRefs and caCertificateRefs are local: a tenant's policy naming the Service of
    namespace default changes nothing there, and one naming default's ConfigMap does not verify with it (its own
    backend answers 500, ResolvedRefs RefNotPermitted)."""
    plain, _ = tls_backends
    stage.cluster.apply(*stage.backend("GW-VICTIM", "victim"), ca_config_map("server-ca", server_ca.cert_path.read_text()),
                        *tls_service("tenant-app", TLS_BACKEND_IP, plain, ns="tenant"),
                        policy("hijack", "victim", ca_ref("server-ca"), ns="tenant", target_ns="default"),
                        policy("borrow", "tenant-app", ca_ref("server-ca", ns="default"), ns="tenant"),
                        gw.gateway("shared", listeners=[gw.listener("http", namespaces={"from": "All"})]),
                        gw.http_route("victim", hostnames=["victim.example"], parents=[{"name": "shared"}],
                                      rules=[gw.rule(gw.backend_ref("victim"))]),
                        gw.http_route("tenant", ns="tenant", hostnames=["tenant.example"],
                                      parents=[{"name": "shared", "namespace": "default"}],
                                      rules=[gw.rule(gw.backend_ref("tenant-app", 443))]))
    stage.expect_answer("victim.example", "/", "GW-VICTIM")  # still plain HTTP, unverified by the tenant's policy
    stage.expect_answer("tenant.example", "/", 500)
    assert policy_conditions(stage, "borrow", "shared", ns="tenant")["ResolvedRefs"] == ("False", "RefNotPermitted")
    assert not (stage.cluster.policy("hijack", "tenant").get("status") or {}).get("ancestors")

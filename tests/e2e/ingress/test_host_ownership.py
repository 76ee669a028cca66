"""Host ownership across namespaces (issue 31, attacks 3 and 4) through the whole controller, real nginx and real
TLS clients: a path on another namespace's host brings neither its certificate nor a redirect nor HSTS (and is
refused whole with strict-host-ownership); a server-alias never answers a passthrough host's plain HTTP."""
import json
from pathlib import Path

import pytest

from services.nginxconf.paths import NginxPaths
from tests.e2e.ingress.conftest import reachable
from tests.e2e.ingress.scenarios import Stage
from tests.e2e.tls.pki import TestCA, https_get, served_certificate, start_tls_echo, tls_secret
from tests.support import k8s
from tests.support.controller import start_manifests_controller
from tests.support.htpasswd import basic_auth_secret
from tests.support.net import wait_for

PREFIX = "nginx.ingress.kubernetes.io"
CONFIGMAP = ("default", "host-ownership")
FAKE = "Kubernetes Ingress Controller Fake Certificate"
END_CERTIFICATE = "-----END CERTIFICATE-----\n"
# The passthrough backend: an address of its own (tests/e2e/tls uses 127.0.30.2), and its own certificate.
PASSTHROUGH_BACKEND_IP = "127.0.31.2"
PASSTHROUGH_BACKEND_NAME = "passthrough backend"


@pytest.fixture(scope="module")
def ca(tmp_path_factory) -> TestCA:
    return TestCA(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def stage(echo):
    """A controller reading the ConfigMap default/host-ownership, where nginx's workers read htpasswd files."""
    with reachable([f"--configmap={'/'.join(CONFIGMAP)}"]) as (controller, cluster):
        yield Stage(controller, cluster, echo)


@pytest.fixture(scope="module")
def fake_certificate(stage, tmp_path_factory) -> Path:
    """nginx's generated fake certificate (without its key), for a client to trust."""
    pem = NginxPaths.of(stage.controller.state_dir, stage.controller.run_dir).default_certificate.read_text()
    path = tmp_path_factory.mktemp("fake") / "fake.crt"
    path.write_text(pem[:pem.index(END_CERTIFICATE) + len(END_CERTIFICATE)])
    return path


def owner_and_intruder(stage: Stage, ca: TestCA) -> None:
    """Namespace `owner` (older) serves plain.owner.test over HTTP with /admin behind basic auth, and
    tls.owner.test with a certificate of its own; namespace `intruder` adds one path on each, with a spec.tls and
    a certificate of its own for both."""
    stage.cluster.apply(
        *stage.backend("OWNER", namespace="owner"), *stage.backend("INTRUDER", namespace="intruder"),
        basic_auth_secret("admins", {"alice": "s3cret"}, namespace="owner"),
        tls_secret("owner-cert", ca.issue("tls.owner.test", organization="owner"), namespace="owner"),
        k8s.ingress("site", [k8s.rule("plain.owner.test", ("/", "Prefix", "owner", 80)),
                             k8s.rule("tls.owner.test", ("/", "Prefix", "owner", 80))], "owner",
                    tls=[{"hosts": ["tls.owner.test"], "secretName": "owner-cert"}], created="2024-01-01T00:00:00Z"),
        k8s.ingress("admin", [k8s.rule("plain.owner.test", ("/admin", "Prefix", "owner", 80))], "owner",
                    annotations={f"{PREFIX}/auth-type": "basic", f"{PREFIX}/auth-secret": "admins"},
                    created="2024-01-01T00:00:01Z"))
    stage.expect("plain.owner.test", "/admin", "401")
    stage.cluster.apply(
        tls_secret("stolen", ca.issue("plain.owner.test", ("plain.owner.test", "tls.owner.test"),
                                      organization="intruder"), namespace="intruder"),
        k8s.ingress("intruder", [k8s.rule("plain.owner.test", ("/admin/x", "Prefix", "intruder", 80)),
                                 k8s.rule("tls.owner.test", ("/x", "Prefix", "intruder", 80))], "intruder",
                    tls=[{"hosts": ["plain.owner.test", "tls.owner.test"], "secretName": "stolen"}],
                    created="2025-01-01T00:00:00Z"))


def served_over_tls(stage: Stage, host: str, path: str, trusted: list[Path]) -> str:
    """The backend that answers `host` + `path` over HTTPS (or the status code)."""
    response = https_get(stage.controller.https_port, host, path, trusted)
    return json.loads(response.body)["backend"] if response.status == 200 else str(response.status)


def test_a_path_on_another_namespaces_host_brings_no_certificate_redirect_or_hsts(stage, ca, fake_certificate):
    port, trusted = stage.controller.https_port, [ca.cert_path, fake_certificate]
    owner_and_intruder(stage, ca)
    # The intruder's paths are served, over plain HTTP, as ingress-nginx serves them.
    stage.expect("plain.owner.test", "/admin/x", "INTRUDER")
    wait_for(lambda: served_over_tls(stage, "tls.owner.test", "/x", [ca.cert_path]) == "INTRUDER", 10,
             what="the intruder's path on the owner's TLS host")

    plain = stage.controller.get("/", "plain.owner.test")
    assert plain.status_code == 200 and "location" not in plain.headers
    assert stage.controller.get("/admin", "plain.owner.test").status_code == 401
    response = https_get(port, "plain.owner.test", "/", trusted)
    assert response.status == 200 and "strict-transport-security" not in response.headers
    assert json.loads(response.body)["backend"] == "OWNER"
    assert served_certificate(port, "plain.owner.test", trusted, check_hostname=False)["commonName"] == FAKE
    # The owner's certificate stays the one served for its TLS host.
    assert served_certificate(port, "tls.owner.test", [ca.cert_path])["organizationName"] == "owner"
    assert any("Ingress intruder/intruder: spec.tls is ignored for host plain.owner.test: the host belongs to "
               "namespace owner" in problem for problem in stage.controller.problems())


def test_strict_host_ownership_refuses_the_intruders_ingress(stage, ca):
    owner_and_intruder(stage, ca)
    stage.expect("plain.owner.test", "/admin/x", "INTRUDER")
    namespace, name = CONFIGMAP
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": namespace, "name": name},
                 "data": {"strict-host-ownership": "true"}}
    stage.cluster.apply(configmap)
    try:
        # The owner's /admin, and its basic auth, now take /admin/x too.
        stage.expect("plain.owner.test", "/admin/x", "401")
        assert served_over_tls(stage, "tls.owner.test", "/x", [ca.cert_path]) == "OWNER"
        assert any(problem.startswith("Ingress intruder/intruder: plain.owner.test (owned by Ingress owner/site, "
                                      "older)") and "strict-host-ownership" in problem
                   for problem in stage.controller.problems())
    finally:
        stage.cluster.delete(configmap)
    stage.expect("plain.owner.test", "/admin/x", "INTRUDER")


@pytest.fixture(scope="module")
def passthrough_stage(tmp_path_factory, echo):
    controller, cluster = start_manifests_controller(tmp_path_factory.mktemp("passthrough-controller"),
                                                     ["--enable-ssl-passthrough"])
    yield Stage(controller, cluster, echo)
    controller.stop()


@pytest.fixture(scope="module")
def passthrough_backend(ca, tmp_path_factory) -> int:
    """The port of an HTTPS echo server on PASSTHROUGH_BACKEND_IP, with a certificate for pt.owner.test."""
    server = start_tls_echo((PASSTHROUGH_BACKEND_IP, 0), ca.issue(PASSTHROUGH_BACKEND_NAME, ("pt.owner.test",)),
                            tmp_path_factory.mktemp("passthrough-backend"))
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_a_server_alias_does_not_answer_a_passthrough_hosts_plain_http(passthrough_stage, ca, passthrough_backend):
    stage = passthrough_stage
    stage.cluster.apply(
        k8s.service("pt", port=443, namespace="owner"),
        k8s.endpoint_slice("pt", [PASSTHROUGH_BACKEND_IP], passthrough_backend, namespace="owner"),
        k8s.ingress("pt", [k8s.rule("pt.owner.test", ("/", "Prefix", "pt", 443))], "owner",
                    annotations={f"{PREFIX}/ssl-passthrough": "true"}, created="2024-01-01T00:00:00Z"),
        *stage.backend("INTRUDER", namespace="intruder"),
        k8s.ingress("alias", [k8s.rule("own.intruder.test", ("/", "Prefix", "intruder", 80))], "intruder",
                    annotations={f"{PREFIX}/server-alias": "pt.owner.test,alias.intruder.test"},
                    created="2025-01-01T00:00:00Z"))
    stage.expect("alias.intruder.test", "/", "INTRUDER")  # the alias that is the intruder's to take

    for path in ("/", "/.well-known/acme-challenge/token"):  # an HTTP-01 challenge cannot be answered
        assert stage.served_by("pt.owner.test", path) == "404"
    port = stage.controller.https_port
    wait_for(lambda: served_certificate(port, "pt.owner.test", [ca.cert_path]).get("commonName")
             == PASSTHROUGH_BACKEND_NAME, 15, what="pt.owner.test passed through to its backend")
    passed = json.loads(https_get(port, "pt.owner.test", "/", [ca.cert_path]).body)
    assert (passed["backend"], passed["sni"]) == ("tls-backend", "pt.owner.test")
    assert any("Ingress intruder/alias: server-alias pt.owner.test is passed through by SNI for Ingress owner/pt"
               in problem for problem in stage.controller.problems())

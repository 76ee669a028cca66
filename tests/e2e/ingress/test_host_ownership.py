"""Host ownership across namespaces (issue 31, attacks 3 and 4) through the whole controller, real nginx and real
TLS clients: a path on another namespace's host brings neither its certificate nor a redirect nor HSTS (and is
refused whole with strict-host-ownership); a server-alias never answers a passthrough host's plain HTTP."""
import json
from pathlib import Path

from services.nginxconf.prefix import FAKE_CERTIFICATE_CN
from tests.e2e.ingress.scenarios import Stage
# The TLS tests' fixtures (a module of their own gets its own controllers): a test CA, a controller with
# --configmap default/ingress-config and its fake certificate, one with --enable-ssl-passthrough, and an HTTPS
# backend for pt.tls.example.
from tests.e2e.tls.conftest import (BACKEND_IP, BACKEND_NAME, CONFIGMAP, ca, fake_certificate,  # noqa: F401
                                    passthrough_stage, tls_backend, tls_stage)
from tests.e2e.tls.pki import TestCA, https_get, served_certificate, tls_secret
from tests.support import k8s
from tests.support.net import wait_for

PREFIX = "nginx.ingress.kubernetes.io"
FAKE = FAKE_CERTIFICATE_CN


def owner_and_intruder(stage: Stage, ca: TestCA) -> None:
    """Namespace `owner` (older) serves plain.owner.test over HTTP with an /admin path of its own, and
    tls.owner.test with a certificate of its own; namespace `intruder` adds one path on each, /admin/x and /x,
    with a spec.tls and a certificate of its own for both."""
    stage.cluster.apply(
        *stage.backend("OWNER", namespace="owner"), *stage.backend("ADMIN", namespace="owner"),
        *stage.backend("INTRUDER", namespace="intruder"),
        tls_secret("owner-cert", ca.issue("tls.owner.test", organization="owner"), namespace="owner"),
        k8s.ingress("site", [k8s.rule("plain.owner.test", ("/", "Prefix", "owner", 80),
                                      ("/admin", "Prefix", "admin", 80)),
                             k8s.rule("tls.owner.test", ("/", "Prefix", "owner", 80))], "owner",
                    tls=[{"hosts": ["tls.owner.test"], "secretName": "owner-cert"}], created="2024-01-01T00:00:00Z"),
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


def test_a_path_on_another_namespaces_host_brings_no_certificate_redirect_or_hsts(tls_stage, ca, fake_certificate):
    stage = tls_stage
    port, trusted = stage.controller.https_port, [ca.cert_path, fake_certificate]
    owner_and_intruder(stage, ca)
    # The intruder's paths are served, as ingress-nginx serves them.
    stage.expect("plain.owner.test", "/admin/x", "INTRUDER")
    wait_for(lambda: served_over_tls(stage, "tls.owner.test", "/x", [ca.cert_path]) == "INTRUDER", 10,
             what="the intruder's path on the owner's TLS host")

    plain = stage.controller.get("/", "plain.owner.test")
    assert plain.status_code == 200 and "location" not in plain.headers
    assert stage.served_by("plain.owner.test", "/admin") == "ADMIN"
    response = https_get(port, "plain.owner.test", "/", trusted)
    assert response.status == 200 and "strict-transport-security" not in response.headers
    assert json.loads(response.body)["backend"] == "OWNER"
    assert served_certificate(port, "plain.owner.test", trusted, check_hostname=False)["commonName"] == FAKE
    # The owner's certificate stays the one served for its TLS host.
    assert served_certificate(port, "tls.owner.test", [ca.cert_path])["organizationName"] == "owner"
    assert any("Ingress intruder/intruder: spec.tls is ignored for host plain.owner.test: the host belongs to "
               "namespace owner" in problem for problem in stage.controller.problems())


def test_strict_host_ownership_refuses_the_intruders_ingress(tls_stage, ca):
    stage = tls_stage
    owner_and_intruder(stage, ca)
    stage.expect("plain.owner.test", "/admin/x", "INTRUDER")
    namespace, name = CONFIGMAP.split("/")
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": namespace, "name": name},
                 "data": {"strict-host-ownership": "true"}}
    stage.cluster.apply(configmap)
    try:
        # The owner's /admin now takes /admin/x too.
        stage.expect("plain.owner.test", "/admin/x", "ADMIN")
        assert served_over_tls(stage, "tls.owner.test", "/x", [ca.cert_path]) == "OWNER"
        assert any(problem.startswith("Ingress intruder/intruder: plain.owner.test (owned by Ingress owner/site, "
                                      "older)") and "strict-host-ownership" in problem
                   for problem in stage.controller.problems())
    finally:
        stage.cluster.delete(configmap)
    stage.expect("plain.owner.test", "/admin/x", "INTRUDER")


def test_a_server_alias_does_not_answer_a_passthrough_hosts_plain_http(passthrough_stage, ca, tls_backend):
    stage = passthrough_stage
    passthrough_host = "pt.tls.example"  # the name tls_backend's certificate carries
    stage.cluster.apply(
        k8s.service("pt", port=443, namespace="owner"),
        k8s.endpoint_slice("pt", [BACKEND_IP], tls_backend, namespace="owner"),
        k8s.ingress("pt", [k8s.rule(passthrough_host, ("/", "Prefix", "pt", 443))], "owner",
                    annotations={f"{PREFIX}/ssl-passthrough": "true"}, created="2024-01-01T00:00:00Z"),
        *stage.backend("INTRUDER", namespace="intruder"),
        k8s.ingress("alias", [k8s.rule("own.intruder.test", ("/", "Prefix", "intruder", 80))], "intruder",
                    annotations={f"{PREFIX}/server-alias": f"{passthrough_host},alias.intruder.test"},
                    created="2025-01-01T00:00:00Z"))
    stage.expect("alias.intruder.test", "/", "INTRUDER")  # the alias that is the intruder's to take

    for path in ("/", "/.well-known/acme-challenge/token"):  # an HTTP-01 challenge cannot be answered
        assert stage.served_by(passthrough_host, path) == "404"
    port = stage.controller.https_port
    wait_for(lambda: served_certificate(port, passthrough_host, [ca.cert_path]).get("commonName") == BACKEND_NAME,
             15, what=f"{passthrough_host} passed through to its backend")
    passed = json.loads(https_get(port, passthrough_host, "/", [ca.cert_path]).body)
    assert (passed["backend"], passed["sni"]) == ("tls-backend", passthrough_host)
    assert any(f"Ingress intruder/alias: server-alias {passthrough_host} is passed through by SNI for Ingress "
               "owner/pt" in problem for problem in stage.controller.problems())

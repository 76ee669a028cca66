"""proxy-ssl-*: nginx verifies an HTTPS backend against the Secret's CA and shows it the Secret's client
certificate, as the backend (which requires one) sees it; a wrong name fails the handshake (502) and a missing
Secret denies the paths (503)."""
from __future__ import annotations

import base64
import json

import pytest

from tests.support import k8s
from tests.support.net import wait_for

from .conftest import BACKEND_IP
from .pki import start_tls_echo

PREFIX = "nginx.ingress.kubernetes.io"
HOST = "backend-tls.tls.example"


@pytest.fixture(scope="module")
def mtls_backend(ca, tmp_path_factory):
    """An HTTPS echo server named secure-backend.internal that requires a client certificate signed by `ca`."""
    server = start_tls_echo((BACKEND_IP, 0), ca.issue("secure-backend.internal"), tmp_path_factory.mktemp("mtls"),
                            client_ca=ca.cert_path)
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def secret(ca, client=None) -> dict:
    data = {"ca.crt": ca.cert_path.read_text()}
    if client is not None:
        data |= {"tls.crt": client.cert, "tls.key": client.key}
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": {"name": "backend-tls", "namespace": "default"},
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}}


def ingress(**annotations: str) -> dict:
    return k8s.ingress("backend-tls", [k8s.rule(HOST, ("/", "Prefix", "mtls-app", 443))], annotations={
        f"{PREFIX}/backend-protocol": "HTTPS", f"{PREFIX}/proxy-ssl-secret": "default/backend-tls",
        **{f"{PREFIX}/{k}": v for k, v in annotations.items()}})


def test_the_backend_is_verified_and_sees_the_client_certificate(tls_stage, ca, mtls_backend):
    stage = tls_stage
    stage.cluster.apply(k8s.service("mtls-app", port=443), k8s.endpoint_slice("mtls-app", [BACKEND_IP], mtls_backend),
                        secret(ca, ca.issue("nginx-client")),
                        ingress(**{"proxy-ssl-verify": "on", "proxy-ssl-name": "secure-backend.internal",
                                   "proxy-ssl-server-name": "on", "proxy-ssl-verify-depth": "2"}))
    wait_for(lambda: stage.controller.get("/", HOST).status_code == 200, 20, what="served through verified TLS")
    seen = json.loads(stage.controller.get("/data", HOST).text)
    assert (seen["sni"], seen["client_cert"]) == ("secure-backend.internal", "nginx-client")

    # A name the backend's certificate does not hold: verification fails, nothing reaches the backend.
    stage.cluster.apply(ingress(**{"proxy-ssl-verify": "on", "proxy-ssl-name": "other.internal"}))
    wait_for(lambda: stage.controller.get("/", HOST).status_code == 502, 20, what="502 for the wrong name")

    # Without a client certificate the backend refuses the handshake.
    stage.cluster.apply(secret(ca), ingress())
    wait_for(lambda: stage.controller.get("/", HOST).status_code == 502, 20, what="502 without a client certificate")

    stage.cluster.apply(ingress(**{"proxy-ssl-secret": "default/missing"}))
    wait_for(lambda: stage.controller.get("/", HOST).status_code == 503, 20, what="503 while the Secret is missing")

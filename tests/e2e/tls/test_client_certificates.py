"""auth-tls-* through the whole controller from manifests: a Secret with the CA, an Ingress that asks for
client certificates on its host, another tenant's host beside it that asks for none."""
from __future__ import annotations

import base64
import http.client
import socket
import ssl

import pytest

from services.nginxconf.prefix import make_self_signed
from tests.support import k8s
from tests.support.client_pki import Pki
from tests.support.controller import EchoBackends, start_manifests_controller
from tests.support.net import wait_for

PREFIX = "nginx.ingress.kubernetes.io"
PROTECTED, OPEN = "mtls.e2e.example", "open.e2e.example"


def secret(name: str, data: dict[str, str], type_: str = "Opaque") -> dict:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": "default"}, "type": type_,
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}}


@pytest.fixture(scope="module")
def stage(tmp_path_factory):
    pki = Pki(tmp_path_factory.mktemp("pki"))
    controller, cluster = start_manifests_controller(tmp_path_factory.mktemp("controller"))
    echo = EchoBackends()
    ip = echo.start("MTLS")
    pem = make_self_signed(f"/CN={PROTECTED}", (PROTECTED, OPEN)).decode()
    end = pem.index("-----END CERTIFICATE-----") + len("-----END CERTIFICATE-----\n")
    cluster.apply(k8s.service("app"), k8s.endpoint_slice("app", [ip], echo.port),
                  secret("site-tls", {"tls.crt": pem[:end], "tls.key": pem[end:]}, "kubernetes.io/tls"),
                  secret("client-ca", {"ca.crt": pki.text("ca-a.crt"), "ca.crl": pki.text("ca-a.crl")}),
                  k8s.ingress("protected", [k8s.rule(PROTECTED, ("/", "Prefix", "app", 80))],
                              tls=[{"hosts": [PROTECTED], "secretName": "site-tls"}],
                              annotations={f"{PREFIX}/auth-tls-secret": "default/client-ca",
                                           f"{PREFIX}/auth-tls-pass-certificate-to-upstream": "true"}),
                  k8s.ingress("open", [k8s.rule(OPEN, ("/", "Prefix", "app", 80))],
                              tls=[{"hosts": [OPEN], "secretName": "site-tls"}]))
    yield controller, pki
    controller.stop()
    echo.stop()


def status(controller, pki: Pki, host: str, client: str | None) -> int:
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    if client:
        context.load_cert_chain(pki.dir / f"{client}.crt", pki.dir / f"{client}.key")
    sock = context.wrap_socket(socket.create_connection(("127.0.0.1", controller.https_port), timeout=5),
                               server_hostname=host)
    conn = http.client.HTTPConnection(host, timeout=5)
    conn.sock = sock
    conn.request("GET", "/", headers={"Host": host})
    code = conn.getresponse().status
    conn.close()
    return code


def test_only_certificates_from_the_ingress_ca_reach_its_host(stage):
    controller, pki = stage
    wait_for(lambda: status(controller, pki, PROTECTED, "good") == 200, 15, what="the protected host served")
    assert status(controller, pki, PROTECTED, None) == 400
    assert status(controller, pki, PROTECTED, "intruder") == 400
    assert status(controller, pki, PROTECTED, "revoked") == 400
    assert status(controller, pki, OPEN, None) == 200

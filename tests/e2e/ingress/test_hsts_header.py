"""One Strict-Transport-Security header: pyngress's HSTS replaces a backend's own, which passes only where pyngress
sends none, as ingress-nginx's e2e suite asserts (settings/tls.go, "overriding what's set from the upstream")."""
from __future__ import annotations

import base64
import subprocess
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Iterator

import pytest
import requests

from tests.support import k8s
from tests.support.controller import Controller, ManifestsCluster, start_manifests_controller
from tests.support.net import wait_for
from tests.support.http_servers import port_of, serving

# HTTPS requests go to a self-signed certificate: what is checked is the answer, not the certificate.
pytestmark = pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")

CONFIGMAP = "ingress/controller"
HOST = "hsts.example.com"
BACKEND_IP = "127.0.34.2"
BACKEND_HSTS = "max-age=100"  # what the backend sends itself


class _HstsBackend(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:  # noqa: N802 - the base class's name
        self.send_response(200)
        self.send_header("Strict-Transport-Security", BACKEND_HSTS)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def backend_port() -> Iterator[int]:
    with serving(_HstsBackend, (BACKEND_IP, 0)) as server:
        yield port_of(server)


def configmap(**data: str) -> dict:
    namespace, name = CONFIGMAP.split("/")
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace}, "data": data}


def tls_secret(directory: Path) -> dict:
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", "key.pem", "-out", "cert.pem", "-days", "2", "-subj", f"/CN={HOST}",
                    "-addext", f"subjectAltName=DNS:{HOST}"], cwd=directory, check=True, capture_output=True)
    encode = lambda name: base64.b64encode((directory / name).read_bytes()).decode()  # noqa: E731
    return {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": {"name": "hsts-tls", "namespace": "default"},
            "data": {"tls.crt": encode("cert.pem"), "tls.key": encode("key.pem")}}


@pytest.fixture(scope="module")
def hsts_controller(tmp_path_factory, backend_port) -> Iterator[tuple[Controller, ManifestsCluster]]:
    controller, cluster = start_manifests_controller(tmp_path_factory.mktemp("controller"),
                                                     extra_args=[f"--configmap={CONFIGMAP}"])
    cluster.apply(tls_secret(tmp_path_factory.mktemp("pki")), k8s.service("hsts"),
                  k8s.endpoint_slice("hsts", [BACKEND_IP], backend_port),
                  configmap(**{"hsts-max-age": "86400", "hsts-preload": "true", "hsts-include-subdomains": "false"}),
                  # Plain HTTP is served too (no redirect), to see what passes there.
                  k8s.ingress("hsts", [k8s.rule(HOST, ("/", "Prefix", "hsts", 80))],
                              annotations={"nginx.ingress.kubernetes.io/ssl-redirect": "false"},
                              tls=[{"hosts": [HOST], "secretName": "hsts-tls"}]))
    yield controller, cluster
    controller.stop()


def hsts_headers(controller: Controller, scheme: str) -> list[str]:
    port = controller.https_port if scheme == "https" else controller.http_port
    response = requests.get(f"{scheme}://127.0.0.1:{port}/", headers={"Host": HOST}, verify=False, timeout=5)
    assert response.status_code == 200, response.text
    return response.raw.headers.getlist("Strict-Transport-Security")


def test_pyngress_hsts_replaces_the_backends_own(hsts_controller) -> None:
    controller, _ = hsts_controller
    wait_for(lambda: hsts_headers(controller, "https") == ["max-age=86400; preload"], 15, what="one HSTS header")
    # Over plain HTTP pyngress sends none: the backend's own passes, as through ingress-nginx.
    assert hsts_headers(controller, "http") == [BACKEND_HSTS]


def test_with_hsts_off_the_backends_own_passes(hsts_controller) -> None:
    controller, cluster = hsts_controller
    cluster.apply(configmap(hsts="false"))
    wait_for(lambda: hsts_headers(controller, "https") == [BACKEND_HSTS], 15, what="the backend's HSTS")
    cluster.apply(configmap())
    wait_for(lambda: hsts_headers(controller, "https") == ["max-age=31536000; includeSubDomains"], 15,
             what="the default HSTS, alone")

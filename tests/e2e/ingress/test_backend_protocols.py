"""backend-protocol FCGI (with fastcgi-index and fastcgi-params-configmap) and AUTO_HTTP through the whole
controller, against a real FastCGI responder and a backend speaking HTTP and HTTPS on one port, with the cases of
ingress-nginx's e2e (annotations/fastcgi.go, backendprotocol.go)."""
from __future__ import annotations

import json
from typing import Iterator

import pytest
import requests

from tests.e2e.tls.pki import https_get
from tests.support import k8s
from tests.support.dual_protocol_backend import DualProtocolBackend, running_dual_protocol_backend
from tests.support.fastcgi_server import FastCgiServer, running_fastcgi_server
from tests.support.net import wait_for

PREFIX = "nginx.ingress.kubernetes.io"
FASTCGI_IP = "127.0.40.2"
DUAL_IP = "127.0.40.3"


@pytest.fixture(scope="module")
def fastcgi() -> Iterator[FastCgiServer]:
    yield from running_fastcgi_server(FASTCGI_IP)


@pytest.fixture(scope="module")
def dual(tmp_path_factory) -> Iterator[DualProtocolBackend]:
    yield from running_dual_protocol_backend(DUAL_IP, tmp_path_factory.mktemp("dual"))


@pytest.fixture(scope="module")
def cluster(manifests_controller, fastcgi, dual):
    controller, cluster = manifests_controller
    cluster.apply(k8s.service("fastcgi-helloserver", port=9000),
                  k8s.endpoint_slice("fastcgi-helloserver", [FASTCGI_IP], fastcgi.port),
                  k8s.service("dual", port=8443), k8s.endpoint_slice("dual", [DUAL_IP], dual.port))
    return controller, cluster


def fcgi_ingress(name: str, **annotations: str) -> dict:
    return k8s.ingress(name, [k8s.rule(f"{name}.example.com", ("/hello", "Prefix", "fastcgi-helloserver", 9000))],
                       annotations={f"{PREFIX}/backend-protocol": "FCGI",
                                    **{f"{PREFIX}/{k}": v for k, v in annotations.items()}})


def get(controller, host: str, path: str = "/hello", **kwargs) -> requests.Response:
    return requests.request(kwargs.pop("method", "GET"), f"http://127.0.0.1:{controller.http_port}{path}",
                            headers={"Host": host}, timeout=5, **kwargs)


def test_fcgi_answers_through_fastcgi_with_nginx_s_standard_parameters(cluster):
    controller, manifests = cluster
    manifests.apply(fcgi_ingress("fastcgi"))
    wait_for(lambda: get(controller, "fastcgi.example.com").status_code == 200, 15, what="the FastCGI answer")
    answer = get(controller, "fastcgi.example.com", "/hello/world?x=1", method="POST", data=b"twelve bytes")
    assert answer.status_code == 200 and "Hello world!" in answer.text
    seen = answer.json()
    # /etc/nginx/fastcgi_params, as ingress-nginx includes it.
    assert {key: seen["params"].get(key) for key in ("REQUEST_METHOD", "SCRIPT_NAME", "QUERY_STRING", "REQUEST_URI",
                                                     "SERVER_PROTOCOL", "CONTENT_LENGTH")} == {
        "REQUEST_METHOD": "POST", "SCRIPT_NAME": "/hello/world", "QUERY_STRING": "x=1",
        "REQUEST_URI": "/hello/world?x=1", "SERVER_PROTOCOL": "HTTP/1.1", "CONTENT_LENGTH": "12"}
    assert seen["body_bytes"] == 12
    # The application's own status reaches the client.
    assert get(controller, "fastcgi.example.com", "/hello/missing").status_code == 404


def test_fastcgi_index_and_params_from_a_configmap(cluster):
    controller, manifests = cluster
    manifests.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "fastcgi-configmap",
                                                                             "namespace": "default"},
                     "data": {"SCRIPT_FILENAME": "$fastcgi_script_name", "REDIRECT_STATUS": "200",
                              "APP_ROOT": "/srv/${document_root}app"}},
                    fcgi_ingress("fastcgi-params", **{"fastcgi-index": "index.php",
                                                      "fastcgi-params-configmap": "fastcgi-configmap"}))
    wait_for(lambda: get(controller, "fastcgi-params.example.com").status_code == 200, 15, what="the FastCGI answer")
    params = get(controller, "fastcgi-params.example.com", "/hello/").json()["params"]
    assert params["SCRIPT_NAME"] == "/hello/index.php"  # fastcgi-index completes a URI ending in "/"
    assert params["SCRIPT_FILENAME"] == "/hello/index.php" and params["REDIRECT_STATUS"] == "200"
    assert params["APP_ROOT"].startswith("/srv/") and params["APP_ROOT"].endswith("app")


def test_an_unusable_params_configmap_denies_the_paths(cluster):
    controller, manifests = cluster
    manifests.apply(fcgi_ingress("fastcgi-missing", **{"fastcgi-params-configmap": "no-such-configmap"}),
                    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "fastcgi-bad", "namespace": "default"},
                     "data": {"SECRET": "$http_authorization"}},
                    fcgi_ingress("fastcgi-bad", **{"fastcgi-params-configmap": "fastcgi-bad"}))
    wait_for(lambda: get(controller, "fastcgi-missing.example.com").status_code == 503, 15, what="denied")
    wait_for(lambda: get(controller, "fastcgi-bad.example.com").status_code == 503, 15, what="denied")
    problems = json.dumps(controller.problems())
    assert "no-such-configmap was not found" in problems and "$http_authorization" in problems


def test_auto_http_talks_to_the_backend_in_the_client_s_scheme(cluster):
    controller, manifests = cluster
    host = "auto.example.com"
    manifests.apply(k8s.ingress("auto", [k8s.rule(host, ("/", "Prefix", "dual", 8443))],
                                annotations={f"{PREFIX}/backend-protocol": "AUTO_HTTP"}))
    wait_for(lambda: get(controller, host, "/").status_code == 200, 15, what="the AUTO_HTTP Ingress")
    assert get(controller, host, "/plain").json()["scheme"] == "http"
    answer = https_get(controller.https_port, host, "/secure")
    seen = json.loads(answer.body)
    assert (answer.status, seen["scheme"], seen["sni"], seen["path"]) == (200, "https", host, "/secure")

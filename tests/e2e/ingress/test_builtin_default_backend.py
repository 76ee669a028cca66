"""What pyngress answers itself when no --default-backend-service is set: an unknown host or path gets nginx's own
404 page, a Service without endpoints or a denied Ingress nginx's own 503 page, as ingress-nginx's e2e suite
asserts (defaultbackend/default_backend.go, annotations/alias.go, annotations/customheaders.go, servicebackend/)."""
from __future__ import annotations

import pytest
import requests

from tests.e2e.ingress.scenarios import Stage
from tests.support import k8s
from tests.support.net import wait_for

# HTTPS requests go to the fake certificate: what is checked is the answer, not the certificate.
pytestmark = pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")

HOST = "foo.example.com"


def resource_backend_ingress() -> dict:
    """An Ingress whose path names a resource, not a Service (servicebackend/service_nil_backend.go)."""
    ingress = k8s.ingress("resource", [k8s.rule("resource.example.com", ("/", "Prefix", "unused", 80))])
    ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"] = {
        "resource": {"apiGroup": "otherobj.testingress.com", "kind": "Anything", "name": "mytest"}}
    return ingress


@pytest.fixture(scope="module")
def stage(manifests_controller, echo) -> Stage:
    controller, cluster = manifests_controller
    stage = Stage(controller, cluster, echo)
    cluster.apply(*stage.backend("FOO", "foo"), k8s.service("empty"),
                  k8s.ingress("foo", [k8s.rule(HOST, ("/app", "Prefix", "foo", 80))]),
                  k8s.ingress("empty", [k8s.rule("empty.example.com", ("/", "Prefix", "empty", 80))]),
                  k8s.ingress("nonexistent", [k8s.rule("nonexistent.example.com", ("/", "Prefix", "nonexistent", 80))]),
                  resource_backend_ingress(),
                  # custom-headers naming a ConfigMap that does not exist: the paths are denied.
                  k8s.ingress("denied", [k8s.rule("denied.example.com", ("/", "Prefix", "foo", 80))],
                              annotations={"nginx.ingress.kubernetes.io/custom-headers": "missing"}))
    stage.expect(HOST, "/app", "FOO")
    stage.expect("denied.example.com", "/", "503")
    return stage


def answer(stage: Stage, scheme: str, method: str, path: str, host: str | None) -> requests.Response:
    port = stage.controller.https_port if scheme == "https" else stage.controller.http_port
    return requests.request(method, f"{scheme}://127.0.0.1:{port}{path}", headers={"Host": host} if host else {},
                            verify=False, timeout=5)


@pytest.mark.parametrize("scheme", ["http", "https"])
@pytest.mark.parametrize("method", ["GET", "POST"])
@pytest.mark.parametrize("host", [None, "foo.bar.com", HOST])
@pytest.mark.parametrize("path", ["/", "/demo"])
def test_what_no_rule_takes_gets_nginxs_own_404_page(stage: Stage, scheme: str, method: str, host: str | None,
                                                     path: str) -> None:
    response = answer(stage, scheme, method, path, host)
    assert response.status_code == 404
    assert "<title>404 Not Found</title>" in response.text
    assert response.headers["Content-Type"] == "text/html"


def test_a_path_whose_backend_is_no_service_gets_404(stage: Stage) -> None:
    response = answer(stage, "http", "GET", "/", "resource.example.com")
    assert response.status_code == 404 and "<title>404 Not Found</title>" in response.text


@pytest.mark.parametrize("host", ["empty.example.com", "nonexistent.example.com", "denied.example.com"])
def test_no_endpoints_and_denied_paths_get_nginxs_own_503_page(stage: Stage, host: str) -> None:
    wait_for(lambda: answer(stage, "http", "GET", "/", host).status_code == 503, 15, what=f"{host} 503")
    response = answer(stage, "http", "GET", "/", host)
    assert "<title>503 Service Temporarily Unavailable</title>" in response.text
    assert response.headers["Content-Type"] == "text/html"

"""--default-backend-service: what answers unknown hosts and paths, and Ingresses whose Service has no
endpoints, as a client sees it."""
from __future__ import annotations

import pytest
import requests

from tests.e2e.ingress.scenarios import Stage
from tests.support import k8s
from tests.support.controller import start_manifests_controller
from tests.support.net import wait_for

CONFIGMAP = "ingress/controller"


@pytest.fixture(scope="module")
def stage(tmp_path_factory, echo):
    controller, cluster = start_manifests_controller(tmp_path_factory.mktemp("controller"),
                                                     extra_args=["--default-backend-service=ingress/fallback",
                                                                 f"--configmap={CONFIGMAP}"])
    stage = Stage(controller, cluster, echo)
    ip = echo.ips.get("FALLBACK") or echo.start("FALLBACK")
    stage.fallback = [k8s.service("fallback", namespace="ingress"),
                      k8s.endpoint_slice("fallback", [ip], echo.port, namespace="ingress")]
    cluster.apply(*stage.fallback, *stage.backend("APP", "app"), k8s.service("empty"),
                  k8s.ingress("app", [k8s.rule("app.example.com", ("/api", "Prefix", "app", 80))]),
                  k8s.ingress("empty", [k8s.rule("empty.example.com", ("/", "Prefix", "empty", 80))]))
    stage.expect("app.example.com", "/api", "APP")
    yield stage
    controller.stop()


def answer(stage: Stage, host: str, path: str = "/") -> tuple[int, str]:
    response = requests.get(f"http://127.0.0.1:{stage.controller.http_port}{path}", headers={"Host": host},
                            timeout=5)
    is_json = response.headers.get("Content-Type") == "application/json"
    return response.status_code, response.json()["backend"] if is_json else response.text


def test_unknown_hosts_paths_and_services_without_endpoints_go_to_the_default_backend(stage):
    wait_for(lambda: answer(stage, "nobody.example.com") == (200, "FALLBACK"), 15, what="an unknown host")
    assert answer(stage, "app.example.com", "/other") == (200, "FALLBACK")  # a path no rule takes
    assert answer(stage, "empty.example.com") == (200, "FALLBACK")  # a Service without endpoints
    assert answer(stage, "app.example.com", "/api/x") == (200, "APP")
    seen = requests.get(f"http://127.0.0.1:{stage.controller.http_port}/some/page",
                        headers={"Host": "nobody.example.com"}, timeout=5).json()
    assert (seen["path"], seen["headers"]["host"]) == ("/some/page", "nobody.example.com")


def test_a_tenant_service_cannot_take_the_default_backends_place(stage):
    # Namespace "upstream", Service "default", port "backend": the generated backend name would be the default
    # backend's own.
    ip = stage.echo.ips.get("TENANT") or stage.echo.start("TENANT")
    stage.cluster.apply(k8s.service("default", namespace="upstream", port_name="backend"),
                        k8s.endpoint_slice("default", [ip], stage.echo.port, namespace="upstream", port_name="backend"),
                        k8s.ingress("tenant", [k8s.rule("tenant.example.com", ("/", "Prefix", "default", "backend"))],
                                    namespace="upstream"))
    wait_for(lambda: answer(stage, "tenant.example.com") == (200, "TENANT"), 15, what="the tenant's own host")
    assert answer(stage, "nobody.example.com") == (200, "FALLBACK")


def test_without_endpoints_the_built_in_answers_come_back(stage):
    stage.cluster.delete(stage.fallback[1])
    wait_for(lambda: answer(stage, "nobody.example.com") == (404, "default backend - 404"), 15,
             what="the built-in 404")
    assert answer(stage, "empty.example.com")[0] == 503
    stage.cluster.apply(*stage.fallback)
    wait_for(lambda: answer(stage, "nobody.example.com") == (200, "FALLBACK"), 15, what="the default backend back")


def test_custom_http_errors_are_answered_by_the_default_backend_with_the_original_status(stage):
    namespace, name = CONFIGMAP.split("/")
    stage.cluster.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace},
                         "data": {"custom-http-errors": "404,503"}})
    url = f"http://127.0.0.1:{stage.controller.http_port}"

    def error(host: str, path: str) -> tuple[int, dict]:
        response = requests.get(url + path, headers={"Host": host, "Accept": "text/html", "X-Request-ID": "rid-1"},
                                timeout=5)
        return response.status_code, response.json() if response.headers.get("Content-Type") == "application/json" \
            else {}

    # The backend answers 404 itself: the default backend makes the page, the client keeps the 404.
    wait_for(lambda: error("app.example.com", "/api/x?status=404")[1].get("backend") == "FALLBACK", 15,
             what="the backend's 404 intercepted")
    status, seen = error("app.example.com", "/api/x?status=404")
    headers = seen["headers"]
    assert status == 404 and seen["path"] == "/?status=404"  # on "/", the query kept (as ingress-nginx's rewrite)
    assert (headers["x-code"], headers["x-format"], headers["x-original-uri"]) == ("404", "text/html",
                                                                                   "/api/x?status=404")
    assert (headers["x-namespace"], headers["x-ingress-name"], headers["x-service-name"],
            headers["x-service-port"], headers["x-request-id"]) == ("default", "app", "app", "80", "rid-1")
    # nginx's own 503 (a Service without endpoints) and 404 (a host no Ingress names) take the same way.
    status, seen = error("empty.example.com", "/")
    assert status == 503 and seen["headers"]["x-code"] == "503" and seen["backend"] == "FALLBACK"
    status, seen = error("nobody.example.com", "/page")
    assert status == 404 and seen["headers"]["x-code"] == "404" and seen["headers"]["x-original-uri"] == "/page"
    # A status not in the list passes as the backend sent it.
    assert requests.get(url + "/api/x?status=500", headers={"Host": "app.example.com"}, timeout=5).json()[
        "backend"] == "APP"


def test_an_ingress_default_backend_and_custom_http_errors_of_its_own(stage):
    url = f"http://127.0.0.1:{stage.controller.http_port}"
    ip = stage.echo.ips.get("OWN-ERRORS") or stage.echo.start("OWN-ERRORS")
    prefix = "nginx.ingress.kubernetes.io"
    stage.cluster.apply(
        k8s.service("own-errors"), k8s.endpoint_slice("own-errors", [ip], stage.echo.port), k8s.service("gone"),
        k8s.ingress("own", [k8s.rule("own.example.com", ("/api", "Prefix", "app", 80), ("/gone", "Prefix", "gone", 80))],
                    annotations={f"{prefix}/default-backend": "own-errors", f"{prefix}/custom-http-errors": "418,500"}),
        k8s.ingress("passing", [k8s.rule("passing.example.com", ("/", "Prefix", "app", 80))],
                    annotations={f"{prefix}/default-backend": "own-errors", f"{prefix}/custom-http-errors": "418",
                                 f"{prefix}/disable-proxy-intercept-errors": "true"}))

    def get(host: str, path: str) -> requests.Response:
        return requests.get(url + path, headers={"Host": host}, timeout=5)

    # A route whose Service has no endpoints: the Ingress's own default backend answers it.
    wait_for(lambda: answer(stage, "own.example.com", "/gone") == (200, "OWN-ERRORS"), 15, what="default-backend")
    # Its statuses are replaced by its default backend's page (the client keeps the status), others pass.
    response = get("own.example.com", "/api/x?status=418")
    assert response.status_code == 418 and response.json()["backend"] == "OWN-ERRORS"
    assert response.json()["headers"]["x-code"] == "418"
    assert get("own.example.com", "/api/x?status=503").json()["backend"] == "APP"  # the ConfigMap's list is not its
    # disable-proxy-intercept-errors: the backend's own 418 passes.
    wait_for(lambda: get("passing.example.com", "/?status=418").status_code == 418, 15, what="the passing Ingress")
    assert get("passing.example.com", "/?status=418").json()["backend"] == "APP"

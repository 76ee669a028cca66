"""--default-backend-service, default-backend and custom-http-errors: what answers unknown hosts and paths,
Ingresses whose Service has no endpoints, and error statuses, as a client sees it (the cases of ingress-nginx's
e2e suite: defaultbackend/, annotations/default_backend.go, customhttperrors.go, disableproxyintercepterrors.go)."""
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


def test_unknown_hosts_and_paths_go_to_the_default_backend(stage):
    wait_for(lambda: answer(stage, "nobody.example.com") == (200, "FALLBACK"), 15, what="an unknown host")
    assert answer(stage, "app.example.com", "/other") == (200, "FALLBACK")  # a path no rule takes
    # A Service without endpoints answers 503, as ingress-nginx's balancer does: the default backend is not asked.
    # Its Ingress is a file of its own, which the watcher may read a scan later.
    wait_for(lambda: answer(stage, "empty.example.com")[0] == 503, 15, what="the Service without endpoints: 503")
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
    wait_for(lambda: (lambda status, body: status == 404 and "<title>404 Not Found</title>" in body)(
        *answer(stage, "nobody.example.com")), 15, what="the built-in 404")
    # Its Ingress is a file of its own, which the watcher may read a scan later.
    wait_for(lambda: answer(stage, "empty.example.com")[0] == 503, 15, what="the Service without endpoints: 503")
    stage.cluster.apply(*stage.fallback)
    wait_for(lambda: answer(stage, "nobody.example.com") == (200, "FALLBACK"), 15, what="the default backend back")


def test_custom_http_errors_are_answered_by_the_default_backend(stage):
    namespace, name = CONFIGMAP.split("/")
    stage.cluster.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace},
                         "data": {"custom-http-errors": "404,503"}})
    url = f"http://127.0.0.1:{stage.controller.http_port}"

    def error(host: str, path: str) -> tuple[int, dict]:
        response = requests.get(url + path, headers={"Host": host, "Accept": "text/html", "X-Request-ID": "rid-1"},
                                timeout=5)
        return response.status_code, response.json() if response.headers.get("Content-Type") == "application/json" \
            else {}

    # The backend answers 404 itself: the default backend makes the page, told so in ingress-nginx's headers, and
    # the client gets its answer (here 404 again: the echo reads the kept query).
    wait_for(lambda: error("app.example.com", "/api/x?status=404")[1].get("backend") == "FALLBACK", 15,
             what="the backend's 404 intercepted")
    status, seen = error("app.example.com", "/api/x?status=404")
    headers = seen["headers"]
    assert status == 404 and seen["path"] == "/?status=404"  # on "/", the query kept (as ingress-nginx's rewrite)
    assert (headers["x-code"], headers["x-format"], headers["x-original-uri"]) == ("404", "text/html",
                                                                                   "/api/x?status=404")
    assert (headers["x-namespace"], headers["x-ingress-name"], headers["x-service-name"],
            headers["x-service-port"], headers["x-request-id"]) == ("default", "app", "app", "80", "rid-1")
    # nginx's own 503 (a Service without endpoints): the client gets the error backend's 200 and page, as in
    # ingress-nginx's e2e (status 200, "x-code=503", the Ingress and Service named).
    status, seen = error("empty.example.com", "/")
    assert status == 200 and seen["backend"] == "FALLBACK"
    assert (seen["headers"]["x-code"], seen["headers"]["x-ingress-name"], seen["headers"]["x-service-name"],
            seen["headers"]["x-service-port"], seen["headers"]["x-request-id"]) == ("503", "empty", "empty", "80",
                                                                                   "rid-1")
    # A host no Ingress names goes to the default backend as it is; it answers 200 here: nothing to intercept.
    status, seen = error("nobody.example.com", "/page")
    assert status == 200 and seen["path"] == "/page" and "x-code" not in seen["headers"]
    # Its own 404 is intercepted like any backend's: asked again on "/", with X-Code.
    status, seen = error("nobody.example.com", "/page?status=404")
    assert (status, seen["path"], seen["headers"]["x-code"], seen["headers"]["x-original-uri"]) == (
        404, "/?status=404", "404", "/page?status=404")
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

    # A route whose Service has no endpoints: the Ingress's own default backend answers it, told so in ingress-nginx's
    # headers, on the request's own URI (ingress-nginx's e2e: 200, "x-code=503", the Ingress, the Service, the id).
    wait_for(lambda: answer(stage, "own.example.com", "/gone") == (200, "OWN-ERRORS"), 15, what="default-backend")
    response = requests.get(url + "/gone/alma/armud", timeout=5, headers={
        "Host": "own.example.com", "X-Request-ID": "something-unique", "Accept": "application/json"})
    seen = response.json()
    assert (response.status_code, seen["backend"], seen["path"]) == (200, "OWN-ERRORS", "/gone/alma/armud")
    assert {name: seen["headers"].get(name) for name in ("x-code", "x-format", "x-namespace", "x-ingress-name",
                                                         "x-service-name", "x-service-port", "x-request-id")} == {
        "x-code": "503", "x-format": "application/json", "x-namespace": "default", "x-ingress-name": "own",
        "x-service-name": "gone", "x-service-port": "80", "x-request-id": "something-unique"}
    assert "x-original-uri" not in seen["headers"]
    # Its statuses are answered by its default backend (the client gets that answer: 418 again, the echo reading
    # the kept query), others pass.
    response = get("own.example.com", "/api/x?status=418")
    assert response.status_code == 418 and response.json()["backend"] == "OWN-ERRORS"
    assert response.json()["headers"]["x-code"] == "418"
    assert get("own.example.com", "/api/x?status=503").json()["backend"] == "APP"  # the ConfigMap's list is not its
    # An Ingress list without 503 replaces the ConfigMap's there: its Service without endpoints gets nginx's own 503.
    stage.cluster.apply(k8s.ingress("own-list", [k8s.rule("own-list.example.com", ("/", "Prefix", "gone", 80))],
                                    annotations={f"{prefix}/custom-http-errors": "418"}))
    wait_for(lambda: get("own-list.example.com", "/").status_code == 503, 15, what="the own list's 503")
    assert "<title>503 Service Temporarily Unavailable</title>" in get("own-list.example.com", "/").text
    # disable-proxy-intercept-errors: the backend's own 418 passes.
    wait_for(lambda: get("passing.example.com", "/?status=418").status_code == 418, 15, what="the passing Ingress")
    assert get("passing.example.com", "/?status=418").json()["backend"] == "APP"

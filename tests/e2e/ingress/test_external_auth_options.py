"""auth-url options through the whole controller, as a client and the auth service see them: auth-keepalive
(connections reused, -share-vars), auth-proxy-set-headers, auth-snippet, and a CORS preflight answered before
authentication."""
from __future__ import annotations

import json
import subprocess
from typing import Iterator

import pytest

from tests.e2e.ingress.conftest import reachable
from tests.e2e.ingress.scenarios import Stage
from tests.e2e.ingress.test_external_auth import get, protected
from tests.support.auth_service import AuthService, running_auth_service
from tests.support.net import wait_for

CONFIGMAP = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "controller", "namespace": "ingress"},
             "data": {"allow-snippet-annotations": "true", "annotations-risk-level": "Critical"}}


@pytest.fixture(scope="module")
def auth_service() -> Iterator[AuthService]:
    yield from running_auth_service()


@pytest.fixture(scope="module")
def stage(echo) -> Iterator[Stage]:
    with reachable(["--configmap=ingress/controller"]) as (controller, cluster):
        cluster.apply(CONFIGMAP)
        yield Stage(controller, cluster, echo)


def served(stage: Stage, *hosts: str) -> None:
    # Each object is a manifest file of its own: wait for every Ingress.
    for host in hosts:
        wait_for(lambda: get(stage, host).status_code == 200, 15, what=f"{host} allowed")


def connections_for(stage: Stage, auth_service: AuthService, host: str, requests: int) -> int:
    """How many TCP connections the auth service saw for `requests` sequential allowed requests to `host`."""
    auth_service.seen.clear()
    for _ in range(requests):
        assert get(stage, host).status_code == 200
    assert len(auth_service.seen) == requests
    return len({asked["peer_port"] for asked in auth_service.seen})


def test_keepalive_reuses_connections_and_keeps_every_answer(stage, auth_service):
    url = f"http://127.0.0.1:{auth_service.port}/check"
    protected(stage, "kept", "kept.example.com", **{"auth-url": url, "auth-keepalive": "8",
                                                    "auth-response-headers": "X-Auth-Request-User",
                                                    "auth-signin": "https://login.example.com/start"})
    protected(stage, "fresh", "fresh.example.com", **{"auth-url": url})
    served(stage, "kept.example.com", "fresh.example.com")

    assert connections_for(stage, auth_service, "fresh.example.com", 20) == 20  # auth_request: one per request
    # One kept connection per nginx worker at most, whichever worker takes each request.
    assert connections_for(stage, auth_service, "kept.example.com", 20) <= 4

    auth_service.seen.clear()
    answer = get(stage, "kept.example.com", "/page?x=1", method="POST", data=b"stays with the backend")
    assert answer.status_code == 200 and answer.json()["backend"] == "EXT"
    assert answer.json()["headers"]["x-auth-request-user"] == "alice"
    assert answer.json()["body_bytes"] == len(b"stays with the backend")
    assert answer.headers["Set-Cookie"] == "session=from-auth"
    [asked] = auth_service.seen
    assert asked["method"] == "GET" and asked["path"] == "/check"
    assert asked["headers"]["x-original-url"] == "http://kept.example.com/page?x=1"
    assert asked["headers"]["x-original-method"] == "POST"
    assert asked["headers"]["host"] == f"127.0.0.1:{auth_service.port}"
    assert "content-length" not in asked["headers"] or asked["headers"]["content-length"] == "0"
    spoofed = get(stage, "kept.example.com", verdict="allow-quietly", **{"X-Auth-Request-User": "root"})
    assert spoofed.status_code == 200 and "x-auth-request-user" not in spoofed.json()["headers"]

    denied = get(stage, "kept.example.com", "/app?x=1", verdict="deny")
    assert denied.status_code == 302
    assert denied.headers["Location"] == "https://login.example.com/start?rd=http://kept.example.com%2Fapp%3Fx%3D1"
    assert get(stage, "kept.example.com", verdict="forbid").status_code == 403
    assert get(stage, "kept.example.com", verdict="fail").status_code == 500


def test_share_vars_gives_the_auth_service_the_backends_request_id(stage, auth_service):
    url = f"http://127.0.0.1:{auth_service.port}/check"
    protected(stage, "shared", "shared.example.com", **{"auth-url": url, "auth-keepalive": "2",
                                                        "auth-keepalive-share-vars": "true"})
    protected(stage, "separate", "separate.example.com", **{"auth-url": url, "auth-keepalive": "2"})
    served(stage, "shared.example.com", "separate.example.com")
    for host, same in (("shared.example.com", True), ("separate.example.com", False)):
        auth_service.seen.clear()
        answer = get(stage, host)
        # Routed where the router sent it, although the shared subrequest ran the server's `set`s again.
        assert answer.status_code == 200 and answer.json()["backend"] == "EXT"
        to_backend = answer.json()["headers"]["x-request-id"]
        assert (auth_service.seen[-1]["headers"]["x-request-id"] == to_backend) is same, host


def test_keepalive_over_http2(stage, auth_service):
    protected(stage, "h2", "h2.example.com", **{"auth-url": f"http://127.0.0.1:{auth_service.port}/check",
                                                "auth-keepalive": "2", "auth-response-headers": "X-Auth-Request-User"})
    served(stage, "h2.example.com")
    port = stage.controller.https_port

    def over_http2(verdict: str) -> tuple[str, str]:
        out = subprocess.run(["curl", "-sk", "--http2", "--resolve", f"h2.example.com:{port}:127.0.0.1",
                              "-H", f"X-Test-Verdict: {verdict}", "-w", "\n%{http_version} %{http_code}",
                              f"https://h2.example.com:{port}/"],
                             capture_output=True, text=True, timeout=30, check=True).stdout
        body, _, status = out.rpartition("\n")
        return status, body

    # ngx.location.capture cannot run in an HTTP/2 request: those go through auth_request instead.
    status, body = over_http2("allow")
    assert status == "2 200", body
    assert json.loads(body)["headers"]["x-auth-request-user"] == "alice"
    assert over_http2("deny")[0] == "2 401"


def test_auth_proxy_set_headers_reach_the_auth_service(stage, auth_service):
    def headers_configmap(value: str) -> dict:
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "auth-headers", "namespace": "default"},
                "data": {"X-Tenant": value, "X-Scopes": "read write"}}

    url = f"http://127.0.0.1:{auth_service.port}/check"
    stage.cluster.apply(headers_configmap("team-a"))
    protected(stage, "hdrs", "hdrs.example.com", **{"auth-url": url, "auth-proxy-set-headers": "auth-headers"})
    protected(stage, "nohdrs", "nohdrs.example.com", **{"auth-url": url, "auth-proxy-set-headers": "missing"})
    served(stage, "hdrs.example.com")
    asked = auth_service.seen[-1]["headers"]
    assert (asked["x-tenant"], asked["x-scopes"]) == ("team-a", "read write")
    # A ConfigMap that is not there: the paths are denied, never asked without the headers.
    wait_for(lambda: get(stage, "nohdrs.example.com").status_code == 503, 15, what="503 without its ConfigMap")

    stage.cluster.apply(headers_configmap("team-b"))
    wait_for(lambda: get(stage, "hdrs.example.com").status_code == 200
             and auth_service.seen[-1]["headers"]["x-tenant"] == "team-b", 15, what="the changed header sent")


def test_auth_snippet_goes_into_the_auth_request(stage, auth_service):
    protected(stage, "snip", "snip.example.com", **{"auth-url": f"http://127.0.0.1:{auth_service.port}/check",
                                                    "auth-snippet": 'proxy_set_header X-From-Snippet "yes";'})
    served(stage, "snip.example.com")
    assert auth_service.seen[-1]["headers"]["x-from-snippet"] == "yes"


def test_a_cors_preflight_is_answered_before_authentication(stage, auth_service):
    protected(stage, "corsauth", "corsauth.example.com", **{
        "auth-url": f"http://127.0.0.1:{auth_service.port}/check", "enable-cors": "true",
        "cors-allow-origin": "https://app.example.com"})
    served(stage, "corsauth.example.com")
    auth_service.seen.clear()
    preflight = get(stage, "corsauth.example.com", "/api", verdict="deny", method="OPTIONS",
                    Origin="https://app.example.com", **{"Access-Control-Request-Method": "PUT"})
    assert preflight.status_code == 204
    assert preflight.headers["Access-Control-Allow-Origin"] == "https://app.example.com"
    assert auth_service.seen == []  # browsers send no credentials with a preflight
    denied = get(stage, "corsauth.example.com", "/api", verdict="deny", Origin="https://app.example.com")
    assert denied.status_code == 401

"""auth-url through the whole controller, with a real HTTP auth service started by the test
(tests/support/auth_service.py: it answers by the X-Test-Verdict header the client sends)."""
from __future__ import annotations

from typing import Iterator

import pytest
import requests

from tests.support import k8s
from tests.support.auth_service import AuthService, running_auth_service
from tests.support.controller import start_manifests_controller
from tests.support.net import wait_for
from tests.e2e.ingress.scenarios import Stage

PREFIX = "nginx.ingress.kubernetes.io"


@pytest.fixture(scope="module")
def auth_service() -> Iterator[AuthService]:
    yield from running_auth_service()


@pytest.fixture
def stage(reachable_controller, echo):
    controller, cluster = reachable_controller
    return Stage(controller, cluster, echo)


def protected(stage: Stage, name: str, host: str, **annotations: str) -> None:
    stage.cluster.apply(*stage.backend("EXT", service=f"{name}-svc"))
    stage.cluster.apply(k8s.ingress(name, [k8s.rule(host, ("/", "Prefix", f"{name}-svc", 80))], annotations={
        f"{PREFIX}/{k}": v for k, v in annotations.items()}))


def get(stage: Stage, host: str, path: str = "/", verdict: str = "allow", method: str = "GET",
        data: bytes | None = None, **headers: str) -> requests.Response:
    return requests.request(method, f"http://127.0.0.1:{stage.controller.http_port}{path}", data=data, timeout=5,
                            headers={"Host": host, "X-Test-Verdict": verdict, **headers}, allow_redirects=False)


def test_allowed_requests_reach_the_backend_with_the_auth_response_headers(stage, auth_service):
    host = "ext.example.com"
    protected(stage, "ext", host, **{"auth-url": f"http://127.0.0.1:{auth_service.port}/check",
                                     "auth-response-headers": "X-Auth-Request-User"})
    wait_for(lambda: get(stage, host).status_code == 200, 10, what="allowed")
    auth_service.seen.clear()
    answer = get(stage, host, "/private?x=1", method="POST", data=b"body that stays with the backend")
    assert answer.status_code == 200 and answer.json()["backend"] == "EXT"
    assert answer.json()["headers"]["x-auth-request-user"] == "alice"
    assert answer.json()["body_bytes"] == len(b"body that stays with the backend")
    assert answer.headers["Set-Cookie"] == "session=from-auth"
    [asked] = auth_service.seen
    assert asked["method"] == "GET" and asked["path"] == "/check"
    assert asked["headers"]["host"] == f"127.0.0.1:{auth_service.port}"
    assert asked["headers"]["x-original-url"] == f"http://{host}/private?x=1"
    assert asked["headers"]["x-original-method"] == "POST"
    assert asked["headers"]["x-auth-request-redirect"] == "/private?x=1"
    assert asked["headers"]["x-sent-from"] == "nginx-ingress-controller"
    assert "content-length" not in asked["headers"]  # the body is not sent to the auth service

    # A client cannot claim the identity itself: the header comes from the auth service or not at all.
    spoofed = get(stage, host, verdict="allow-quietly", **{"X-Auth-Request-User": "root"})
    assert spoofed.status_code == 200 and "x-auth-request-user" not in spoofed.json()["headers"]


def test_denials_pass_through_and_failures_are_500(stage, auth_service):
    host = "deny.example.com"
    protected(stage, "deny", host, **{"auth-url": f"http://127.0.0.1:{auth_service.port}/check"})
    wait_for(lambda: get(stage, host).status_code == 200, 10, what="allowed")
    assert get(stage, host, verdict="deny").status_code == 401
    assert get(stage, host, verdict="forbid").status_code == 403
    assert get(stage, host, verdict="fail").status_code == 500


def test_401_redirects_to_signin_with_the_original_url(stage, auth_service):
    host = "signin.example.com"
    protected(stage, "signin", host, **{"auth-url": f"http://127.0.0.1:{auth_service.port}/check",
                                        "auth-signin": "https://login.example.com/start"})
    wait_for(lambda: get(stage, host).status_code == 200, 10, what="allowed")
    answer = get(stage, host, "/app/page?x=1", verdict="deny")
    assert answer.status_code == 302
    assert answer.headers["Location"] == (f"https://login.example.com/start?rd=http://{host}"
                                          "%2Fapp%2Fpage%3Fx%3D1")
    assert get(stage, host, verdict="forbid").status_code == 403  # only 401 signs in


def test_signin_variables_redirect_param_and_an_rd_already_there(stage, auth_service):
    url = f"http://127.0.0.1:{auth_service.port}/check"
    protected(stage, "param", "param.example.com", **{
        "auth-url": url, "auth-signin": "https://$host/oauth2/start?client=web",
        "auth-signin-redirect-param": "redirect_to"})
    protected(stage, "given", "given.example.com", **{
        "auth-url": url, "auth-signin": "https://$host/oauth2/start?rd=$escaped_request_uri"})
    for host in ("param.example.com", "given.example.com"):
        wait_for(lambda: get(stage, host).status_code == 200, 10, what=f"{host} allowed")
    assert get(stage, "param.example.com", "/a", verdict="deny").headers["Location"] == (
        "https://param.example.com/oauth2/start?client=web&redirect_to=http://param.example.com%2Fa")
    assert get(stage, "given.example.com", "/a b", verdict="deny").headers["Location"] == (
        "https://given.example.com/oauth2/start?rd=%2Fa%2520b")  # the raw URI ("/a%20b"), escaped


def test_auth_method_and_request_redirect(stage, auth_service):
    host = "method.example.com"
    protected(stage, "method", host, **{"auth-url": f"http://127.0.0.1:{auth_service.port}/verify",
                                        "auth-method": "POST",
                                        "auth-request-redirect": "https://method.example.com/home"})
    wait_for(lambda: get(stage, host).status_code == 200, 10, what="allowed")
    auth_service.seen.clear()
    assert get(stage, host, "/x").status_code == 200
    [asked] = auth_service.seen
    assert (asked["method"], asked["path"]) == ("POST", "/verify")
    assert asked["headers"]["x-auth-request-redirect"] == "https://method.example.com/home"
    assert asked["headers"]["x-original-uri"] == "/x"


def test_the_auth_location_is_not_reachable_by_clients(stage, auth_service):
    host = "internal.example.com"
    protected(stage, "internal", host, **{"auth-url": f"http://127.0.0.1:{auth_service.port}/check"})
    wait_for(lambda: get(stage, host).status_code == 200, 10, what="allowed")
    conf = stage.controller.nginx_conf().decode()
    auth_paths = [line.split()[2] for line in conf.splitlines() if "location = /_pyngress_auth_" in line]
    assert auth_paths
    auth_service.seen.clear()
    for path in auth_paths:
        assert get(stage, host, path).status_code == 404
    assert auth_service.seen == []


def test_an_auth_host_that_does_not_resolve_fails_closed_for_its_own_requests_only(stage, auth_service):
    # Resolved per request (as a Service DNS name is): no reload and no other tenant depends on it.
    protected(stage, "unresolvable", "nowhere.example.com",
              **{"auth-url": "http://auth.nowhere.invalid/check"})
    protected(stage, "neighbour", "neighbour.example.com",
              **{"auth-url": f"http://127.0.0.1:{auth_service.port}/check"})
    wait_for(lambda: get(stage, "neighbour.example.com").status_code == 200, 15, what="the neighbour served")
    wait_for(lambda: get(stage, "nowhere.example.com").status_code == 500, 15, what="500, never served open")


def test_global_auth_url_covers_every_ingress_but_those_opting_out(tmp_path, echo, auth_service):
    controller, cluster = start_manifests_controller(tmp_path, ["--configmap=ingress/controller"])
    try:
        stage = Stage(controller, cluster, echo)
        cluster.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "controller", "namespace": "ingress"},
                       "data": {"global-auth-url": f"http://127.0.0.1:{auth_service.port}/global",
                                "global-auth-response-headers": "X-Auth-Request-User"}})
        protected(stage, "covered", "covered.example.com")
        protected(stage, "opted-out", "out.example.com", **{"enable-global-auth": "false"})
        wait_for(lambda: get(stage, "covered.example.com", verdict="deny").status_code == 401, 15,
                 what="global auth applied")
        answer = get(stage, "covered.example.com")
        assert answer.status_code == 200 and answer.json()["headers"]["x-auth-request-user"] == "alice"
        assert auth_service.seen[-1]["path"] == "/global"
        # Each manifest is its own file: the opted-out Ingress may be picked up by a later sync.
        wait_for(lambda: get(stage, "out.example.com", verdict="deny").status_code == 200, 15,
                 what="the opted-out Ingress served without auth")

        # A bad value: the covered Ingress answers 503 (never served open), the opted-out one is untouched.
        # ($host is a variable auth-url may hold, as in ingress-nginx's docs; $remote_addr is not.)
        cluster.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "controller", "namespace": "ingress"},
                       "data": {"global-auth-url": "http://$remote_addr/global"}})
        wait_for(lambda: get(stage, "covered.example.com").status_code == 503, 15, what="503 while invalid")
        assert get(stage, "out.example.com", verdict="deny").status_code == 200
    finally:
        controller.stop()


def test_answers_are_cached_by_the_cache_key_for_the_duration(stage, auth_service):
    host = "cached.example.com"
    protected(stage, "cached", host, **{"auth-url": f"http://127.0.0.1:{auth_service.port}/check",
                                        "auth-cache-key": "$http_x_token", "auth-cache-duration": "200 401 1m"})
    protected(stage, "uncached", "uncached.example.com",
              **{"auth-url": f"http://127.0.0.1:{auth_service.port}/check"})
    # Each Ingress is a manifest file of its own: wait until both are served.
    for name in (host, "uncached.example.com"):
        wait_for(lambda: get(stage, name, **{"X-Token": "warm-up"}).status_code == 200, 10, what=f"{name} allowed")
    auth_service.seen.clear()
    # An answer with Set-Cookie is never cached (nginx's rule, as in ingress-nginx): the quiet 200 has none.
    for _ in range(3):
        assert get(stage, host, "/a", verdict="allow-quietly", **{"X-Token": "alice"}).status_code == 200
    assert len(auth_service.seen) == 1  # asked once, then answered from the cache
    assert get(stage, host, "/b", verdict="deny", **{"X-Token": "alice"}).status_code == 200  # same key: cached 200
    for _ in range(2):
        assert get(stage, host, verdict="deny", **{"X-Token": "mallory"}).status_code == 401
    assert len(auth_service.seen) == 2  # another key is asked; its 401 is cached too
    # The cache belongs to the profile and host: another host is asked for the same token.
    assert get(stage, "uncached.example.com", verdict="deny", **{"X-Token": "alice"}).status_code == 401
    assert len(auth_service.seen) == 3

"""auth-url values ingress-nginx takes, through the whole controller with a real auth service: a fixed
auth-cache-key caches per host and path (as ingress-nginx keys its cache per server and location), and
auth-url / auth-signin with the nginx variables of ingress-nginx's oauth2-proxy example."""
from __future__ import annotations

from typing import Iterator

import pytest

from tests.e2e.ingress.conftest import reachable
from tests.e2e.ingress.scenarios import Stage
from tests.e2e.ingress.test_external_auth import PREFIX, get
from tests.support import k8s
from tests.support.auth_service import AuthService, running_auth_service
from tests.support.net import wait_for


@pytest.fixture(scope="module")
def auth_service() -> Iterator[AuthService]:
    yield from running_auth_service()


@pytest.fixture(scope="module")
def stage(echo) -> Iterator[Stage]:
    with reachable() as (controller, cluster):
        yield Stage(controller, cluster, echo)


def protected_paths(stage: Stage, name: str, host: str | None, paths: tuple[str, ...], **annotations: str) -> None:
    stage.cluster.apply(*stage.backend("EXT", service=f"{name}-svc"))
    stage.cluster.apply(k8s.ingress(name, [k8s.rule(host, *((path, "Prefix", f"{name}-svc", 80) for path in paths))],
                                    annotations={f"{PREFIX}/{k}": v for k, v in annotations.items()}))


@pytest.mark.parametrize("keepalive", ["0", "4"], ids=["auth_request", "keepalive"])
def test_a_fixed_cache_key_never_lets_an_allow_for_one_path_admit_another(stage, auth_service, keepalive):
    host = f"paths-{keepalive}.example.com"
    protected_paths(stage, f"paths-{keepalive}", host, ("/foo", "/bar"),
                    **{"auth-url": f"http://127.0.0.1:{auth_service.port}/check", "auth-keepalive": keepalive,
                       "auth-cache-key": "fixed", "auth-cache-duration": "200 401 5m"})
    # The service allows /foo (a quiet 200: an answer with Set-Cookie is never cached) and denies /bar.
    wait_for(lambda: get(stage, host, "/foo", verdict="allow-quietly").status_code == 200, 15, what="/foo allowed")
    auth_service.seen.clear()
    assert get(stage, host, "/foo/page", verdict="deny").status_code == 200  # /foo's allow, from the cache
    assert auth_service.seen == []
    assert get(stage, host, "/bar", verdict="deny").status_code == 401  # asked: another path, another key
    [asked] = auth_service.seen
    assert asked["headers"]["x-original-url"] == f"http://{host}/bar"
    assert get(stage, host, "/bar", verdict="allow-quietly").status_code == 401  # /bar's own 401, cached
    assert len(auth_service.seen) == 1


def test_auth_url_with_host_asks_the_service_of_the_request_host(stage, auth_service):
    # A rule without host takes every Host: the auth request goes where each request's own host says.
    protected_paths(stage, "anyhost", None, ("/",), **{"auth-url": f"http://$host:{auth_service.port}/check"})
    wait_for(lambda: get(stage, "127.0.0.1", "/app").status_code == 200, 15, what="allowed through $host")
    auth_service.seen.clear()
    answer = get(stage, "127.0.0.1", "/app?x=1")
    assert answer.status_code == 200 and answer.json()["backend"] == "EXT"
    [asked] = auth_service.seen
    assert asked["path"] == "/check" and asked["headers"]["host"] == f"127.0.0.1:{auth_service.port}"
    assert asked["headers"]["x-original-url"] == "http://127.0.0.1/app?x=1"
    # Another host asks another service: none listens on 127.0.0.2, so the request fails (never served open).
    assert get(stage, "127.0.0.2", "/app").status_code == 500
    assert len(auth_service.seen) == 1


def test_auth_signin_redirects_with_the_escaped_request_uri(stage, auth_service):
    host = "sso.example.com"
    protected_paths(stage, "sso", host, ("/",), **{
        "auth-url": f"http://127.0.0.1:{auth_service.port}/check",
        "auth-signin": "https://$host/oauth2/start?rd=$escaped_request_uri"})
    wait_for(lambda: get(stage, host).status_code == 200, 15, what="allowed")
    denied = get(stage, host, "/app/page?x=1&y=2", verdict="deny")
    assert denied.status_code == 302
    assert denied.headers["Location"] == f"https://{host}/oauth2/start?rd=%2Fapp%2Fpage%3Fx%3D1%26y%3D2"

"""satisfy through the whole controller, with the cases of ingress-nginx's e2e (annotations/satisfy.go): with
`any`, a request that passes one access check (the allow-list, basic authentication, auth-url) is let through;
with `all` (the default) it must pass every one."""
from __future__ import annotations

from typing import Iterator

import pytest
import requests

from tests.e2e.ingress.scenarios import Stage
from tests.support import k8s
from tests.support.auth_service import AuthService, running_auth_service
from tests.support.htpasswd import basic_auth_secret
from tests.support.net import wait_for

PREFIX = "nginx.ingress.kubernetes.io"
CLIENT = "127.0.0.1/32"  # where the test's requests come from
ELSEWHERE = "10.0.0.0/8"


@pytest.fixture(scope="module")
def auth_service() -> Iterator[AuthService]:
    yield from running_auth_service()


@pytest.fixture
def stage(reachable_controller, echo):
    controller, cluster = reachable_controller
    stage = Stage(controller, cluster, echo)
    cluster.apply(basic_auth_secret("satisfy-users", {"uname": "pwd"}), *stage.backend("SATISFY"))
    return stage


def secured(stage: Stage, host: str, **annotations: str) -> None:
    stage.cluster.apply(k8s.ingress(host.split(".")[0], [k8s.rule(host, ("/", "Prefix", "satisfy", 80))], annotations={
        f"{PREFIX}/auth-type": "basic", f"{PREFIX}/auth-secret": "satisfy-users", f"{PREFIX}/auth-realm": "test",
        **{f"{PREFIX}/{k}": v for k, v in annotations.items()}}))


def get(stage: Stage, host: str, path: str = "/", auth: tuple[str, str] | None = None,
        **headers: str) -> requests.Response:
    return requests.get(f"http://127.0.0.1:{stage.controller.http_port}{path}", auth=auth, timeout=5,
                        headers={"Host": host, **headers}, allow_redirects=False)


def test_any_admits_a_client_the_allow_list_admits_without_credentials(stage):
    secured(stage, "any-listed.example.com", **{"satisfy": "any", "allowlist-source-range": CLIENT})
    secured(stage, "all-listed.example.com", **{"satisfy": "all", "allowlist-source-range": CLIENT})
    wait_for(lambda: get(stage, "any-listed.example.com").status_code == 200, 15, what="satisfy any")
    assert get(stage, "any-listed.example.com").json()["backend"] == "SATISFY"
    wait_for(lambda: get(stage, "all-listed.example.com").status_code == 401, 15, what="satisfy all")
    assert get(stage, "all-listed.example.com", auth=("uname", "pwd")).status_code == 200


def test_any_admits_a_client_outside_the_allow_list_with_credentials(stage):
    secured(stage, "any-outside.example.com", **{"satisfy": "any", "allowlist-source-range": ELSEWHERE})
    secured(stage, "all-outside.example.com", **{"allowlist-source-range": ELSEWHERE})  # all: nginx's default
    wait_for(lambda: get(stage, "any-outside.example.com").status_code == 401, 15, what="satisfy any")
    # Both checks failed: the authentication's 401 (with its challenge) wins over the allow-list's 403, as in nginx.
    assert get(stage, "any-outside.example.com").headers["WWW-Authenticate"] == 'Basic realm="test"'
    assert get(stage, "any-outside.example.com", auth=("uname", "wrong")).status_code == 401
    assert get(stage, "any-outside.example.com", auth=("uname", "pwd")).status_code == 200
    wait_for(lambda: get(stage, "all-outside.example.com", auth=("uname", "pwd")).status_code == 403, 15,
             what="satisfy all")


def test_any_with_basic_auth_and_auth_url(stage, auth_service):
    # ingress-nginx's case: the auth-url service refuses (401), basic credentials still let the request through;
    # without them, the auth-url's sign-in redirect.
    secured(stage, "auth.example.com", **{"auth-url": f"http://127.0.0.1:{auth_service.port}/basic-auth",
                                          "auth-signin": "http://$host/auth/start", "satisfy": "any"})
    wait_for(lambda: get(stage, "auth.example.com", auth=("uname", "pwd"), **{"X-Test-Verdict": "deny"}).status_code
             == 200, 15, what="basic credentials")
    refused = get(stage, "auth.example.com", "/?a=b&c=d", **{"X-Test-Verdict": "deny"})
    assert refused.status_code == 302
    assert refused.headers["Location"] == "http://auth.example.com/auth/start?rd=http://auth.example.com%2F%3Fa%3Db%26c%3Dd"
    # The auth-url service's allow alone is enough too.
    assert get(stage, "auth.example.com", **{"X-Test-Verdict": "allow"}).status_code == 200


def test_an_invalid_value_denies_the_paths(stage):
    secured(stage, "bad-satisfy.example.com", satisfy="some")
    wait_for(lambda: get(stage, "bad-satisfy.example.com", auth=("uname", "pwd")).status_code == 503, 15,
             what="denied paths")

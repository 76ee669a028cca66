"""ConfigMap no-auth-locations through the whole controller, with the cases of ingress-nginx's e2e
(settings/no_auth_locations.go): an Ingress path starting with one of its prefixes is served without the
Ingress's authentication (basic, auth-url); by default that is the ACME HTTP-01 challenge's path."""
from __future__ import annotations

from typing import Iterator

import pytest
import requests

from tests.e2e.ingress.conftest import reachable
from tests.e2e.ingress.scenarios import Stage
from tests.support import k8s
from tests.support.auth_service import AuthService, running_auth_service
from tests.support.htpasswd import basic_auth_secret
from tests.support.net import wait_for

PREFIX = "nginx.ingress.kubernetes.io"
CONFIGMAP = "ingress/controller"


@pytest.fixture(scope="module")
def auth_service() -> Iterator[AuthService]:
    yield from running_auth_service()


@pytest.fixture(scope="module")
def stage(echo):
    with reachable([f"--configmap={CONFIGMAP}"]) as (controller, cluster):
        stage = Stage(controller, cluster, echo)
        cluster.apply(basic_auth_secret("no-auth-users", {"foo": "bar"}), *stage.backend("NOAUTH"))
        yield stage


def configmap(**data: str) -> dict:
    namespace, name = CONFIGMAP.split("/")
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace}, "data": data}


def secured(stage: Stage, host: str, *paths: str, **annotations: str) -> None:
    stage.cluster.apply(k8s.ingress(host.split(".")[0], [k8s.rule(host, *((path, "Prefix", "noauth", 80)
                                                                          for path in paths))],
                                    annotations={f"{PREFIX}/{k}": v for k, v in annotations.items()}))


def get(stage: Stage, host: str, path: str, auth: tuple[str, str] | None = None, **headers: str) -> requests.Response:
    return requests.get(f"http://127.0.0.1:{stage.controller.http_port}{path}", auth=auth, timeout=5,
                        headers={"Host": host, **headers}, allow_redirects=False)


BASIC = {"auth-type": "basic", "auth-secret": "no-auth-users", "auth-realm": "test auth"}


def test_the_acme_challenge_path_skips_authentication_by_default(stage):
    secured(stage, "acme.example.com", "/", "/.well-known/acme-challenge", **BASIC)
    wait_for(lambda: get(stage, "acme.example.com", "/.well-known/acme-challenge/token").status_code == 200, 15,
             what="the challenge path served")
    wait_for(lambda: get(stage, "acme.example.com", "/").status_code == 401, 15, what="the root path authenticated")
    # The Ingress's path is compared, not the request's: under "/" the same URI is authenticated.
    secured(stage, "root-only.example.com", "/", **BASIC)
    wait_for(lambda: get(stage, "root-only.example.com", "/.well-known/acme-challenge/token").status_code == 401,
             15, what="the root path authenticated")


def test_configured_locations_skip_basic_and_external_authentication(stage, auth_service):
    stage.cluster.apply(configmap(**{"no-auth-locations": "/noauth, "}))
    secured(stage, "no-auth-locations.example.com", "/", "/noauth", **BASIC)
    secured(stage, "external.example.com", "/", "/noauth",
            **{"auth-url": f"http://127.0.0.1:{auth_service.port}/check"})
    wait_for(lambda: get(stage, "no-auth-locations.example.com", "/noauth").status_code == 200, 15,
             what="/noauth without credentials")
    assert get(stage, "no-auth-locations.example.com", "/noauth", auth=("foo", "bar")).status_code == 200
    wait_for(lambda: get(stage, "no-auth-locations.example.com", "/").status_code == 401, 15, what="/ authenticated")
    refused = get(stage, "no-auth-locations.example.com", "/")
    assert refused.status_code == 401 and "401 Authorization Required" in refused.text
    assert get(stage, "no-auth-locations.example.com", "/", auth=("foo", "bar")).status_code == 200
    wait_for(lambda: get(stage, "external.example.com", "/noauth", **{"X-Test-Verdict": "deny"}).status_code == 200,
             15, what="/noauth without auth-url")
    wait_for(lambda: get(stage, "external.example.com", "/", **{"X-Test-Verdict": "deny"}).status_code == 401, 15,
             what="/ asks auth-url")
    # The default is replaced: the challenge path is authenticated again.
    secured(stage, "acme-again.example.com", "/.well-known/acme-challenge", **BASIC)
    wait_for(lambda: get(stage, "acme-again.example.com", "/.well-known/acme-challenge/x").status_code == 401, 15,
             what="the challenge path authenticated")

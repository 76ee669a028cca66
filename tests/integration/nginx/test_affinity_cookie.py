"""The affinity cookie's attributes and a canary's stickiness as ingress-nginx sets them, from Ingresses through the
model to a real nginx: Path is each rule's Ingress path (session-cookie-path overrides it); Secure over HTTPS, and
over HTTP only with session-cookie-secure; a canary Ingress without affinity of its own keeps a session it served
(affinity-canary-behavior sticky, the default) with the main Ingress's cookie, and not with legacy."""
from __future__ import annotations

from typing import Any

import pytest

from tests.integration.nginx.conftest import trust
from tests.support.model_cluster import Cluster

HOST = "cookie.affinity.test"


@pytest.fixture(scope="module")
def nginx(shared_nginx):
    shared_nginx.apply(shared_nginx.config())
    trust(shared_nginx.paths.default_certificate)  # HTTPS requests get the default certificate
    return shared_nginx


@pytest.fixture(scope="module")
def backends(echo):
    return {name: echo(name) for name in ("main", "canary")}


def serve(nginx, backends, ingresses: list[tuple[str, dict[str, str], tuple]]) -> None:
    """Build the model of these Ingresses (name, annotations, paths) of HOST, each to its own Service, and push
    its routes with each Service's backend answered by the echo backend of that name."""
    cluster = Cluster()
    cluster.ingress_class()
    for age, (name, annotated, paths) in enumerate(ingresses):
        cluster.service(name)
        cluster.endpoint_slice(name)
        cluster.ingress(name, host=HOST, paths=paths, annotations=annotated, created=cluster.timestamp(age))
    model = cluster.build()
    assert not [p for p in model.problem_lines() if "default/" in p], model.problem_lines()
    nginx.push(model.routes, {backend: [backends[backend.split("-")[1]].endpoint] for backend in model.backends})


def cookie_of(response: Any) -> dict[str, str | None]:
    """The Set-Cookie attributes, by lower-case name (a flag's value is None)."""
    attributes: dict[str, str | None] = {}
    for part in response.headers["set-cookie"].split("; ")[1:]:
        name, _, value = part.partition("=")
        attributes[name.lower()] = value if value else None
    return attributes


def test_the_cookie_path_is_the_path_of_the_rule_that_served(nginx, backends):
    paths = (("/shop", "Prefix", "main", 80), ("/api/v1", "Prefix", "main", 80))
    serve(nginx, backends, [("main", {"affinity": "cookie"}, paths)])
    assert cookie_of(nginx.get("/shop/cart", host=HOST))["path"] == "/shop"
    assert cookie_of(nginx.get("/api/v1/items", host=HOST))["path"] == "/api/v1"
    serve(nginx, backends, [("main", {"affinity": "cookie", "session-cookie-path": "/"}, paths)])
    assert cookie_of(nginx.get("/shop/cart", host=HOST))["path"] == "/"


@pytest.mark.parametrize("annotations, over_http", [({}, False), ({"session-cookie-secure": "true"}, True)])
def test_the_cookie_is_secure_over_https_and_over_http_only_when_asked(nginx, backends, annotations, over_http):
    serve(nginx, backends, [("main", {"affinity": "cookie", **annotations}, (("/", "Prefix", "main", 80),))])
    assert ("secure" in cookie_of(nginx.get("/", host=HOST))) is over_http
    assert "secure" in cookie_of(nginx.get("/", host=HOST, https=True, sni=HOST))


@pytest.mark.parametrize("behaviour, sticky", [(None, True), ("sticky", True), ("legacy", False)])
def test_a_canary_without_affinity_keeps_its_sessions_by_the_main_ingress_cookie(nginx, backends, behaviour, sticky):
    canary = {"canary": "true", "canary-weight": "50",
              **({"affinity-canary-behavior": behaviour} if behaviour else {})}
    serve(nginx, backends, [("main", {"affinity": "cookie", "session-cookie-name": "sess"}, (("/", "Prefix", "main", 80),)),
                            ("canary", canary, (("/", "Prefix", "canary", 80),))])
    later: dict[str, set[frozenset[str]]] = {"main": set(), "canary": set()}
    for _ in range(20):  # new sessions: about half start on the canary
        first = nginx.get("/", host=HOST)
        cookie = first.headers.get("set-cookie", "").split(";")[0]
        assert not cookie or cookie.startswith("sess=")
        served = {nginx.get("/", host=HOST, headers={"Cookie": cookie}).backend for _ in range(5)} if cookie else set()
        later[first.backend].add(frozenset(served) if cookie else frozenset({"(no cookie)"}))
    assert later["main"] == {frozenset({"main"})}  # a session the main backend started stays there
    assert later["canary"] == ({frozenset({"canary"})} if sticky else {frozenset({"(no cookie)"})})

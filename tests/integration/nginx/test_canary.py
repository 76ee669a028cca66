"""Canary decisions as a client sees them through a real nginx, from the routes table alone (canary.lua):
header, header value, header pattern, cookie, weight, and their precedence; changing them reloads nothing."""
from __future__ import annotations

import math

import pytest

from services.syncer.annotations.base import AffinityPolicy, CanaryPolicy
from services.syncer.model.types import CanaryRoute, HostRoutes, Route


def canary_route(**policy) -> Route:
    return Route(backend="main", ingress="default/main",
                 canary=CanaryRoute(backend="canary", ingress="default/canary", policy=CanaryPolicy(**policy)))


@pytest.fixture(scope="module")
def routed(shared_nginx, echo):
    shared_nginx.apply(shared_nginx.config())
    main, canary = echo("main"), echo("canary")
    shared_nginx.push({"canary.test": HostRoutes(prefix={
        "/header": canary_route(header="X-Canary"),
        "/value": canary_route(header="X-Canary", header_value="blue"),
        "/pattern": canary_route(header="X-Canary", header_pattern="^(blue|green)$"),
        "/cookie": canary_route(cookie="canary"),
        "/both": canary_route(header="X-Canary", cookie="canary", weight=100),
        "/half": canary_route(weight=50),
        "/none": canary_route(weight=0),
        "/all": canary_route(weight=3, weight_total=3),
    })}, {"main": [main.endpoint], "canary": [canary.endpoint]})
    return shared_nginx


def served(nginx, path: str, headers: dict[str, str] | None = None) -> str:
    return nginx.get(path, host="canary.test", headers=headers or {}).backend


@pytest.mark.parametrize("path, headers, backend", [
    ("/header", {"X-Canary": "always"}, "canary"), ("/header", {"X-Canary": "never"}, "main"),
    ("/header", {"X-Canary": "other"}, "main"), ("/header", {}, "main"),
    ("/value", {"X-Canary": "blue"}, "canary"), ("/value", {"X-Canary": "always"}, "main"),
    ("/pattern", {"X-Canary": "green"}, "canary"), ("/pattern", {"X-Canary": "red"}, "main"),
    ("/cookie", {"Cookie": "canary=always"}, "canary"), ("/cookie", {"Cookie": "a=1; canary=never"}, "main"),
    # header first, then cookie, then weight
    ("/both", {"X-Canary": "never", "Cookie": "canary=always"}, "main"),
    ("/both", {"Cookie": "canary=never"}, "main"),
    ("/both", {"X-Canary": "maybe"}, "canary"),
    ("/none", {}, "main"), ("/all", {}, "canary"),
])
def test_header_cookie_and_weight_precedence(routed, path, headers, backend):
    assert served(routed, path, headers) == backend


def test_a_weight_of_half_sends_half_within_a_binomial_bound(routed):
    n = 1000
    canary = sum(served(routed, "/half") == "canary" for _ in range(n))
    bound = 5 * math.sqrt(n * 0.5 * 0.5)  # five standard deviations
    assert abs(canary - n / 2) < bound, canary


@pytest.mark.parametrize("sticky", [True, False])
def test_a_session_stays_on_the_backend_that_set_its_cookie_when_sticky(shared_nginx, echo, sticky):
    # affinity-canary-behavior: sticky keeps a session the canary served on the canary; legacy balances the
    # canary without the cookie, so such a session keeps its main-backend cookie (or none) and is decided again.
    shared_nginx.apply(shared_nginx.config())
    main, canary = echo("main"), echo("canary")
    route = Route(backend="main", ingress="default/main", affinity=AffinityPolicy(cookie="sess"),
                  canary=CanaryRoute(backend="canary", ingress="default/canary", policy=CanaryPolicy(weight=50),
                                     sticky=sticky))
    shared_nginx.push({"sticky.canary.test": HostRoutes(prefix={"/": route})},
                      {"main": [main.endpoint], "canary": [canary.endpoint]})
    sessions: dict[str, set[str]] = {"main": set(), "canary": set()}
    for _ in range(30):  # new sessions: half land on each backend
        first = shared_nginx.get("/", host="sticky.canary.test")
        cookie = first.headers.get("set-cookie", "").split(";")[0]
        backends = {shared_nginx.get("/", host="sticky.canary.test", headers={"Cookie": cookie}).backend
                    for _ in range(8)} if cookie else set()
        sessions[first.backend] |= {frozenset(backends)} if cookie else {frozenset({"(no cookie)"})}
    # A session the main backend started always stays there, sticky or not.
    assert sessions["main"] and sessions["main"] <= {frozenset({"main"})}
    if sticky:
        assert sessions["canary"] and sessions["canary"] <= {frozenset({"canary"})}
    else:
        assert sessions["canary"] and sessions["canary"] <= {frozenset({"(no cookie)"})}

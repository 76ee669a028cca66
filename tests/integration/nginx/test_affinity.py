"""Cookie affinity through a real nginx: the first answer sets the cookie with its attributes; a request with
the cookie always reaches the same endpoint, also after endpoints are added and after a reload; a cookie
naming a gone endpoint gets a new one."""
from __future__ import annotations

import re

import pytest

from services.syncer.annotations.base import AffinityPolicy
from services.syncer.model_types import HostRoutes, Route

STICKY = Route(backend="app", ingress="default/app",
               affinity=AffinityPolicy(cookie="route", path="/shop", max_age=3600, secure=True, samesite="Lax"))


@pytest.fixture(scope="module")
def backends(echo):
    return [echo(f"sticky-{i}") for i in range(4)]


@pytest.fixture(scope="module")
def nginx(shared_nginx):
    shared_nginx.apply(shared_nginx.config())
    return shared_nginx


def push(nginx, endpoints) -> None:
    nginx.push({"sticky.test": HostRoutes(prefix={"/": STICKY})}, {"app": [e.endpoint for e in endpoints]})


def test_the_cookie_keeps_a_session_on_its_endpoint(nginx, backends):
    push(nginx, backends[:2])
    first = nginx.get("/shop/cart", host="sticky.test")
    cookie = first.headers["set-cookie"]
    # The endpoint and its backend (what keeps a canary session on the canary), as ingress-nginx writes them.
    assert re.fullmatch(r"route=[0-9a-f]{32}\|[0-9a-f]{32}; Path=/shop; HttpOnly; Max-Age=3600; Secure; "
                        r"SameSite=Lax", cookie)
    value = cookie.split(";")[0]
    chosen = first.backend
    for _ in range(20):
        again = nginx.get("/shop/cart", host="sticky.test", headers={"Cookie": value})
        assert again.backend == chosen and "set-cookie" not in again.headers
    push(nginx, backends)  # endpoints added (persistent: the session stays)
    assert {nginx.get("/", host="sticky.test", headers={"Cookie": value}).backend for _ in range(10)} == {chosen}
    nginx.apply(nginx.config())  # a reload: the same cookie still names the same endpoint
    assert nginx.get("/", host="sticky.test", headers={"Cookie": value}).backend == chosen


def test_without_a_cookie_sessions_spread_and_a_stale_cookie_is_replaced(nginx, backends):
    push(nginx, backends)
    seen = {nginx.get("/", host="sticky.test").backend for _ in range(40)}
    assert len(seen) > 1
    stale = nginx.get("/", host="sticky.test", headers={"Cookie": "route=0123456789abcdef0123456789abcdef"})
    assert stale.headers["set-cookie"].startswith("route=") and stale.backend in {b.name for b in backends}


@pytest.mark.parametrize("agent, samesite", [
    ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36", True),
    ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/60.0.3112 Safari/537.36",
     False),
    ("Mozilla/5.0 (iPhone; CPU iPhone OS 12_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile", False),
    ("Mozilla/5.0 (iPhone; CPU iPhone OS 15_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile", True),
    ("Mozilla/5.0 (Linux; U; Android 9) AppleWebKit/537.36 (KHTML, like Gecko) UCBrowser/12.13.1.1235 Mobile", False),
    ("Mozilla/5.0 (Linux; U; Android 9) AppleWebKit/537.36 (KHTML, like Gecko) UCBrowser/12.13.4.1214 Mobile", True),
    (None, True),
])
def test_conditional_samesite_none_and_the_cookie_domain(nginx, backends, agent, samesite):
    policy = AffinityPolicy(cookie="cross", samesite="None", secure=True, conditional_samesite_none=True,
                            domain=".sticky.test")
    nginx.push({"cross.sticky.test": HostRoutes(prefix={"/": Route(backend="app", ingress="default/app", affinity=policy)})},
               {"app": [e.endpoint for e in backends[:2]]})
    cookie = nginx.get("/", host="cross.sticky.test", headers={"User-Agent": agent} if agent else {}).headers["set-cookie"]
    assert "; Domain=.sticky.test" in cookie
    assert ("; SameSite=None" in cookie) is samesite, cookie

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
    assert re.fullmatch(r"route=[0-9a-f]{32}; Path=/shop; HttpOnly; Max-Age=3600; Secure; SameSite=Lax", cookie)
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

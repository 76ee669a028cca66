"""Cookie affinity through a real nginx: the first answer sets the cookie with its attributes; a request with
the cookie always reaches the same endpoint, also after a reload and (persistent mode) after endpoints are
added; a cookie naming a gone endpoint gets a new one."""
from __future__ import annotations

import hashlib
import re
import zlib

import pytest

from services.syncer.annotations.base import AffinityPolicy
from services.syncer.model.types import HostRoutes, Route
from tests.integration.nginx.conftest import closed_endpoint

STICKY = Route(backend="app", ingress="default/app",
               affinity=AffinityPolicy(cookie="route", path="/shop", max_age=3600, secure=True, samesite="Lax",
                                       mode="persistent"))


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


def _md5(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()


def _rendezvous(key: str, endpoints: list[str]) -> str:
    """The endpoint a balanced session's key picks: the highest CRC32 of key and endpoint (hashing.lua)."""
    return max(endpoints, key=lambda endpoint: zlib.crc32(f"{key}\0{endpoint}".encode()))


def _named_endpoint(cookie: str, mode: str, endpoints: list[str]) -> str:
    key = cookie.split(";")[0].split("=", 1)[1].split("|")[0]
    if mode == "balanced":
        return _rendezvous(key, endpoints)
    return next(endpoint for endpoint in endpoints if _md5(endpoint) == key)


def _key_for(endpoint: str, mode: str, endpoints: list[str]) -> str:
    if mode == "persistent":
        return _md5(endpoint)
    return next(key for key in (_md5(str(i)) for i in range(1000)) if _rendezvous(key, endpoints) == endpoint)


@pytest.mark.parametrize("mode", ["persistent", "balanced"])
@pytest.mark.parametrize("change_on_failure", [False, True])
def test_a_failing_endpoint_and_session_cookie_change_on_failure(nginx, backends, mode, change_on_failure):
    """ingress-nginx's sticky balancers: a session whose endpoint fails retries that endpoint (502) unless
    change-on-failure, which serves it from another endpoint and re-issues the cookie for it; a new session
    whose first pick fails is moved either way, its cookie naming the endpoint that answered."""
    dead, alive = closed_endpoint(), backends[0]
    endpoints = [dead, alive.endpoint]
    policy = AffinityPolicy(cookie="route", change_on_failure=change_on_failure, mode=mode)
    nginx.push({"failover.sticky.test": HostRoutes(prefix={"/": Route(backend="app", ingress="default/app",
                                                                        affinity=policy)})},
               {"app": endpoints})
    for _ in range(12):  # the first pick is the dead endpoint about half the time
        new = nginx.get("/", host="failover.sticky.test")
        assert new.status == 200 and new.backend == alive.name
        assert new.headers["set-cookie"].endswith(f"|{_md5('app')}; Path=/; HttpOnly")
        assert _named_endpoint(new.headers["set-cookie"], mode, endpoints) == alive.endpoint
    session = {"Cookie": f"route={_key_for(dead, mode, endpoints)}|{_md5('app')}"}
    moved = nginx.get("/", host="failover.sticky.test", headers=session)
    if change_on_failure:
        assert moved.status == 200 and moved.backend == alive.name
        assert _named_endpoint(moved.headers["set-cookie"], mode, endpoints) == alive.endpoint
    else:
        assert moved.status == 502 and "set-cookie" not in moved.headers
    kept = nginx.get("/", host="failover.sticky.test",
                     headers={"Cookie": f"route={_key_for(alive.endpoint, mode, endpoints)}|{_md5('app')}"})
    assert kept.status == 200 and kept.backend == alive.name and "set-cookie" not in kept.headers


def test_balanced_sessions_keep_their_endpoint_and_a_share_moves_to_endpoints_added(nginx, backends):
    """affinity-mode balanced (the default): the cookie's key picks the endpoint by consistent hashing, so a
    session stays put, also across a reload, and when endpoints are added some sessions (only some) move."""
    route = Route(backend="app", ingress="default/app", affinity=AffinityPolicy(cookie="route"))
    nginx.push({"balanced.sticky.test": HostRoutes(prefix={"/": route})}, {"app": [e.endpoint for e in backends[:2]]})
    sessions = {}
    for _ in range(30):
        first = nginx.get("/", host="balanced.sticky.test")
        sessions[first.headers["set-cookie"].split(";")[0]] = first.backend
    assert len(set(sessions.values())) == 2

    def served(cookie: str) -> str:
        response = nginx.get("/", host="balanced.sticky.test", headers={"Cookie": cookie})
        assert "set-cookie" not in response.headers
        return response.backend
    assert {cookie: served(cookie) for cookie in sessions} == sessions
    nginx.apply(nginx.config())
    assert {cookie: served(cookie) for cookie in sessions} == sessions
    nginx.push({"balanced.sticky.test": HostRoutes(prefix={"/": route})}, {"app": [e.endpoint for e in backends]})
    after = {cookie: served(cookie) for cookie in sessions}
    moved = {cookie for cookie in sessions if after[cookie] != sessions[cookie]}
    assert moved and len(moved) < len(sessions)
    assert {after[cookie] for cookie in moved} <= {backends[2].name, backends[3].name}
    assert {cookie: served(cookie) for cookie in sessions} == after

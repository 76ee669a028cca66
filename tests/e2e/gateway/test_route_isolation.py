"""Tenant isolation for Gateway API routes (issue 36: "the same safety as Ingress"), through real nginx: a route of
one namespace never takes a host that a Gateway keeps for another namespace, nor one that another namespace's
Ingress owns; a route with hostile values is refused or contained, never reaches nginx.conf raw, and never keeps
another tenant's change from being served."""
from __future__ import annotations

import pytest

from tests.support import gateway_objects as gw
from tests.support import k8s
from tests.support.net import wait_for

PUBLIC = {"name": "public", "namespace": "infra"}
SHOP_GATEWAY = {"name": "shop-gw", "namespace": "shop"}


@pytest.fixture(scope="module")
def tenants(stage):
    """Gateway infra/public (HTTP, routes from every namespace) and shop/shop-gw (HTTP for *.shop.example, routes
    from its own namespace only); backends SHOP (namespace shop), TENANT (namespace tenant), OTHER (namespace
    other)."""
    stage.cluster.apply(
        gw.gateway("public", ns="infra", listeners=[gw.listener("http", namespaces={"from": "All"})]),
        gw.gateway("shop-gw", ns="shop", listeners=[gw.listener("http", hostname="*.shop.example")]),
        *stage.backend("SHOP", "shop", namespace="shop"), *stage.backend("TENANT", "tenant", namespace="tenant"),
        *stage.backend("OTHER", "other", namespace="other"))
    return stage


def route(name: str, ns: str, hostnames: list[str], *rules: dict, parents=(PUBLIC,)) -> dict:
    return gw.http_route(name, ns=ns, parents=parents, hostnames=hostnames,
                         rules=rules or [gw.rule(gw.backend_ref(ns))])


def refused(stage, ref: str) -> bool:
    return any(ref in problem for problem in stage.controller.problems())


def test_a_route_never_takes_a_host_on_a_listener_kept_for_another_namespace(tenants):
    stage = tenants
    stage.cluster.apply(route("store", "shop", ["www.shop.example"], parents=[SHOP_GATEWAY]))
    stage.expect_answer("www.shop.example", "/", "SHOP")
    # The tenant names the shop's Gateway, with and without a hostname: that listener allows namespace shop only.
    stage.cluster.apply(route("steal", "tenant", ["www.shop.example"], parents=[SHOP_GATEWAY]),
                        route("steal-any", "tenant", [], parents=[{**SHOP_GATEWAY, "sectionName": "http"}]),
                        route("steal-new", "tenant", ["new.shop.example"], parents=[SHOP_GATEWAY]))
    wait_for(lambda: refused(stage, "tenant/steal:") and refused(stage, "tenant/steal-any:"), 10,
             what="the tenant's routes refused")
    for _ in range(10):
        assert stage.answer("www.shop.example", "/")["backend"] == "SHOP"
    assert stage.answer("new.shop.example", "/")["status"] == 404
    # Through the Gateway that allows every namespace, the tenant still gets no request of the shop's listener's hosts
    # (the most specific listener takes them, and only its routes serve them).
    stage.cluster.apply(route("steal-public", "tenant", ["www.shop.example"]))
    stage.cluster.apply(route("marker", "other", ["marker-1.example.com"]))
    stage.expect_answer("marker-1.example.com", "/", "OTHER")
    for _ in range(10):
        assert stage.answer("www.shop.example", "/")["backend"] == "SHOP"


def test_a_route_never_takes_a_host_another_namespaces_ingress_owns(tenants):
    stage = tenants
    host = "owned.example.com"
    stage.cluster.apply(k8s.ingress("site", [k8s.rule(host, ("/", "Prefix", "shop", 80))], "shop"))
    stage.expect(host, "/", "SHOP")
    stage.cluster.apply(route("hijack", "tenant", [host], gw.rule(gw.backend_ref("tenant"),
                                                                  matches=[gw.path_match("/")])),
                        route("hijack-wild", "tenant", ["*.example.com"]))
    stage.cluster.apply(route("marker", "other", ["marker-2.example.com"]))
    stage.expect_answer("marker-2.example.com", "/", "OTHER")
    for path in ("/", "/admin", "/x/y"):
        assert stage.answer(host, path)["backend"] == "SHOP", path
    wait_for(lambda: any("tenant/hijack" in p and host in p for p in stage.controller.problems()), 10,
             what="the warning naming the owned host")
    # The owner's own namespace may move a path of its host to an HTTPRoute (the migration the docs describe).
    stage.cluster.apply(route("moved", "shop", [host], gw.rule(gw.backend_ref("shop"),
                                                               matches=[gw.path_match("/moved")])))
    stage.expect_answer(host, "/moved", "SHOP")
    assert stage.answer(host, "/")["backend"] == "SHOP"


HOSTILE_MARK = "hostile-mark"


def hostile_routes() -> list[dict]:
    """One route per hostile value (each on its own host), and one with 10,000 rules."""
    bad_values = {
        "header-crlf": {"matches": [gw.path_match("/", headers={"X-A": f"{HOSTILE_MARK}\r\nX-Injected: 1"})]},
        "header-name": {"matches": [gw.path_match("/", headers={f"X-{HOSTILE_MARK} ;{{": "v"})]},
        "set-crlf": {"filters": [{"type": "RequestHeaderModifier", "requestHeaderModifier": {
            "set": [{"name": "X-A", "value": f"{HOSTILE_MARK}\nproxy_pass http://evil;"}]}}]},
        "path-space": {"matches": [gw.path_match(f"/{HOSTILE_MARK} x")]},
        "path-brace": {"matches": [gw.path_match(f"/{HOSTILE_MARK}{{;}}")]},
        "regex-bad": {"matches": [gw.path_match(f"/({HOSTILE_MARK}", "RegularExpression")]},
        "regex-lookbehind": {"matches": [{"path": {"type": "PathPrefix", "value": "/"},
                                          "headers": [{"type": "RegularExpression", "name": "X-A",
                                                       "value": f"(?<={HOSTILE_MARK}+)x"}]}]},
        "redirect-host": {"filters": [{"type": "RequestRedirect", "requestRedirect": {
            "hostname": f"{HOSTILE_MARK} evil.example.com"}}]},
        "rewrite-path": {"filters": [{"type": "URLRewrite", "urlRewrite": {
            "path": {"type": "ReplaceFullPath", "replaceFullPath": f"/{HOSTILE_MARK};\nreturn 200"}}}]},
        "weight": {"backendRefs": [gw.backend_ref("tenant", weight=10**15)]},
        "timeout": {"timeouts": {"request": f"1s;{HOSTILE_MARK}"}},
        "method": {"matches": [{"path": {"type": "PathPrefix", "value": "/"}, "method": f"GET;{HOSTILE_MARK}"}]},
        "query-name": {"matches": [gw.path_match("/", query={f"{HOSTILE_MARK}\"$x": "v"})]},
    }
    routes = []
    for name, rule in bad_values.items():
        full = {"backendRefs": [gw.backend_ref("tenant")], **rule}
        routes.append(route(f"bad-{name}", "tenant", [f"{name}.hostile.example"], full))
    many = [gw.rule(gw.backend_ref("tenant"), matches=[gw.path_match(f"/r{i}")]) for i in range(10_000)]
    routes.append(route("bad-many-rules", "tenant", ["many.hostile.example"], *many))
    return routes


def test_hostile_routes_are_refused_or_contained_and_never_block_another_tenant(tenants):
    stage = tenants
    stage.cluster.apply(route("before", "other", ["before.example.com"]))
    stage.expect_answer("before.example.com", "/", "OTHER")
    hostile = hostile_routes()
    stage.cluster.apply(*hostile)
    # Another tenant's change made right afterwards is served within seconds.
    stage.cluster.apply(route("after", "other", ["after.example.com"]))
    stage.expect_answer("after.example.com", "/", "OTHER", timeout=10)
    assert stage.answer("before.example.com", "/")["backend"] == "OTHER"
    assert stage.controller.health().status_code == 200
    for bad in hostile:
        ref = f"tenant/{bad['metadata']['name']}"
        wait_for(lambda: refused(stage, f"HTTPRoute {ref}:"), 10, what=f"{ref} refused")
        host = bad["spec"]["hostnames"][0]
        assert stage.answer(host, "/")["status"] == 404, host  # nothing of it is served
    assert HOSTILE_MARK.encode() not in stage.controller.nginx_conf()


def test_values_nginx_would_read_as_syntax_are_data_to_the_backend(tenants):
    stage = tenants
    value = "a\"b'c $host ${x} ; { } \\ `x`"
    host = "contained.tenant.test"
    stage.cluster.apply(route("contained", "tenant", [host], {
        "backendRefs": [gw.backend_ref("tenant")],
        "matches": [gw.path_match("/a$b(c)", "Exact", headers={"X-Key": "$host;{"})],
        "filters": [{"type": "RequestHeaderModifier", "requestHeaderModifier": {"set": [{"name": "X-V", "value": value}]}}],
    }))
    answer = stage.expect_answer(host, "/a$b(c)", "TENANT", headers={"X-Key": "$host;{"})
    assert answer["headers"]["x-v"] == value
    assert stage.answer(host, "/a$b(c)", headers={"X-Key": host})["status"] == 404
    assert b"$host;{" not in stage.controller.nginx_conf() and value.encode() not in stage.controller.nginx_conf()

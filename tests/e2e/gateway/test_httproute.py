"""HTTPRoute through the whole controller in manifests mode, case by case as the Gateway API conformance suite
checks them (its cases, our own manifests): matches, precedence, hostnames, weights, filters, references."""
from __future__ import annotations

from collections import Counter

from tests.support import gateway_objects as gw
from tests.support.net import wait_for

RELOADS = "nginx_ingress_controller_success"


def public_gateway(stage) -> None:
    """Gateway "public" in namespace infra: one HTTP listener for any host, routes from every namespace."""
    stage.cluster.apply(gw.gateway("public", ns="infra", listeners=[gw.listener("http", namespaces={"from": "All"})]))


PUBLIC = {"name": "public", "namespace": "infra"}


def route(name: str, *rules: dict, ns: str = "default", hostnames=(), parents=(PUBLIC,), created=None) -> dict:
    return gw.http_route(name, ns=ns, parents=parents, hostnames=hostnames, rules=rules, created=created)


def test_simple_route_exact_path_and_path_match_order(stage):
    public_gateway(stage)
    stage.cluster.apply(*stage.backend("GW-ONE"), *stage.backend("GW-TWO"), *stage.backend("GW-THREE"))
    stage.cluster.apply(route("order", gw.rule(gw.backend_ref("gw-one"), matches=[gw.path_match("/")]),
                              gw.rule(gw.backend_ref("gw-two"), matches=[gw.path_match("/two")]),
                              gw.rule(gw.backend_ref("gw-three"), matches=[gw.path_match("/two/exact", "Exact")]),
                              hostnames=["order.example.com"]))
    host = "order.example.com"
    stage.expect_answer(host, "/", "GW-ONE")
    for path, want in (("/x", "GW-ONE"), ("/two", "GW-TWO"), ("/two/", "GW-TWO"), ("/two/exact", "GW-THREE"),
                       ("/two/exact/more", "GW-TWO"), ("/twofold", "GW-ONE")):
        assert stage.answer(host, path).get("backend") == want, path
    assert stage.answer("unknown.example.com", "/")["status"] == 404


def test_header_query_and_method_matches_with_fallback_to_the_next_path(stage):
    public_gateway(stage)
    stage.cluster.apply(*stage.backend("GW-ONE"), *stage.backend("GW-TWO"), *stage.backend("GW-THREE"))
    host = "match.example.com"
    stage.cluster.apply(route("matches", *[
        gw.rule(gw.backend_ref("gw-one"), matches=[gw.path_match("/")]),
        gw.rule(gw.backend_ref("gw-two"), matches=[gw.path_match("/api", headers={"version": "two"}),
                                                   gw.path_match("/api", query={"animal": "whale"})]),
        gw.rule(gw.backend_ref("gw-three"), matches=[gw.path_match("/api", method="POST")]),
        {"backendRefs": [gw.backend_ref("gw-three")],
         "matches": [{"path": {"type": "PathPrefix", "value": "/re"},
                      "headers": [{"type": "RegularExpression", "name": "X-Id", "value": "^[0-9]+$"}]}]}],
        hostnames=[host]))
    stage.expect_answer(host, "/api/x", "GW-ONE")  # no condition holds: the next candidate path, "/"
    stage.expect_answer(host, "/api/x", "GW-TWO", headers={"Version": "two"})
    assert stage.answer(host, "/api/x", headers={"version": "one"})["backend"] == "GW-ONE"
    assert stage.answer(host, "/api", params={"animal": "whale"})["backend"] == "GW-TWO"
    assert stage.answer(host, "/api", params={"animal": "dolphin"})["backend"] == "GW-ONE"
    assert stage.answer(host, "/api", method="POST")["backend"] == "GW-THREE"
    # A method match ranks above header matches (the spec's precedence), on the same path.
    assert stage.answer(host, "/api", method="POST", headers={"version": "two"})["backend"] == "GW-THREE"
    assert stage.answer(host, "/re", headers={"X-Id": "123"})["backend"] == "GW-THREE"
    assert stage.answer(host, "/re", headers={"X-Id": "12a"})["backend"] == "GW-ONE"


def test_matching_across_routes_and_hostnames(stage):
    public_gateway(stage)
    stage.cluster.apply(*stage.backend("GW-ONE"), *stage.backend("GW-TWO"), *stage.backend("GW-THREE"))
    stage.cluster.apply(
        route("across-a", gw.rule(gw.backend_ref("gw-one"), matches=[gw.path_match("/")]),
              gw.rule(gw.backend_ref("gw-one"), matches=[gw.path_match("/v2", headers={"version": "two"})]),
              hostnames=["across.example.com", "across.example.net"], created="2020-01-01T00:00:00Z"),
        route("across-b", gw.rule(gw.backend_ref("gw-two"), matches=[gw.path_match("/v2")]),
              gw.rule(gw.backend_ref("gw-three"), matches=[gw.path_match("/", headers={"version": "two"})]),
              hostnames=["across.example.com"], created="2021-01-01T00:00:00Z"))
    host = "across.example.com"
    stage.expect_answer(host, "/v2", "GW-TWO")
    assert stage.answer(host, "/v2", headers={"version": "two"})["backend"] == "GW-ONE"  # more header matches
    assert stage.answer(host, "/", headers={"version": "two"})["backend"] == "GW-THREE"
    assert stage.answer(host, "/")["backend"] == "GW-ONE"
    assert stage.answer("across.example.net", "/v2")["backend"] == "GW-ONE"


def test_listener_hostnames_and_hostname_intersection(stage):
    stage.cluster.apply(*stage.backend("GW-ONE"), *stage.backend("GW-TWO"), *stage.backend("GW-THREE"))
    stage.cluster.apply(gw.gateway("listeners", ns="infra", listeners=[
        gw.listener("bar", hostname="bar.com", namespaces={"from": "All"}),
        gw.listener("foo-bar", hostname="foo.bar.com", namespaces={"from": "All"}),
        gw.listener("wild-bar", hostname="*.bar.com", namespaces={"from": "All"})]))
    def on(section: str) -> tuple[dict, ...]:
        return ({"name": "listeners", "namespace": "infra", "sectionName": section},)
    stage.cluster.apply(
        route("to-bar", gw.rule(gw.backend_ref("gw-one")), parents=on("bar")),
        route("to-foo-bar", gw.rule(gw.backend_ref("gw-two")), parents=on("foo-bar")),
        # Its hostnames intersect *.bar.com in two names: the other ones are not served.
        route("to-wild", gw.rule(gw.backend_ref("gw-three")), parents=on("wild-bar"),
              hostnames=["*.bar.com", "very.specific.bar.com", "bar.com", "other.org"]))
    stage.expect_answer("bar.com", "/", "GW-ONE")
    stage.expect_answer("foo.bar.com", "/", "GW-TWO")
    stage.expect_answer("baz.bar.com", "/", "GW-THREE")
    assert stage.answer("very.specific.bar.com", "/")["backend"] == "GW-THREE"
    assert stage.answer("any.deeper.bar.com", "/")["backend"] == "GW-THREE"  # a wildcard covers any depth
    assert stage.answer("other.org", "/")["status"] == 404


def test_weights_split_traffic_within_tolerance(stage):
    public_gateway(stage)
    stage.cluster.apply(*stage.backend("GW-ONE"), *stage.backend("GW-TWO"), *stage.backend("GW-THREE"))
    host = "weights.example.com"
    stage.cluster.apply(route("weights", gw.rule(gw.backend_ref("gw-one", weight=70), gw.backend_ref("gw-two", weight=30),
                                                 gw.backend_ref("gw-three", weight=0)), hostnames=[host]))
    wait_for(lambda: stage.answer(host, "/").get("backend") in ("GW-ONE", "GW-TWO"), 10, what="the weighted route")
    seen = Counter(stage.answer(host, "/").get("backend") for _ in range(600))
    assert set(seen) <= {"GW-ONE", "GW-TWO"}, seen
    assert 0.6 < seen["GW-ONE"] / 600 < 0.8, seen  # 70% ± 10 points: far beyond chance at 600 requests


def test_request_and_response_header_modifiers(stage):
    public_gateway(stage)
    stage.cluster.apply(*stage.backend("GW-ONE"))
    host = "headers.example.com"
    stage.cluster.apply(route("headers", gw.rule(gw.backend_ref("gw-one"), filters=[
        {"type": "RequestHeaderModifier", "requestHeaderModifier": {
            "set": [{"name": "X-Set", "value": "set-value"}], "add": [{"name": "X-Add", "value": "added"}],
            "remove": ["X-Remove"]}},
        {"type": "ResponseHeaderModifier", "responseHeaderModifier": {
            "set": [{"name": "X-Backend", "value": "hidden"}], "add": [{"name": "X-Response-Add", "value": "yes"}],
            "remove": ["Content-Type"]}}]), hostnames=[host]))
    answer = stage.expect_answer(host, "/", "GW-ONE", headers={"X-Set": "client", "X-Add": "client",
                                                               "X-Remove": "gone"})
    headers = answer["headers"]
    assert headers["x-set"] == "set-value"
    assert headers["x-add"] == "client,added"
    assert "x-remove" not in headers
    response = answer["response"]
    assert response.headers["X-Backend"] == "hidden"
    assert response.headers["X-Response-Add"] == "yes"
    assert "Content-Type" not in response.headers


def test_redirects(stage):
    public_gateway(stage)
    host = "redirect.example.com"

    def redirect(prefix: str, **spec) -> dict:
        return gw.rule(matches=[gw.path_match(prefix)], filters=[{"type": "RequestRedirect", "requestRedirect": spec}])
    stage.cluster.apply(route("redirects", *[
        redirect("/scheme", scheme="https"),
        redirect("/host", hostname="example.org", statusCode=301),
        redirect("/full", path={"type": "ReplaceFullPath", "replaceFullPath": "/replaced"}),
        redirect("/prefix", path={"type": "ReplacePrefixMatch", "replacePrefixMatch": "/new"}),
        redirect("/port", port=8443, scheme="https")], hostnames=[host]))
    response = stage.expect_answer(host, "/scheme/a", 302, params={"q": "1"})["response"]
    assert response.headers["Location"] == "https://redirect.example.com/scheme/a?q=1"
    response = stage.answer(host, "/host")["response"]
    assert (response.status_code, response.headers["Location"]) == (
        301, f"http://example.org:{stage.controller.http_port}/host")
    assert stage.answer(host, "/full/x")["response"].headers["Location"] == \
        f"http://{host}:{stage.controller.http_port}/replaced"
    assert stage.answer(host, "/prefix/x/y")["response"].headers["Location"] == \
        f"http://{host}:{stage.controller.http_port}/new/x/y"
    assert stage.answer(host, "/port")["response"].headers["Location"] == f"https://{host}:8443/port"


def test_url_rewrite_of_host_and_path(stage):
    public_gateway(stage)
    stage.cluster.apply(*stage.backend("GW-ONE"))
    host = "rewrite.example.com"

    def rewrite(prefix: str, **spec) -> dict:
        return gw.rule(gw.backend_ref("gw-one"), matches=[gw.path_match(prefix)],
                       filters=[{"type": "URLRewrite", "urlRewrite": spec}])
    stage.cluster.apply(route("rewrites", *[
        rewrite("/host", hostname="inner.example.com"),
        rewrite("/full", path={"type": "ReplaceFullPath", "replaceFullPath": "/one"}),
        rewrite("/prefix", path={"type": "ReplacePrefixMatch", "replacePrefixMatch": "/"})], hostnames=[host]))
    answer = stage.expect_answer(host, "/host/x", "GW-ONE")
    assert (answer["headers"]["host"], answer["path"]) == ("inner.example.com", "/host/x")
    assert stage.answer(host, "/full/x?a=1")["path"] == "/one?a=1"
    assert stage.answer(host, "/prefix/x/y")["path"] == "/x/y"
    assert stage.answer(host, "/prefix")["path"] == "/"


def test_cross_namespace_backends_need_a_reference_grant_and_bad_refs_answer_500(stage):
    public_gateway(stage)
    stage.cluster.apply(*stage.backend("GW-OTHER-NS", service="web", namespace="backends"),
                        *stage.backend("GW-ONE"))
    host = "refs.example.com"
    stage.cluster.apply(route("refs", *[
        gw.rule(gw.backend_ref("web", ns="backends"), matches=[gw.path_match("/cross")]),
        gw.rule(gw.backend_ref("does-not-exist"), matches=[gw.path_match("/missing")]),
        gw.rule(gw.backend_ref("gw-one", kind="Pod"), matches=[gw.path_match("/kind")]),
        gw.rule(gw.backend_ref("gw-one"), matches=[gw.path_match("/")])], hostnames=[host]))
    stage.expect_answer(host, "/", "GW-ONE")
    for path in ("/cross", "/missing", "/kind"):
        assert stage.answer(host, path)["status"] == 500, path
    assert any("RefNotPermitted" in p for p in stage.controller.problems())
    stage.cluster.apply(gw.reference_grant("from-default", ns="backends", from_namespace="default"))
    stage.expect_answer(host, "/cross", "GW-OTHER-NS")


def test_a_tenant_never_takes_a_hostname_its_listener_does_not_allow(stage):
    public_gateway(stage)
    stage.cluster.apply(*stage.backend("GW-SHOP", service="shop", namespace="shop"),
                        *stage.backend("GW-EVIL", service="evil", namespace="tenant"))
    host = "shop.example.com"
    stage.cluster.apply(gw.gateway("shop", ns="shop", listeners=[gw.listener("http", hostname=host)]))
    stage.cluster.apply(route("shop", gw.rule(gw.backend_ref("shop")), ns="shop", parents=({"name": "shop"},)))
    stage.expect_answer(host, "/", "GW-SHOP")
    stage.cluster.apply(
        # Straight onto the shop's listener, which allows its own namespace only: refused.
        route("steal", gw.rule(gw.backend_ref("evil")), ns="tenant", hostnames=[host],
              parents=({"name": "shop", "namespace": "shop"},), created="2000-01-01T00:00:00Z"),
        # Through the public listener, which allows all namespaces: the shop's listener, whose Gateway named the
        # host before this route did, is the one that serves it (docs/gateway-api.md, "A host across namespaces").
        route("steal-public", gw.rule(gw.backend_ref("evil", weight=1)), ns="tenant", hostnames=[host]))
    wait_for(lambda: any("tenant/steal:" in p for p in stage.controller.problems()), 10, what="the refusal")
    for path in ("/", "/x"):
        assert stage.answer(host, path)["backend"] == "GW-SHOP"


def test_a_route_change_is_applied_without_a_reload(stage):
    public_gateway(stage)
    stage.cluster.apply(*stage.backend("GW-ONE"), *stage.backend("GW-TWO"))
    host = "noreload.example.com"

    def apply(backend: str, path: str = "/") -> None:
        stage.cluster.apply(route("noreload", gw.rule(gw.backend_ref(backend), matches=[gw.path_match(path)]),
                                  hostnames=[host]))
    apply("gw-one")
    stage.expect_answer(host, "/", "GW-ONE")
    reloads = stage.controller.settled_reloads()
    apply("gw-two")
    stage.expect_answer(host, "/", "GW-TWO")
    apply("gw-two", "/moved")
    stage.expect_answer(host, "/", 404)
    stage.expect_answer(host, "/moved", "GW-TWO")
    assert stage.controller.metric(RELOADS) == reloads

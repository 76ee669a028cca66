"""Filters on a backendRef and the CORS filter through real nginx, as the conformance cases check them
(HTTPRouteRequestHeaderModifierBackendWeights, HTTPRouteBackendRequestHeaderModifier, HTTPRouteBackendRequestRedirect,
HTTPRouteBackendURLRewrite, HTTPRouteCORS; their cases, our manifests): table data, applied without a reload. And
HTTPRouteHTTPSListenerDetectMisdirectedRequests: 421 when the Host and the SNI are different HTTPS listeners'."""
from __future__ import annotations

import json

import pytest

from tests.e2e.tls.pki import TestCA, https_get, tls_secret
from tests.support import gateway_objects as gw
from tests.support import k8s
from tests.support.net import wait_for

RELOADS = "nginx_ingress_controller_success"
PUBLIC = {"name": "public", "namespace": "infra"}


@pytest.fixture(scope="module")
def public(stage):
    """Gateway "public" (one HTTP listener, routes of every namespace) and the backends GW-ONE, GW-TWO."""
    stage.cluster.apply(gw.gateway("public", ns="infra", listeners=[gw.listener("http", namespaces={"from": "All"})]))
    stage.cluster.apply(*stage.backend("GW-ONE"), *stage.backend("GW-TWO"))
    return stage


def route(name: str, host: str, *rules: dict) -> dict:
    return gw.http_route(name, parents=[PUBLIC], hostnames=[host], rules=rules)


def with_filters(ref: dict, *filters: dict) -> dict:
    return {**ref, "filters": list(filters)}


def set_request_header(name: str, value: str) -> dict:
    return {"type": "RequestHeaderModifier", "requestHeaderModifier": {"set": [{"name": name, "value": value}]}}


def test_each_weighted_backend_gets_its_own_request_headers(public):
    stage, host = public, "backend-weights.example.com"
    stage.cluster.apply(route("backend-weights", host, gw.rule(
        with_filters(gw.backend_ref("gw-one", weight=10), set_request_header("Backend", "GW-ONE")),
        with_filters(gw.backend_ref("gw-two", weight=10), set_request_header("Backend", "GW-TWO")))))
    wait_for(lambda: stage.answer(host, "/").get("backend") in ("GW-ONE", "GW-TWO"), 20, what="the route")
    seen = set()
    for _ in range(100):
        answer = stage.answer(host, "/", headers={"Backend": "client"})
        assert answer["headers"]["backend"] == answer["backend"]  # one value: the chosen backend's, nothing else
        seen.add(answer["backend"])
    assert seen == {"GW-ONE", "GW-TWO"}


def test_backend_request_header_modifier_set_add_remove_after_the_rules(public):
    stage, host = public, "backend-headers.example.com"
    stage.cluster.apply(route("backend-headers", host, gw.rule(
        with_filters(gw.backend_ref("gw-one"), {"type": "RequestHeaderModifier", "requestHeaderModifier": {
            "set": [{"name": "X-Header-Set", "value": "set-overwrites-values"}],
            "add": [{"name": "X-Header-Add", "value": "add-appends-values"}],
            "remove": ["X-Header-Remove"]}}, {"type": "ResponseHeaderModifier", "responseHeaderModifier": {
                "set": [{"name": "X-Response", "value": "backend"}]}}),
        filters=[{"type": "RequestHeaderModifier", "requestHeaderModifier": {
            "set": [{"name": "X-Rule", "value": "rule"}, {"name": "X-Header-Set", "value": "from-the-rule"}]}}])))
    answer = stage.expect_answer(host, "/", "GW-ONE", headers={
        "x-header-set": "client", "x-header-add": "some-other-value", "x-header-remove": "gone", "Other": "val"})
    headers = answer["headers"]
    assert headers["x-header-set"] == "set-overwrites-values"  # the backend's filter after the rule's
    assert headers["x-header-add"] == "some-other-value,add-appends-values"
    assert "x-header-remove" not in headers
    assert (headers["x-rule"], headers["other"]) == ("rule", "val")
    assert answer["response"].headers["X-Response"] == "backend"


def test_backend_request_redirect_and_url_rewrite(public):
    stage, host = public, "backend-redirect.example.com"

    def rule(prefix: str, kind: str, path: dict) -> dict:
        spec = {"requestRedirect" if kind == "RequestRedirect" else "urlRewrite": {"path": path}}
        return gw.rule(with_filters(gw.backend_ref("gw-one"), {"type": kind, **spec}), matches=[gw.path_match(prefix)])
    stage.cluster.apply(route("backend-redirect", host,
                              rule("/full", "RequestRedirect", {"type": "ReplaceFullPath",
                                                                "replaceFullPath": "/redirected-full"}),
                              rule("/prefix", "RequestRedirect", {"type": "ReplacePrefixMatch",
                                                                  "replacePrefixMatch": "/redirected-prefix"}),
                              rule("/rw-full", "URLRewrite", {"type": "ReplaceFullPath",
                                                              "replaceFullPath": "/rewritten-full"}),
                              rule("/rw-prefix", "URLRewrite", {"type": "ReplacePrefixMatch",
                                                                "replacePrefixMatch": "/rewritten-prefix"})))
    answer = stage.expect_answer(host, "/full/original", 302)
    assert answer["response"].headers["Location"] == f"http://{host}:{stage.controller.http_port}/redirected-full"
    location = stage.answer(host, "/prefix/original")["response"].headers["Location"]
    assert location.endswith("/redirected-prefix/original")
    assert stage.answer(host, "/rw-full/original")["path"] == "/rewritten-full"
    answer = stage.answer(host, "/rw-prefix/original")
    assert (answer["backend"], answer["path"]) == ("GW-ONE", "/rewritten-prefix/original")


def cors(**spec) -> dict:
    return {"type": "CORS", "cors": spec}


PREFLIGHT = {"access-control-request-method": "GET", "access-control-request-headers": "x-header-1, x-header-2"}


@pytest.fixture(scope="module")
def cors_routes(public):
    """The conformance case's four routes, on one host."""
    stage, host = public, "cors.example.com"

    def rule(path: str, policy: dict) -> dict:
        return gw.rule(gw.backend_ref("gw-one"), matches=[gw.path_match(path)], filters=[policy])
    stage.cluster.apply(route("cors", host,
                              rule("/cors-1", cors(allowOrigins=["https://www.foo.com", "https://*.bar.com"],
                                                   allowMethods=["GET", "OPTIONS"],
                                                   allowHeaders=["x-header-1", "x-header-2"],
                                                   exposeHeaders=["x-header-3", "x-header-4"],
                                                   allowCredentials=True, maxAge=3600)),
                              rule("/cors-2", cors(allowOrigins=["https://www.foo.com"], allowMethods=["*"])),
                              rule("/cors-wildcard-origin", cors(allowOrigins=["*"], allowMethods=["PUT"],
                                                                 allowCredentials=False)),
                              rule("/cors-wildcard-methods-headers", cors(allowOrigins=["*"], allowMethods=["*"],
                                                                          allowHeaders=["*"], allowCredentials=True))))
    stage.expect_answer(host, "/cors-1", "GW-ONE")
    return stage, host


def cors_headers(response) -> dict[str, str]:
    return {k.lower(): v for k, v in response.headers.items() if k.lower().startswith("access-control-")}


@pytest.mark.parametrize("origin", ["https://www.foo.com", "https://www.bar.com", "https://xpto.www.bar.com",
                                    "https://www.foo.com:443"])
def test_cors_preflight_from_an_allowed_origin_is_answered_by_the_gateway(cors_routes, origin):
    stage, host = cors_routes
    answer = stage.answer(host, "/cors-1", method="OPTIONS", headers={"Origin": origin, **PREFLIGHT})
    assert answer["status"] == 204 and "backend" not in answer  # the backend never saw it
    assert cors_headers(answer["response"]) == {
        "access-control-allow-origin": origin, "access-control-allow-methods": "GET, OPTIONS",
        "access-control-allow-headers": "x-header-1, x-header-2",
        "access-control-expose-headers": "x-header-3, x-header-4", "access-control-max-age": "3600",
        "access-control-allow-credentials": "true"}


@pytest.mark.parametrize("origin", ["https://foobar.com", "http://www.foo.com", "https://www.foo.com:8443",
                                    "https://bar.com", "null"])
def test_a_disallowed_origin_gets_no_cors_headers(cors_routes, origin):
    stage, host = cors_routes
    preflight = stage.answer(host, "/cors-1", method="OPTIONS", headers={"Origin": origin, **PREFLIGHT})
    assert preflight["status"] == 204 and cors_headers(preflight["response"]) == {}
    actual = stage.answer(host, "/cors-1", headers={"Origin": origin})
    assert actual["backend"] == "GW-ONE" and cors_headers(actual["response"]) == {}


def test_an_actual_request_from_an_allowed_origin_gets_the_response_headers(cors_routes):
    stage, host = cors_routes
    for origin in ("https://www.foo.com", "https://www.bar.com"):
        answer = stage.answer(host, "/cors-1", headers={"Origin": origin})
        assert answer["backend"] == "GW-ONE"
        assert cors_headers(answer["response"]) == {
            "access-control-allow-origin": origin, "access-control-allow-credentials": "true",
            "access-control-expose-headers": "x-header-3, x-header-4"}
        assert "Origin" in answer["response"].headers["Vary"]
    # Without an Origin (not a CORS request) nothing is added; an OPTIONS without Access-Control-Request-Method is
    # not a preflight: the backend answers it (the echo backend has no OPTIONS: 501).
    assert cors_headers(stage.answer(host, "/cors-1")["response"]) == {}
    assert stage.answer(host, "/cors-1", method="OPTIONS", headers={"Origin": "https://www.foo.com"})["status"] == 501


def test_cors_wildcards_echo_what_the_preflight_asks(cors_routes):
    stage, host = cors_routes
    answer = stage.answer(host, "/cors-2", method="OPTIONS", headers={
        "Origin": "https://www.foo.com", "access-control-request-method": "POST"})
    assert answer["status"] == 204
    assert cors_headers(answer["response"]) == {"access-control-allow-origin": "https://www.foo.com",
                                                "access-control-allow-methods": "POST",
                                                "access-control-max-age": "5"}  # the spec's default
    for origin in ("https://foobar.com", "https://foobar.com:12345"):
        answer = stage.answer(host, "/cors-wildcard-origin", method="OPTIONS", headers={
            "Origin": origin, "access-control-request-method": "PUT"})
        found = cors_headers(answer["response"])
        assert (found["access-control-allow-origin"], found["access-control-allow-methods"]) == (origin, "PUT")
        assert "access-control-allow-credentials" not in found
        actual = stage.answer(host, "/cors-wildcard-origin", method="PUT", headers={"Origin": origin})
        assert cors_headers(actual["response"]) == {"access-control-allow-origin": origin}
    answer = stage.answer(host, "/cors-wildcard-methods-headers", method="OPTIONS", headers={
        "Origin": "https://other.foo.com", "access-control-request-method": "PUT",
        "access-control-request-headers": "x-header-1, x-header-2"})
    found = cors_headers(answer["response"])
    assert found["access-control-allow-origin"] == "https://other.foo.com"  # never "*" with credentials
    assert (found["access-control-allow-methods"], found["access-control-allow-headers"]) == (
        "PUT", "x-header-1, x-header-2")
    assert found["access-control-allow-credentials"] == "true"


def test_a_cors_or_backend_filter_change_needs_no_reload(public):
    stage, host = public, "cors-change.example.com"

    def apply(origin: str, header: str) -> None:
        stage.cluster.apply(route("cors-change", host, gw.rule(
            with_filters(gw.backend_ref("gw-one"), set_request_header("X-Backend-Filter", header)),
            filters=[cors(allowOrigins=[origin])])))
    apply("https://one.example.com", "first")
    answer = stage.expect_answer(host, "/", "GW-ONE", headers={"Origin": "https://one.example.com"})
    assert answer["headers"]["x-backend-filter"] == "first"
    reloads = stage.controller.settled_reloads()
    apply("https://two.example.com", "second")
    wait_for(lambda: stage.answer(host, "/").get("headers", {}).get("x-backend-filter") == "second", 10,
             what="the changed backend filter")
    answer = stage.answer(host, "/", headers={"Origin": "https://two.example.com"})
    assert answer["response"].headers["Access-Control-Allow-Origin"] == "https://two.example.com"
    assert "Access-Control-Allow-Origin" not in stage.answer(host, "/", headers={
        "Origin": "https://one.example.com"})["response"].headers
    assert stage.controller.metric(RELOADS) == reloads


@pytest.mark.parametrize("name, policy", [
    ("origin-quote", cors(allowOrigins=['https://a.example.com"; add_header X 1'])),
    ("origin-dollar", cors(allowOrigins=["https://$host.example.com"])),
    ("origin-newline", cors(allowOrigins=["https://a.example.com\r\nSet-Cookie: x=1"])),
    ("expose-newline", cors(allowOrigins=["*"], exposeHeaders=["X-A\nSet-Cookie"])),
    ("backend-value", None),
])
def test_a_hostile_value_refuses_that_route_only(public, name, policy):
    stage = public
    host = f"{name}.hostile-cors.example"
    backend = gw.backend_ref("gw-one")
    if policy is None:  # a backendRef's header value with a line break
        backend = with_filters(backend, set_request_header("X-A", "v\r\nX-Injected: 1"))
    stage.cluster.apply(route(f"hostile-{name}", host, gw.rule(backend, filters=[policy] if policy else ())),
                        route(f"fine-{name}", f"fine.{host}", gw.rule(gw.backend_ref("gw-one"))))
    wait_for(lambda: any(f"HTTPRoute default/hostile-{name}:" in p for p in stage.controller.problems()), 10,
             what=f"hostile-{name} refused")
    problem = next(p for p in stage.controller.problems() if f"HTTPRoute default/hostile-{name}:" in p)
    assert "must be" in problem and "the route is not served" in problem
    stage.expect_answer(f"fine.{host}", "/", "GW-ONE")
    assert stage.answer(host, "/")["status"] == 404
    conf = stage.controller.nginx_conf()
    assert b"add_header X 1" not in conf and b"$host.example" not in conf and b"X-Injected" not in conf


MISDIRECT_NAMES = ("example.org", "second-example.org", "third-example.wildcard.org", "fourth-example.wildcard.org",
                   "fith-example.wildcard.org", "unknown-example.org", "ingress.example.org")


@pytest.fixture(scope="module")
def misdirect(public, tmp_path_factory):
    """The conformance case's Gateway: four HTTPS listeners on one port (none, an exact, a wildcard and an exact name
    under that wildcard), a route on each, one certificate for every name; and an Ingress host beside them."""
    stage = public
    ca = TestCA(tmp_path_factory.mktemp("misdirect"))
    stage.cluster.apply(tls_secret("misdirect-tls", ca.issue("example.org", MISDIRECT_NAMES), namespace="misdirect"),
                        *stage.backend("GW-THREE"), *stage.backend("GW-INGRESS"))

    def https(name: str, hostname: str | None = None) -> dict:
        return gw.listener(name, port=443, protocol="HTTPS", hostname=hostname, certificate="misdirect-tls")
    stage.cluster.apply(gw.gateway("misdirect", ns="misdirect", listeners=[
        https("https"), https("https-with-hostname", "second-example.org"),
        https("https-with-wildcard-hostname", "*.wildcard.org"),
        https("https-with-hostname-matching-wildcard", "fourth-example.wildcard.org")]))
    for i, (section, backend, hostnames) in enumerate((
            ("https", "gw-one", ["example.org"]), ("https-with-hostname", "gw-two", []),
            ("https-with-wildcard-hostname", "gw-three", []),
            ("https-with-hostname-matching-wildcard", "gw-one", [])), start=1):
        stage.cluster.apply(*stage.backend(backend.upper(), namespace="misdirect"))
        stage.cluster.apply(gw.http_route(f"misdirect-{i}", ns="misdirect", hostnames=hostnames,
                                          parents=[{"name": "misdirect", "sectionName": section}],
                                          rules=[gw.rule(gw.backend_ref(backend),
                                                         matches=[gw.path_match("/detect-misdirected-requests")])]))
    stage.cluster.apply(k8s.ingress_class(), k8s.ingress("plain", [k8s.rule(
        "ingress.example.org", ("/", "Prefix", "gw-ingress", 80))]))
    port = stage.controller.https_port

    def status(sni: str, host: str) -> int | str:
        # Not verified: the Ingress host has no certificate of its own (the default one is served).
        answer = https_get(port, host, "/detect-misdirected-requests", sni=sni)
        return json.loads(answer.body)["backend"] if answer.status == 200 else answer.status
    wait_for(lambda: status("example.org", "example.org") == "GW-ONE", 15, what="the HTTPS routes")
    wait_for(lambda: status("ingress.example.org", "ingress.example.org") == "GW-INGRESS", 15, what="the Ingress")
    return status


@pytest.mark.parametrize("sni, host, want", [
    ("example.org", "example.org", "GW-ONE"),
    ("example.org", "second-example.org", 421),
    ("example.org", "unknown-example.org", 404),
    ("second-example.org", "second-example.org", "GW-TWO"),
    ("second-example.org", "example.org", 421),
    ("second-example.org", "unknown-example.org", 421),
    ("third-example.wildcard.org", "third-example.wildcard.org", "GW-THREE"),
    ("third-example.wildcard.org", "fith-example.wildcard.org", "GW-THREE"),
    ("third-example.wildcard.org", "fourth-example.wildcard.org", 421),
    ("third-example.wildcard.org", "second-example.org", 421),
    ("third-example.wildcard.org", "unknown-example.org", 421),
    ("fourth-example.wildcard.org", "fourth-example.wildcard.org", "GW-ONE"),
    ("fourth-example.wildcard.org", "fith-example.wildcard.org", 421),
    ("unknown-example.org", "example.org", "GW-ONE"),
    ("unknown-example.org", "unknown-example.org", 404),
    # An Ingress's host keeps ingress-nginx's behaviour (no 421), whichever side names it.
    ("second-example.org", "ingress.example.org", "GW-INGRESS"),
    ("ingress.example.org", "second-example.org", "GW-TWO"),
])
def test_https_listeners_detect_misdirected_requests(misdirect, sni, host, want):
    assert misdirect(sni, host) == want

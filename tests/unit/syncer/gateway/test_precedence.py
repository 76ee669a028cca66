"""The order in which a host's Gateway rules are tried (the spec's precedence), as the pushed table holds it."""
from services.nginxconf import table_schema


def table(gw, host="app.example.com"):
    model = gw.build()
    for host_routes in model.routes.values():
        table_schema.check_record(table_schema.HOST_ROUTES, host_routes.to_json())
    return gw.gateway_of(model, host)


def test_exact_then_regex_then_longest_prefix(gw):
    o = gw.objects
    gw.gateway(o.listener(hostname="app.example.com"))
    gw.route("web", rules=[o.rule(o.backend_ref("web"), matches=[
        o.path_match("/"), o.path_match("/a/b"), o.path_match("/a"), o.path_match("/a/b", "Exact"),
        o.path_match("/a/[0-9]+", "RegularExpression")])])
    [layer] = table(gw)["layers"]
    assert list(layer["exact"]) == ["/a/b"]
    assert [p for p, _ in layer["prefix"]] == ["/a/b", "/a", "/"]
    assert [p for p, _ in layer["regex"]] == ["/a/[0-9]+"]


def test_on_one_path_method_then_headers_then_query_then_the_oldest_route(gw):
    o = gw.objects
    gw.gateway(o.listener(hostname="app.example.com"))
    gw.route("old", created="2020-01-01T00:00:00Z", rules=[o.rule(o.backend_ref("web"), matches=[o.path_match("/")])])
    gw.route("new", created="2021-01-01T00:00:00Z", rules=[
        o.rule(o.backend_ref("web"), matches=[o.path_match("/", query={"a": "1"})]),
        o.rule(o.backend_ref("web"), matches=[o.path_match("/", headers={"x": "1", "y": "2"})]),
        o.rule(o.backend_ref("web"), matches=[o.path_match("/", headers={"x": "1"}, query={"q": "1", "r": "2"})]),
        o.rule(o.backend_ref("web"), matches=[o.path_match("/", method="POST")]),
        o.rule(o.backend_ref("web"), matches=[o.path_match("/")])])
    routes = table(gw)
    [layer] = routes["layers"]
    [(path, matches)] = layer["prefix"]
    described = [(routes["actions"][m["action"] - 1]["route"], m.get("method"),
                  len(m.get("headers", ())), len(m.get("query", ()))) for m in matches]
    assert described == [("default/new", "POST", 0, 0), ("default/new", None, 2, 0), ("default/new", None, 1, 2),
                         ("default/new", None, 0, 1), ("default/old", None, 0, 0), ("default/new", None, 0, 0)]


def test_a_hosts_own_rules_come_before_wildcard_ones_and_those_for_any_host(gw):
    o = gw.objects
    gw.gateway(o.listener())
    gw.route("exact", hostnames=["app.example.com"], rules=[o.rule(o.backend_ref("web"))])
    gw.route("wild", hostnames=["*.example.com"], rules=[o.rule(o.backend_ref("web"))])
    gw.route("any", rules=[o.rule(o.backend_ref("web"))])
    routes = table(gw)
    assert [routes["actions"][layer["prefix"][0][1][0]["action"] - 1]["route"] for layer in routes["layers"]] == [
        "default/exact", "default/wild", "default/any"]


def test_a_route_on_http_and_https_listeners_has_one_match_without_scheme(gw):
    o = gw.objects
    gw.certificate("app-tls")
    gw.gateway(o.listener("http"), o.listener("https", port=443, protocol="HTTPS", certificate="app-tls"))
    gw.route("both", hostnames=["app.example.com"], rules=[o.rule(o.backend_ref("web"))])
    gw.route("secure", hostnames=["app.example.com"], parents=[{"name": "gw", "sectionName": "https"}],
             rules=[o.rule(o.backend_ref("web"), matches=[o.path_match("/admin")])])
    model = gw.build()
    [layer] = gw.gateway_of(model, "app.example.com")["layers"]
    assert [(p, [m.get("scheme") for m in ms]) for p, ms in layer["prefix"]] == [("/admin", ["https"]), ("/", [None])]
    assert model.tls_secrets == {"app.example.com": "default/app-tls"}


def test_weights_name_the_backends_and_an_unknown_service_answers_500_for_its_share(gw):
    o = gw.objects
    gw.app_service("canary", address="10.0.0.2")
    gw.gateway(o.listener(hostname="app.example.com"))
    gw.route("split", rules=[o.rule(o.backend_ref("web", weight=90), o.backend_ref("canary", weight=10),
                                    o.backend_ref("missing", weight=5))])
    model = gw.build()
    [action] = gw.gateway_of(model, "app.example.com")["actions"]
    assert action["backends"] == [{"backend": "default-web-80", "weight": 90, "service": "web"},
                                  {"backend": "default-canary-80", "weight": 10, "service": "canary"},
                                  {"backend": None, "weight": 5, "service": "missing"}]
    assert model.backends["default-canary-80"] == ["10.0.0.2:8080"]
    assert gw.warnings(model) == ["warning: HTTPRoute default/split: spec.rules[0]: Service default/missing not "
                                  "found; its share of requests answers 500 (reason BackendNotFound)"]


def test_an_ingress_and_an_httproute_share_a_host(gw):
    o = gw.objects
    gw.ingress_class()
    gw.ingress("legacy", host="app.example.com", paths=(("/old", "Prefix", "web", 80),))
    gw.gateway(o.listener(hostname="app.example.com"))
    gw.route("new", rules=[o.rule(o.backend_ref("web"), matches=[o.path_match("/new")])])
    model = gw.build()
    routes = model.routes["app.example.com"]
    assert list(routes.prefix) == ["/old"] and routes.gateway is not None


def test_timeouts_are_table_data_and_retried_codes_a_location_profile(gw):
    o = gw.objects
    gw.gateway(o.listener(hostname="app.example.com"))
    gw.route("slow", rules=[o.rule(o.backend_ref("web"), timeouts={"request": "30s", "backendRequest": "20s"}),
                            {**o.rule(o.backend_ref("web"), matches=[o.path_match("/retried")],
                                      timeouts={"request": "1m"}), "retry": {"codes": [503, 500], "attempts": 3}}])
    model = gw.build()
    [timed, retried] = sorted(gw.gateway_of(model, "app.example.com")["actions"], key=lambda a: a["path"])
    assert timed["budget"] == {"request_ms": 30_000, "backend_ms": 20_000} and timed["profile"] == "default"
    assert retried["budget"] == {"attempts": 3, "request_ms": 60_000}
    [profile] = [p for p in model.config.profiles if p.name == retried["profile"]]
    assert profile.directives == (("proxy_next_upstream", "error timeout http_500 http_503"),
                                  ("proxy_next_upstream_timeout", "60000ms"), ("proxy_next_upstream_tries", "0"))

"""GRPCRoute as HTTPRoute rules: method matches → paths, header matches, gRPC backends (a grpc profile), weights,
RequestHeaderModifier, references and the listener's allowed kinds."""
import pytest

HOST = "grpc.example.com"


def grpc(gw, name="greeter", **spec):
    return gw.add(gw.objects.grpc_route(name, created=gw.timestamp(), hostnames=[HOST], **spec))


def layer(gw, model):
    [found] = gw.gateway_of(model, HOST)["layers"]
    return found


@pytest.mark.parametrize("method, where, path", [
    ({"service": "helloworld.Greeter", "method": "SayHello"}, "exact", "/helloworld.Greeter/SayHello"),
    ({"service": "helloworld.Greeter"}, "prefix", "/helloworld.Greeter"),
    ({"method": "SayHello"}, "regex", "/[^/]+/SayHello"),
    ({"type": "RegularExpression", "service": r"helloworld\..*", "method": "Say.*"}, "regex",
     r"/(?:helloworld\..*)/(?:Say.*)"),
    ({"type": "RegularExpression", "method": "Say.*"}, "regex", "/(?:[^/]+)/(?:Say.*)"),
])
def test_a_method_match_becomes_the_path_a_grpc_call_is_posted_to(gw, method, where, path):
    o = gw.objects
    gw.gateway(o.listener())
    grpc(gw, rules=[o.rule(o.backend_ref("web"), matches=[{"method": method}])])
    found = layer(gw, gw.build())
    paths = list(found.get("exact", {})) if where == "exact" else [p for p, _ in found.get(where, ())]
    assert paths == [path]


def test_backends_are_spoken_to_with_grpc_and_keep_their_weights(gw):
    o = gw.objects
    gw.app_service("other", address="10.0.0.2")
    gw.gateway(o.listener())
    grpc(gw, rules=[o.rule(o.backend_ref("web", weight=3), o.backend_ref("other", weight=1),
                           matches=[o.grpc_method("helloworld.Greeter", "SayHello")])])
    model = gw.build()
    [action] = gw.gateway_of(model, HOST)["actions"]
    assert [(b["backend"], b["weight"]) for b in action["backends"]] == [("default-web-80", 3), ("default-other-80", 1)]
    profile = next(p for p in model.config.profiles if p.name == action["profile"])
    assert profile.backend_scheme == "grpc"


def test_header_matches_and_request_header_modifier(gw):
    o = gw.objects
    gw.gateway(o.listener())
    modifier = {"type": "RequestHeaderModifier", "requestHeaderModifier": {"set": [{"name": "x-tenant", "value": "a"}]}}
    grpc(gw, rules=[o.rule(o.backend_ref("web"), matches=[o.grpc_method("pkg.Svc", "Get", headers={"X-Version": "2"})],
                           filters=[modifier])])
    model = gw.build()
    [match] = layer(gw, model)["exact"]["/pkg.Svc/Get"]
    assert match["headers"] == [{"name": "x-version", "value": "2"}]
    [action] = gw.gateway_of(model, HOST)["actions"]
    assert list(action["request_headers"]["set"]) == [("x-tenant", "a")]


def test_an_unsupported_filter_answers_500_and_a_bad_method_refuses_the_route(gw):
    o = gw.objects
    gw.gateway(o.listener())
    grpc(gw, "mirror", rules=[o.rule(o.backend_ref("web"), matches=[o.grpc_method("a.B", "C")],
                                     filters=[{"type": "RequestMirror"}])])
    grpc(gw, "bad", rules=[o.rule(o.backend_ref("web"), matches=[o.grpc_method("a.B", "C/D")])])
    model = gw.build()
    [action] = gw.gateway_of(model, HOST)["actions"]
    assert action["route"] == "default/mirror" and not action.get("backends")
    assert any("GRPCRoute default/bad" in r and "method 'C/D'" in r for r in gw.rejections(model))
    assert any("filter RequestMirror is not supported" in w for w in gw.warnings(model))


def test_an_httproute_and_a_grpcroute_of_one_name_keep_their_own_rules(gw):
    o = gw.objects
    gw.app_service("other", address="10.0.0.2")
    gw.gateway(o.listener())
    grpc(gw, "same", rules=[o.rule(o.backend_ref("other"), matches=[o.grpc_method("a.B", "C")])])
    gw.route("same", hostnames=[HOST], rules=[o.rule(o.backend_ref("web"))])
    actions = gw.gateway_of(gw.build(), HOST)["actions"]
    assert sorted(a["backends"][0]["backend"] for a in actions) == ["default-other-80", "default-web-80"]


def test_a_backend_in_another_namespace_needs_a_grant_from_grpcroutes(gw):
    o = gw.objects
    gw.app_service("api", ns="backend")
    gw.gateway(o.listener())
    grpc(gw, rules=[o.rule(o.backend_ref("api", ns="backend"))])
    gw.add(o.reference_grant("http-only", ns="backend", from_namespace="default"))  # from HTTPRoutes
    model = gw.build()
    assert gw.gateway_of(model, HOST)["actions"][0]["backends"] == [{"backend": None, "weight": 1}]
    assert any("GRPCRoute default/greeter" in w and "RefNotPermitted" in w for w in gw.warnings(model))
    gw.add(o.reference_grant("grpc", ns="backend", from_namespace="default", from_kind="GRPCRoute"))
    assert gw.gateway_of(gw.build(), HOST)["actions"][0]["backends"][0]["backend"] == "backend-api-80"


def test_a_listener_that_allows_httproutes_only_does_not_take_grpcroutes(gw):
    o = gw.objects
    listener = {**o.listener(), "allowedRoutes": {"kinds": [{"kind": "HTTPRoute"}]}}
    gw.gateway(listener)
    grpc(gw, rules=[o.rule(o.backend_ref("web"))])
    model = gw.build()
    assert HOST not in model.routes
    assert any("GRPCRoute default/greeter" in r and "NoMatchingParent" in r for r in gw.rejections(model))

"""Every value that reaches nginx or Lua is checked; a bad route is refused alone, saying what to change."""
import pytest


def bad_route(gw, **rule_parts):
    o = gw.objects
    gw.gateway(o.listener(hostname="app.example.com"))
    gw.route("good", rules=[o.rule(o.backend_ref("web"), matches=[o.path_match("/good")])])
    gw.route("bad", rules=[{"backendRefs": [o.backend_ref("web")], **rule_parts}])
    model = gw.build()
    [action] = gw.gateway_of(model, "app.example.com")["actions"]
    assert action["route"] == "default/good"
    [problem] = gw.rejections(model)
    assert problem.startswith("HTTPRoute default/bad: spec.rules[0]") and problem.endswith("; the route is not served")
    return problem


@pytest.mark.parametrize("rule_parts, says", [
    ({"matches": [{"path": {"type": "Exact", "value": "/a b"}}]}, "must start with / and hold only"),
    ({"matches": [{"path": {"type": "RegularExpression", "value": "/(unclosed"}}]}, "not a valid regular expression"),
    ({"matches": [{"headers": [{"name": "bad name", "value": "x"}]}]}, "must be an HTTP token"),
    ({"matches": [{"headers": [{"name": "x", "value": "a\r\nInjected: 1"}]}]}, "without line breaks"),
    ({"matches": [{"method": "BREW"}]}, "method 'BREW' must be one of"),
    ({"filters": [{"type": "RequestHeaderModifier",
                   "requestHeaderModifier": {"set": [{"name": "X", "value": "a\nb"}]}}]}, "without line breaks"),
    ({"filters": [{"type": "RequestRedirect", "requestRedirect": {"hostname": "evil host"}}]}, "must be a DNS name"),
    ({"filters": [{"type": "RequestRedirect", "requestRedirect": {"statusCode": 200}}]}, "statusCode 200"),
    ({"filters": [{"type": "URLRewrite", "urlRewrite": {"path": {"type": "ReplacePrefixMatch",
                                                                  "replacePrefixMatch": "/x"}}}],
      "matches": [{"path": {"type": "Exact", "value": "/a"}}]}, "ReplacePrefixMatch needs every match"),
    ({"timeouts": {"request": "ten seconds"}}, "duration 'ten seconds'"),
    ({"filters": [{"type": "RequestHeaderModifier",
                   "requestHeaderModifier": {"set": [{"name": "Content-Length", "value": "0"}]}}]},
     "header Content-Length frames the message"),
    ({"filters": [{"type": "ResponseHeaderModifier",
                   "responseHeaderModifier": {"remove": ["Transfer-Encoding"]}}]}, "frames the message"),
    ({"filters": [{"type": "CORS", "cors": {"allowOrigins": ['https://a.example.com"; $x']}}]}, "must be '*' or"),
    ({"filters": [{"type": "CORS", "cors": {"allowOrigins": ["https://a.example.com\nX: 1"]}}]}, "must be '*' or"),
    ({"filters": [{"type": "CORS", "cors": {"allowOrigins": ["*", "https://a.example.com"]}}]}, "'*' cannot be"),
    ({"filters": [{"type": "CORS", "cors": {"allowHeaders": ["X-A$b c"]}}]}, "must be an HTTP token"),
    ({"filters": [{"type": "CORS", "cors": {"allowMethods": ["GET;"]}}]}, "method 'GET;' must be one of"),
    ({"filters": [{"type": "CORS", "cors": {"maxAge": 0}}]}, "maxAge: 0 must be"),
    ({"backendRefs": [{"name": "web", "port": 80, "filters": [{"type": "RequestHeaderModifier",
                       "requestHeaderModifier": {"set": [{"name": "X", "value": "a\r\nb"}]}}]}]},
     "without line breaks"),
    ({"backendRefs": [{"name": "web", "port": 80, "filters": [
        {"type": "RequestRedirect", "requestRedirect": {"hostname": "a.example.com"}},
        {"type": "URLRewrite", "urlRewrite": {"hostname": "b.example.com"}}]}]}, "cannot be in one list"),
])
def test_a_bad_value_refuses_its_route_only(gw, rule_parts, says):
    assert says in bad_route(gw, **rule_parts)


def test_an_unsupported_filter_makes_its_rule_answer_500(gw):
    o = gw.objects
    gw.gateway(o.listener(hostname="app.example.com"))
    gw.route("ext", rules=[o.rule(o.backend_ref("web"), filters=[
        {"type": "ExtensionRef", "extensionRef": {"group": "example.com", "kind": "Thing", "name": "x"}}])])
    model = gw.build()
    [action] = gw.gateway_of(model, "app.example.com")["actions"]
    assert "backends" not in action and "redirect" not in action
    assert gw.warnings(model) == ["warning: HTTPRoute default/ext: spec.rules[0].filters[0]: filter ExtensionRef "
                                  "is not supported; the rule answers 500"]


def test_an_unsupported_filter_on_a_backend_ref_makes_its_share_answer_500(gw):
    o = gw.objects
    gw.gateway(o.listener(hostname="app.example.com"))
    gw.route("mirrored", rules=[o.rule({**o.backend_ref("web"), "filters": [
        {"type": "RequestMirror", "requestMirror": {"backendRef": o.backend_ref("web")}}]}, o.backend_ref("web"))])
    model = gw.build()
    [action] = gw.gateway_of(model, "app.example.com")["actions"]
    assert [b.get("backend") for b in action["backends"]] == [None, "default-web-80"]
    assert gw.warnings(model) == ["warning: HTTPRoute default/mirrored: spec.rules[0].backendRefs[0].filters[0]: "
                                  "filter RequestMirror is not supported; its share of requests answers 500"]


def test_a_bad_hostname_refuses_the_route(gw):
    o = gw.objects
    gw.gateway(o.listener())
    gw.route("bad", hostnames=["Not A Host"], rules=[o.rule(o.backend_ref("web"))])
    assert gw.rejections(gw.build()) == [
        "HTTPRoute default/bad: spec.hostnames: hostname 'Not A Host' must be a DNS name such as app.example.com or "
        "*.example.com; the route is not served"]

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
])
def test_a_bad_value_refuses_its_route_only(gw, rule_parts, says):
    assert says in bad_route(gw, **rule_parts)


def test_an_unsupported_filter_makes_its_rule_answer_500(gw):
    o = gw.objects
    gw.gateway(o.listener(hostname="app.example.com"))
    gw.route("cors", rules=[o.rule(o.backend_ref("web"), filters=[
        {"type": "CORS", "cors": {"allowOrigins": ["https://example.com"]}}])])
    model = gw.build()
    [action] = gw.gateway_of(model, "app.example.com")["actions"]
    assert "backends" not in action and "redirect" not in action
    assert gw.warnings(model) == ["warning: HTTPRoute default/cors: spec.rules[0].filters[0]: filter CORS "
                                  "is not supported; the rule answers 500"]


def test_a_bad_hostname_refuses_the_route(gw):
    o = gw.objects
    gw.gateway(o.listener())
    gw.route("bad", hostnames=["Not A Host"], rules=[o.rule(o.backend_ref("web"))])
    assert gw.rejections(gw.build()) == [
        "HTTPRoute default/bad: spec.hostnames: hostname 'Not A Host' must be a DNS name such as app.example.com or "
        "*.example.com; the route is not served"]

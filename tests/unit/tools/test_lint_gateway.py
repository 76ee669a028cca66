"""`pyngress lint` over Gateway API objects: the webhook's decisions on Gateways and routes offline, in the same line
format as for Ingresses, oldest first, each route against the Gateways admitted before it."""
from services.common.settings import Settings
from services.tools.inputs import Located
from services.tools.lint import lint
from tests.support import gateway_objects as o
from tests.support import k8s


def located(*objects) -> list[Located]:
    return [Located(f"routes.yaml:{i * 10 + 1}", obj) for i, obj in enumerate(objects)]


def web() -> list[dict]:
    return [k8s.service("web", port_name="http")]


def test_routes_and_gateways_get_the_webhooks_lines():
    objects = located(
        o.gateway_class(), o.gateway("gw", listeners=[o.listener(hostname="*.example.com")]),
        o.gateway("edge", listeners=[o.listener("udp", protocol="UDP")]),
        *web(),
        o.http_route("good", hostnames=["a.example.com"], rules=[o.rule(o.backend_ref("web"))]),
        o.http_route("bad", hostnames=["b.example.com"], rules=[o.rule(o.backend_ref("web", weight=-1))]),
        o.http_route("lost", hostnames=["b.example.com"], rules=[o.rule(o.backend_ref("missing"))]),
        o.http_route("foreign", parents=[{"name": "theirs"}], rules=[o.rule(o.backend_ref("web", weight=-1))]))
    lines = lint(objects, Settings.from_flags(), assume_class=True)
    assert lines == [
        "routes.yaml:21: ERROR: Gateway default/edge: listener udp: protocol 'UDP' is not supported (reason "
        "UnsupportedProtocol); use HTTP, HTTPS or TLS; the listener is not served",
        "routes.yaml:51: ERROR: HTTPRoute default/bad: spec.rules[0].backendRefs[0]: weight -1 must be 0-1000000; "
        "the route is not served",
        "routes.yaml:61: WARNING: HTTPRoute default/lost: spec.rules[0]: Service default/missing not found; its "
        "share of requests answers 500 (reason BackendNotFound)",
    ], lines


def test_a_route_of_a_gateway_another_controller_serves_is_not_judged():
    objects = located(o.gateway_class("other", controller="example.com/other"),
                      o.gateway("gw", class_name="other"),
                      o.http_route("bad", rules=[o.rule(o.backend_ref("web", weight=-1))]))
    assert lint(objects, Settings.from_flags(), assume_class=True) == []


def test_a_denied_gateway_is_not_applied_so_its_routes_are_not_judged_against_it():
    """As `kubectl apply` of the whole input: a Gateway the webhook denies is not stored."""
    objects = located(o.gateway_class(), o.gateway("gw", listeners=[o.listener("udp", protocol="UDP")]),
                      o.http_route("bad", rules=[o.rule(o.backend_ref("web", weight=-1))]))
    lines = lint(objects, Settings.from_flags(), assume_class=True)
    assert [line.split(": ")[2] for line in lines] == ["Gateway default/gw"]


def test_the_gateway_controller_name_says_which_classes_are_ours():
    objects = located(o.gateway_class("mine", controller="example.com/mine"),
                      o.gateway("gw", class_name="mine", listeners=[o.listener("udp", protocol="UDP")]))
    assert lint(objects, Settings.from_flags(), assume_class=True) == []
    lines = lint(objects, Settings.from_flags(gateway_controller_name="example.com/mine"), assume_class=True)
    assert len(lines) == 1 and "UnsupportedProtocol" in lines[0]

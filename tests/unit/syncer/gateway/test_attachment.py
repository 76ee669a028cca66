"""Which listeners and host names an HTTPRoute gets: hostname intersection, allowedRoutes, sectionName, ports."""
import pytest

from services.syncer.model.gateway.attachment import intersection


@pytest.mark.parametrize("listener, route, served", [
    (None, "app.example.com", "app.example.com"),
    ("app.example.com", "app.example.com", "app.example.com"),
    ("*.example.com", "app.example.com", "app.example.com"),
    ("*.example.com", "a.b.example.com", "a.b.example.com"),
    ("*.example.com", "example.com", None),
    ("app.example.com", "*.example.com", "app.example.com"),
    ("*.example.com", "*.example.com", "*.example.com"),
    ("*.example.com", "*.b.example.com", "*.b.example.com"),
    ("*.b.example.com", "*.example.com", "*.b.example.com"),
    ("app.example.com", "other.example.com", None),
    ("*.example.com", "*.example.org", None),
])
def test_hostname_intersection_serves_the_more_specific_name(listener, route, served):
    assert intersection(listener, route) == served


def test_a_route_takes_the_intersection_of_its_hostnames_and_the_listener(gw):
    o = gw.objects
    gw.gateway(o.listener("http", hostname="*.example.com"))
    gw.route("web", hostnames=["app.example.com", "other.org", "*.example.com"], rules=[o.rule(o.backend_ref("web"))])
    model = gw.build()
    assert sorted(h for h, r in model.routes.items() if r.gateway) == ["*.example.com", "app.example.com"]


def test_a_route_without_hostnames_takes_the_listeners_and_with_neither_any_host(gw):
    o = gw.objects
    gw.gateway(o.listener("named", hostname="app.example.com"), o.listener("any", port=80))
    gw.route("web", parents=[{"name": "gw", "sectionName": "named"}], rules=[o.rule(o.backend_ref("web"))])
    gw.route("all", parents=[{"name": "gw", "sectionName": "any"}], rules=[o.rule(o.backend_ref("web"))])
    model = gw.build()
    assert sorted(h for h, r in model.routes.items() if r.gateway) == ["_", "app.example.com"]


def test_no_common_hostname_is_reported_and_nothing_served(gw):
    o = gw.objects
    gw.gateway(o.listener("http", hostname="app.example.com"))
    gw.route("web", hostnames=["other.example.com"], rules=[o.rule(o.backend_ref("web"))])
    model = gw.build()
    assert not any(r.gateway for r in model.routes.values())
    assert gw.rejections(model) == [
        "HTTPRoute default/web: not attached to Gateway default/gw: no hostname of the route is within Gateway "
        "default/gw listener http's hostname app.example.com (reason NoMatchingListenerHostname)"]


def test_a_listener_allowing_only_its_namespace_refuses_another_tenants_route(gw):
    o = gw.objects
    gw.gateway(o.listener("http", hostname="shop.example.com"), ns="shop")
    gw.app_service("evil", ns="tenant")
    gw.route("steal", ns="tenant", parents=[{"name": "gw", "namespace": "shop"}],
             rules=[o.rule(o.backend_ref("evil"))])
    model = gw.build()
    assert "shop.example.com" not in model.routes
    assert gw.rejections(model) == [
        "HTTPRoute tenant/steal: not attached to Gateway shop/gw: Gateway shop/gw listener http does not allow "
        "routes from namespace tenant (reason NotAllowedByListeners)"]


def test_all_and_selector_namespaces(gw):
    o = gw.objects
    gw.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team", "labels": {"shared": "yes"}}})
    gw.gateway(o.listener("all", hostname="all.example.com", namespaces={"from": "All"}),
               o.listener("picked", hostname="picked.example.com",
                          namespaces={"from": "Selector", "selector": {"matchLabels": {"shared": "yes"}}}), ns="infra")
    for ns in ("team", "other"):
        gw.app_service("web", ns=ns)
        gw.route("web", ns=ns, parents=[{"name": "gw", "namespace": "infra"}],
                 hostnames=["all.example.com", "picked.example.com"], rules=[o.rule(o.backend_ref("web"))])
    model = gw.build()
    [all_rules] = gw.gateway_of(model, "all.example.com")["layers"]
    assert len(all_rules["prefix"][0][1]) == 2  # both namespaces' routes
    picked = gw.gateway_of(model, "picked.example.com")
    assert [a["route"] for a in picked["actions"]] == ["team/web"]


def test_section_name_and_port_pick_the_listener(gw):
    o = gw.objects
    gw.gateway(o.listener("a", hostname="a.example.com"), o.listener("b", hostname="b.example.com"))
    gw.route("only-b", parents=[{"name": "gw", "sectionName": "b"}], rules=[o.rule(o.backend_ref("web"))])
    gw.route("by-port", parents=[{"name": "gw", "port": 80}], hostnames=["a.example.com"],
             rules=[o.rule(o.backend_ref("web"))])
    model = gw.build()
    assert [a["route"] for a in gw.gateway_of(model, "b.example.com")["actions"]] == ["default/only-b"]
    assert [a["route"] for a in gw.gateway_of(model, "a.example.com")["actions"]] == ["default/by-port"]


def test_gateways_of_other_classes_and_listeners_on_ports_the_controller_uses_are_not_served(gw):
    o = gw.objects
    gw.add(o.gateway_class("other", controller="example.com/other"))
    gw.add(o.gateway("theirs", listeners=[o.listener(hostname="theirs.example.com")], class_name="other"))
    gw.gateway(o.listener("odd", port=10254, hostname="odd.example.com"))
    gw.route("web", parents=[{"name": "theirs"}, {"name": "gw"}], rules=[o.rule(o.backend_ref("web"))])
    model = gw.build()
    assert not any(r.gateway for r in model.routes.values())
    assert gw.rejections(model) == [
        "Gateway default/gw: listener odd: port 10254 is not available (reason PortUnavailable): it is the healthz "
        "port; use another port; the listener is not served",
        "HTTPRoute default/web: not attached to Gateway default/gw: it has no served listener named any on port any "
        "(reason NoMatchingParent)"]


def test_the_most_specific_listener_takes_a_host(gw):
    o = gw.objects
    gw.gateway(o.listener("exact", hostname="foo.bar.com"), o.listener("wild", hostname="*.bar.com"))
    gw.route("exact", parents=[{"name": "gw", "sectionName": "exact"}], rules=[o.rule(o.backend_ref("web"))])
    gw.route("wild", parents=[{"name": "gw", "sectionName": "wild"}], hostnames=["foo.bar.com", "*.bar.com"],
             rules=[o.rule(o.backend_ref("web"))])
    model = gw.build()
    assert [a["route"] for a in gw.gateway_of(model, "foo.bar.com")["actions"]] == ["default/exact"]
    assert [a["route"] for a in gw.gateway_of(model, "*.bar.com")["actions"]] == ["default/wild"]


def test_a_parent_ref_to_a_listener_our_gateway_lacks_is_reported(gw):
    o = gw.objects
    gw.gateway(o.listener("http", hostname="app.example.com"))
    gw.route("web", parents=[{"name": "gw", "sectionName": "nope"}], rules=[o.rule(o.backend_ref("web"))])
    assert gw.rejections(gw.build()) == [
        "HTTPRoute default/web: not attached to Gateway default/gw: it has no served listener named nope on port any "
        "(reason NoMatchingParent)"]

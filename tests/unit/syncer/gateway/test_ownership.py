"""A host an Ingress names exactly belongs to its oldest Ingress's namespace: other namespaces' routes do not serve
it, whether they name it, take it from their listener or cover it with a wildcard."""


def test_only_the_owning_namespaces_routes_serve_an_ingress_host(gw):
    o = gw.objects
    gw.ingress_class()
    gw.gateway(o.listener(namespaces={"from": "All"}))
    gw.app_service("web", ns="shop")
    gw.ingress("site", ns="shop", host="owned.example.com", paths=(("/", "Prefix", "web", 80),))
    gw.route("hijack", ns="tenant", hostnames=["owned.example.com"], parents=[{"name": "gw", "namespace": "default"}],
             rules=[o.rule(o.backend_ref("web", ns="shop"))])
    model = gw.build()
    assert model.routes["owned.example.com"].gateway is None
    assert any("HTTPRoute tenant/hijack: host owned.example.com belongs to namespace shop" in w
               for w in gw.warnings(model))


def test_a_wildcard_of_another_namespace_stays_out_of_an_owned_host(gw):
    o = gw.objects
    parent = [{"name": "gw", "namespace": "default"}]
    gw.ingress_class()
    gw.gateway(o.listener(namespaces={"from": "All"}))
    gw.app_service("web", ns="shop")
    gw.app_service("web", ns="tenant")
    gw.ingress("site", ns="shop", host="owned.example.com", paths=(("/", "Prefix", "web", 80),))
    gw.route("moved", ns="shop", hostnames=["owned.example.com"], parents=parent,
             rules=[o.rule(o.backend_ref("web"), matches=[o.path_match("/moved")])])
    gw.route("wild", ns="tenant", hostnames=["*.example.com"], parents=parent, rules=[o.rule(o.backend_ref("web"))])
    model = gw.build()
    table = gw.gateway_of(model, "owned.example.com")
    assert [a["route"] for a in table["actions"]] == ["shop/moved"]
    assert [a["route"] for a in gw.gateway_of(model, "*.example.com")["actions"]] == ["tenant/wild"]

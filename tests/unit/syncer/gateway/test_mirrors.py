"""RequestMirror in the model: the mirrors are table data; only their number is in a location profile."""
import pytest


def mirror(service: str = "web", **share) -> dict:
    return {"type": "RequestMirror", "requestMirror": {"backendRef": {"name": service, "port": 80}, **share}}


def test_mirrors_are_table_data_and_their_number_names_the_profile(gw):
    o = gw.objects
    gw.app_service("copy", address="10.0.0.2")
    gw.gateway(o.listener(hostname="app.example.com"))
    gw.route("two", rules=[o.rule(o.backend_ref("web"), matches=[o.path_match("/two")],
                                  filters=[mirror("copy", percent=25), mirror("web")]),
                           o.rule(o.backend_ref("web"), matches=[o.path_match("/one")],
                                  filters=[mirror("copy", fraction={"numerator": 1, "denominator": 3})])])
    model = gw.build()
    actions = {a["path"]: a for a in gw.gateway_of(model, "app.example.com")["actions"]}
    two, one = actions["/two"], actions["/one"]
    assert two["mirrors"] == [{"backend": "default-copy-80", "numerator": 25}, {"backend": "default-web-80"}]
    assert one["mirrors"] == [{"backend": "default-copy-80", "numerator": 1, "denominator": 3}]
    directives = {p.name: p.directives for p in model.config.profiles}
    assert directives[two["profile"]] == (("mirror", "/_pyngress_gateway_mirror/1"),
                                          ("mirror", "/_pyngress_gateway_mirror/2"))
    assert directives[one["profile"]] == (("mirror", "/_pyngress_gateway_mirror/1"),)
    assert model.backends["default-copy-80"] and not gw.warnings(model)


@pytest.mark.parametrize("share, message", [
    ({"percent": 101}, "percent 101 must be an integer 0-100"),
    ({"percent": 5, "fraction": {"numerator": 1}}, "give percent or fraction, not both"),
    ({"fraction": {"numerator": 3, "denominator": 2}}, "must not exceed the denominator"),
    ({"fraction": {"numerator": 0, "denominator": 0}}, "must not exceed the denominator (0), which must be at least"),
])
def test_a_bad_share_refuses_the_route(gw, share, message):
    o = gw.objects
    gw.gateway(o.listener(hostname="app.example.com"))
    gw.route("bad", rules=[o.rule(o.backend_ref("web"), filters=[mirror(**share)])])
    [rejection] = gw.rejections(gw.build())
    assert rejection.startswith("HTTPRoute default/bad: spec.rules[0].filters[0].requestMirror") and message in rejection


def test_a_mirror_that_cannot_be_resolved_is_left_out_and_the_rule_served(gw):
    o = gw.objects
    gw.gateway(o.listener(hostname="app.example.com"))
    gw.route("lost", rules=[o.rule(o.backend_ref("web"), filters=[mirror("missing"), mirror("web", percent=50)])])
    model = gw.build()
    [action] = gw.gateway_of(model, "app.example.com")["actions"]
    assert action["mirrors"] == [{"backend": "default-web-80", "numerator": 50}]
    assert [b["backend"] for b in action["backends"]] == ["default-web-80"]
    assert len(gw.warnings(model)) == 1 and "requests are not mirrored there" in gw.warnings(model)[0]

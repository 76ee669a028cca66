"""Canary Ingresses in the model: attached to the main route of the same host and path in the same namespace,
refused without one, their values validated."""
import pytest


def main_and_canary(cluster, *, canary_ns="default", host="app.example.com", **annotations):
    cluster.app("main", host=host, created=cluster.timestamp(0))
    cluster.service("canary", ns=canary_ns)
    cluster.endpoint_slice("canary", ns=canary_ns, addresses=("10.0.0.9",))
    cluster.ingress("canary", ns=canary_ns, host=host, paths=(("/", "Prefix", "canary", 80),),
                    annotations={"canary": "true", **annotations})
    return cluster.build()


def test_the_canary_backend_rides_on_the_main_route(cluster):
    model = main_and_canary(cluster, **{"canary-weight": "20", "canary-by-header": "X-Canary"})
    route = model.routes_json()["app.example.com"]["prefix"][0][1]
    assert route["backend"] == "default-main-80" and route["ingress"] == "default/main"
    assert route["canary"] == {"backend": "default-canary-80", "ingress": "default/canary", "header": "X-Canary",
                               "header_value": None, "header_pattern": None, "cookie": None, "weight": 20,
                               "weight_total": 100, "sticky": True}
    assert model.backends["default-canary-80"] == ["10.0.0.9:8080"]
    assert not cluster.rejections(model)


def test_a_canary_without_a_main_ingress_is_refused(cluster):
    cluster.service("canary")
    cluster.ingress("canary", paths=(("/", "Prefix", "canary", 80),), annotations={"canary": "true"})
    [problem] = cluster.rejections(cluster.build())
    assert problem.startswith("Ingress default/canary: a canary needs a main Ingress")


def test_another_namespace_cannot_put_a_canary_on_a_tenants_route(cluster):
    model = main_and_canary(cluster, canary_ns="attacker", **{"canary-weight": "100"})
    assert "canary" not in model.routes_json()["app.example.com"]["prefix"][0][1]
    assert any(p.startswith("Ingress attacker/canary: a canary needs") for p in cluster.rejections(model))


def test_a_weight_above_the_total_sends_everything(cluster):
    model = main_and_canary(cluster, **{"canary-weight": "150"})
    assert model.routes_json()["app.example.com"]["prefix"][0][1]["canary"]["weight"] == 100


@pytest.mark.parametrize("name, value", [("canary-by-header", "X Canary"), ("canary-by-cookie", "a.b"),
                                         ("canary-by-header-pattern", "("), ("canary-weight", "-1"),
                                         ("canary-weight-total", "0"), ("canary-by-header-value", "a\tb")])
def test_bad_values_are_ignored_and_the_canary_takes_no_request(cluster, name, value):
    model = main_and_canary(cluster, **{name: value})
    cluster.set_aside(model, name, value, ingress="default/canary")
    canary = model.routes_json()["app.example.com"]["prefix"][0][1].get("canary")
    assert canary is None or (canary["weight"], canary["header"], canary["cookie"], canary["header_pattern"]) == (
        0, None, None, None)


def test_canary_annotations_without_canary_true_are_ignored_with_a_warning(cluster):
    cluster.app(annotations={"canary-weight": "50"})
    model = cluster.build()
    assert any("apply only with canary" in line for line in model.problem_lines())


@pytest.mark.parametrize("annotations, sticky", [
    ({}, True),  # no affinity of its own: it follows the main Ingress's (router.lua), as ingress-nginx
    ({"affinity": "cookie"}, True),
    ({"affinity-canary-behavior": "legacy"}, False),
    ({"affinity": "cookie", "affinity-canary-behavior": "legacy"}, False),
])
def test_affinity_canary_behavior_is_the_canary_ingress(cluster, annotations, sticky):
    model = main_and_canary(cluster, **{"canary-weight": "20", **annotations})
    canary = model.routes_json()["app.example.com"]["prefix"][0][1]["canary"]
    assert canary.get("sticky", False) is sticky
    assert not any("apply only with affinity" in line for line in model.problem_lines())

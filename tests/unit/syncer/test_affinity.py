"""affinity: cookie and upstream-hash-by in the model: the routes carry the policy; values validated."""
import pytest


def test_the_routes_carry_the_cookie_policy_with_defaults(cluster):
    cluster.app(annotations={"affinity": "cookie", "session-cookie-max-age": "60", "session-cookie-samesite": "Strict"})
    route = cluster.build().routes_json()["app.example.com"]["prefix"][0][1]
    assert route["affinity"] == {"cookie": "INGRESSCOOKIE", "mode": "balanced", "path": "/", "max_age": 60, "expires": None,
                                 "secure": False, "samesite": "Strict"}


@pytest.mark.parametrize("name, value", [("affinity", "ip"), ("session-cookie-name", "a;b"),
                                         ("session-cookie-path", "app"), ("session-cookie-samesite", "Maybe"),
                                         ("session-cookie-max-age", "-5")])
def test_bad_values_are_ignored_with_a_warning(cluster, name, value):
    cluster.app(annotations={"affinity": "cookie", name: value})
    cluster.set_aside(cluster.build(), name, value)


def test_cookie_settings_without_affinity_are_ignored_with_a_warning(cluster):
    cluster.app(annotations={"session-cookie-name": "route"})
    model = cluster.build()
    assert "affinity" not in model.routes_json()["app.example.com"]["prefix"][0][1]
    assert any("apply only with affinity: cookie" in line for line in model.problem_lines())


@pytest.mark.parametrize("value, ok", [("$request_uri", True), ("$http_x_user", True), ("$host:$uri", True),
                                      ("$cookie_session", True), ("$remote_user", False), ("plain", False),
                                      ("$request_uri;", False), ("${request_uri}", False)])
def test_upstream_hash_by_takes_request_variables_only(cluster, value, ok):
    cluster.app(annotations={"upstream-hash-by": value})
    model = cluster.build()
    hash_by = model.routes_json()["app.example.com"]["prefix"][0][1].get("hash_by")
    if ok:
        assert model.problem_lines() == [] and hash_by == value
    else:
        cluster.set_aside(model, "upstream-hash-by", value)
        assert hash_by is None


def test_ewma_marks_the_routes_for_the_lua_balancer(cluster):
    cluster.app(annotations={"load-balance": "ewma"})
    model = cluster.build()
    assert model.problem_lines() == [] and model.routes_json()["app.example.com"]["prefix"][0][1]["ewma"] is True

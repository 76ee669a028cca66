"""affinity: cookie and upstream-hash-by in the model: the routes carry the policy; values validated."""
import pytest


def test_the_routes_carry_the_cookie_policy_with_defaults(cluster):
    cluster.app(annotations={"affinity": "cookie", "session-cookie-max-age": "60", "session-cookie-samesite": "Strict"})
    route = cluster.build().routes_json()["app.example.com"]["prefix"][0][1]
    assert route["affinity"] == {"cookie": "INGRESSCOOKIE", "mode": "balanced", "path": "/", "max_age": 60, "expires": None,
                                 "secure": False, "samesite": "Strict"}


def test_the_cookie_path_is_each_rules_ingress_path_unless_session_cookie_path(cluster):
    cluster.service("web")
    cluster.endpoint_slice("web", addresses=("10.0.0.1",))
    paths = (("/app", "Prefix", "web", 80), ("/api/v1", "Exact", "web", 80))
    cluster.ingress("web", paths=paths, annotations={"affinity": "cookie"})
    cluster.ingress("other", host="other.example.com", paths=paths,
                    annotations={"affinity": "cookie", "session-cookie-path": "/shared"})
    routes = cluster.build().routes_json()
    paths_of = {host: {path: route["affinity"]["path"]
                       for path, route in [*routes[host]["exact"].items(), *routes[host]["prefix"]]}
                for host in ("app.example.com", "other.example.com")}
    assert paths_of == {"app.example.com": {"/app": "/app", "/api/v1": "/api/v1"},
                        "other.example.com": {"/app": "/shared", "/api/v1": "/shared"}}


def test_a_regex_path_that_is_no_cookie_path_gets_the_root(cluster):
    cluster.app(annotations={"affinity": "cookie", "use-regex": "true"})
    cluster.ingress("re", host="re.example.com", paths=(("/api/(v1|v2)$", "ImplementationSpecific", "web", 80),),
                    annotations={"affinity": "cookie", "use-regex": "true"})
    route = cluster.build().routes_json()["re.example.com"]["prefix"][0][1]
    assert route["affinity"]["path"] == "/"


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

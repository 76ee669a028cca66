import random

import pytest

from services.nginxconf.tables import canonical_json
from services.syncer.model.types import CATCH_ALL_HOST, Route


def test_hosts_are_lowercased_wildcards_kept_and_hostless_rules_catch_all(cluster):
    cluster.service("web")
    cluster.ingress("a", rules=[cluster.rule("App.Example.COM", ("/", "Prefix", "web", 80)),
                                cluster.rule("*.example.com", ("/", "Prefix", "web", 80)),
                                cluster.rule(None, ("/", "Prefix", "web", 80))])
    model = cluster.build()
    assert sorted(model.routes) == ["*.example.com", CATCH_ALL_HOST, "app.example.com"]
    assert model.routes["app.example.com"].prefix["/"] == Route("default-web-80", profile="default",
                                                                ingress="default/a", service="web", service_port="80")


def test_path_types_go_to_their_tables_and_prefixes_are_normalised(cluster):
    cluster.service("web")
    cluster.ingress("a", paths=[
        ("/", "Prefix", "web", 80),
        ("/api/", "Prefix", "web", 80),
        ("/docs//", "ImplementationSpecific", "web", 80),
        ("/exact/", "Exact", "web", 80),
        ("/api", "Exact", "web", 80),  # Exact and Prefix of the same path coexist
    ])
    routes = cluster.build().routes["app.example.com"]
    assert sorted(routes.prefix) == ["/", "/api", "/docs"]
    assert sorted(routes.exact) == ["/api", "/exact/"]


def test_missing_path_and_path_type_mean_a_prefix_of_slash(cluster):
    cluster.service("web")
    ing = cluster.ingress("a")
    del ing["spec"]["rules"][0]["http"]["paths"][0]["path"]
    del ing["spec"]["rules"][0]["http"]["paths"][0]["pathType"]
    assert list(cluster.build().routes["app.example.com"].prefix) == ["/"]


@pytest.mark.parametrize("path", [
    "api", " /", "/a b", "/a;b", "/a{b", "/a}b", '/a"b', "/a'b", "/a\\b", "/a\nb", "/a\rb", "/a\x00b",
    "/a\tb", "/a`b", "/api(/|$)(.*)", "/caf\u00e9", "/a<b>",
])
def test_unsafe_or_relative_paths_reject_the_ingress_and_others_keep_working(cluster, path):
    cluster.app("good", host="good.example.com")
    cluster.service("web")
    cluster.ingress("bad", paths=[("/fine", "Prefix", "web", 80), (path, "Prefix", "web", 80)])
    model = cluster.build()
    assert "app.example.com" not in model.routes  # nothing of the bad Ingress, not even its valid path
    assert "good.example.com" in model.routes
    [problem] = cluster.rejections(model)
    assert problem.startswith("Ingress default/bad: host app.example.com path ")
    assert "must start with / and contain only" in problem


@pytest.mark.parametrize("host", ["bad host", "a;b.example.com", "*", "foo.*.example.com", "a_b.example.com",
                                  "example.com.", "-a.example.com", "a\n.example.com",
                                  "\u212aube.example.com"])  # the Kelvin sign lowercases to "k"
def test_invalid_hosts_reject_the_ingress(cluster, host):
    cluster.app(host=host)
    model = cluster.build()
    assert model.routes == {}
    assert cluster.rejections(model) == [f"Ingress default/web: host {host!r} must be a DNS name such as "
                                         "app.example.com or *.example.com"]


def test_unknown_path_type_rejects_the_ingress(cluster):
    cluster.service("web")
    cluster.ingress("a", paths=[("/", "Regex", "web", 80)])
    model = cluster.build()
    assert model.routes == {}
    assert "pathType 'Regex' must be Exact, Prefix or ImplementationSpecific" in cluster.rejections(model)[0]


@pytest.mark.parametrize("bad_backend, message", [
    ({"resource": {"kind": "Bucket", "name": "b"}}, "resource backends are not supported; use backend.service"),
    ({"service": {"name": "web", "port": {}}}, "port needs a number (1-65535) or a name"),
    ({"service": {"name": "web", "port": {"number": 70000}}}, "port number 70000 must be 1-65535"),
    ({"service": {"name": "Web;", "port": {"number": 80}}}, "service name 'Web;' must be a DNS label"),
    ({}, "backend needs service.name and service.port"),
])
def test_unusable_backends_reject_the_ingress(cluster, bad_backend, message):
    ing = cluster.ingress("a")
    ing["spec"]["rules"][0]["http"]["paths"][0]["backend"] = bad_backend
    model = cluster.build()
    assert model.routes == {}
    assert message in cluster.rejections(model)[0]


def test_malformed_spec_rejects_the_ingress_without_breaking_the_build(cluster):
    cluster.app("good", host="good.example.com")
    cluster.add({"kind": "Ingress", "metadata": {"name": "odd", "namespace": "default"},
                 "spec": {"ingressClassName": "nginx", "rules": ["not a rule"]}})
    model = cluster.build()
    assert list(model.routes) == ["good.example.com"]
    assert cluster.rejections(model)[0].startswith("Ingress default/odd: malformed spec")


def test_ingresses_for_one_host_are_merged(cluster):
    cluster.service("web")
    cluster.service("api")
    cluster.ingress("site", paths=[("/", "Prefix", "web", 80)])
    cluster.ingress("api", ns="default", paths=[("/api", "Prefix", "api", 80)])
    routes = cluster.build().routes["app.example.com"]
    assert routes.prefix == {"/": Route("default-web-80", profile="default", ingress="default/site", service="web",
                                        service_port="80"),
                             "/api": Route("default-api-80", profile="default", ingress="default/api", service="api",
                                           service_port="80")}


def test_on_a_conflict_the_oldest_ingress_wins_and_the_loser_is_reported(cluster):
    cluster.service("old")
    cluster.service("new")
    cluster.ingress("z-old", paths=[("/x/", "Prefix", "old", 80)], created=cluster.timestamp(10))
    cluster.ingress("a-new", paths=[("/x", "ImplementationSpecific", "new", 80), ("/y", "Prefix", "new", 80)],
                    created=cluster.timestamp(20))
    model = cluster.build()
    routes = model.routes["app.example.com"]
    assert routes.prefix["/x"].ingress == "default/z-old"
    assert routes.prefix["/y"].ingress == "default/a-new"  # the loser keeps its other paths
    assert model.problem_lines() == ["warning: Ingress default/a-new: host app.example.com prefix path /x is already "
                              "served by Ingress default/z-old; ignored here"]


def test_equal_creation_times_fall_back_to_namespace_and_name(cluster):
    cluster.service("web", ns="b")
    cluster.service("web", ns="a")
    same = cluster.timestamp(5)
    cluster.ingress("web", ns="b", created=same)
    cluster.ingress("web", ns="a", created=same)
    assert cluster.build().routes["app.example.com"].prefix["/"].ingress == "a/web"


def test_an_ingress_without_creation_timestamp_counts_as_newest(cluster):
    cluster.service("web")
    anonymous = cluster.ingress("a-no-time")
    del anonymous["metadata"]["creationTimestamp"]
    cluster.ingress("z-timed")
    assert cluster.build().routes["app.example.com"].prefix["/"].ingress == "default/z-timed"


def test_default_backend_serves_the_ingress_hosts_and_without_rules_the_catch_all(cluster):
    cluster.service("web")
    cluster.service("fallback")
    cluster.ingress("with-rules", default_backend=cluster.backend("fallback", 80))
    cluster.ingress("no-rules", rules=[], default_backend=cluster.backend("web", "http"))
    routes = cluster.build().routes
    assert routes["app.example.com"].default == Route("default-fallback-80", profile="default",
                                                      ingress="default/with-rules", service="fallback",
                                                      service_port="80")
    assert routes[CATCH_ALL_HOST].default == Route("default-web-http", profile="default",
                                                   ingress="default/no-rules", service="web", service_port="http")
    assert routes[CATCH_ALL_HOST].prefix == {}


def test_conflicting_default_backends_oldest_wins(cluster):
    cluster.service("one")
    cluster.service("two")
    cluster.ingress("second", rules=[], default_backend=cluster.backend("two", 80), created=cluster.timestamp(2))
    cluster.ingress("first", rules=[], default_backend=cluster.backend("one", 80), created=cluster.timestamp(1))
    model = cluster.build()
    assert model.routes[CATCH_ALL_HOST].default.backend == "default-one-80"
    assert model.problem_lines() == ["warning: Ingress default/second: host _ already has the defaultBackend of Ingress "
                              "default/first; ignored here"]


def test_same_store_in_any_order_builds_an_equal_model(cluster):
    for i in range(30):
        cluster.app(f"app{i}", host=f"h{i % 7}.example.com", addresses=[f"10.0.{i}.{j}" for j in (3, 1, 2)],
                    created=cluster.timestamp(i % 4),
                    annotations={"proxy-read-timeout": str(i % 3 + 1)} if i % 2 else None)
    first = cluster.build()
    items = list(cluster.store.items())
    random.Random(7).shuffle(items)
    cluster.store = dict(items)
    second = cluster.build()
    assert first == second
    assert first.config.digest() == second.config.digest()
    # What nginx receives: the routes table in host order, every table as canonical JSON.
    assert list(first.routes_json()) == sorted(first.routes)
    assert canonical_json(first.backends) == canonical_json(second.backends)
    assert [p.name for p in first.config.profiles] == sorted(p.name for p in first.config.profiles)

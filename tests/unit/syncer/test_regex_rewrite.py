"""use-regex, rewrite-target and app-root in the model: which hosts match by regular expression, what each
route rewrites to, validation, and who decides a host's app-root."""
import pytest


def test_use_regex_turns_every_path_of_the_host_into_a_regex_and_keeps_the_pattern(cluster):
    cluster.app("other", host="app.example.com")  # an older Ingress on the same host, without the annotation
    cluster.service("api")
    cluster.ingress("api", paths=[("/api(/|$)(.*)", "ImplementationSpecific", "api", 80)],
                    annotations={"rewrite-target": "/$2"})
    model = cluster.build()
    host = model.routes_json()["app.example.com"]
    assert host["regex"] is True
    assert [p for p, _ in host["prefix"]] == ["/api(/|$)(.*)", "/"]  # longest first
    assert dict(host["prefix"])["/api(/|$)(.*)"]["rewrite"] == "/$2"
    assert "rewrite" not in dict(host["prefix"])["/"]
    assert "regex" not in model.routes_json().get("good.example.com", {})


@pytest.mark.parametrize("path, says", [
    ("/a(b", "not a valid regular expression"),
    ("/[:alpha:]", "POSIX named classes are supported only within a class"),  # PCRE's words (Python's re takes it)
    ("/a b", "without spaces"),
    ("a", "starting with /"),
])
def test_a_bad_regex_rejects_only_its_ingress(cluster, path, says):
    cluster.app("good", host="good.example.com")
    cluster.ingress("bad", paths=[(path, "ImplementationSpecific", "good", 80)], annotations={"use-regex": "true"})
    model = cluster.build()
    [problem] = cluster.rejections(model)
    assert problem.startswith("Ingress default/bad: ") and says in problem
    assert "good.example.com" in model.routes and "app.example.com" not in model.routes


def test_without_use_regex_regex_characters_are_refused(cluster):
    cluster.app("good", host="good.example.com")
    cluster.ingress("bad", paths=[("/api(/|$)(.*)", "ImplementationSpecific", "good", 80)])
    assert "regular expressions are not supported" in cluster.rejections(cluster.build())[0]


@pytest.mark.parametrize("value, ok", [("/$2", True), ("/api/$1/x", True), ("/", True), ("$host", False),
                                      ("/a b", False), ("/${1}", False), ("https://x/", False)])
def test_rewrite_target_values(cluster, value, ok):
    cluster.app(annotations={"rewrite-target": value})
    model = cluster.build()
    if ok:
        assert model.problem_lines() == []
    else:
        cluster.set_aside(model, "rewrite-target", value)


def test_app_root_the_oldest_ingress_decides_and_the_other_is_warned(cluster):
    cluster.app("first", host="app.example.com", annotations={"app-root": "/first"}, created=cluster.timestamp(0))
    cluster.service("second")
    cluster.ingress("second", paths=[("/b", "Prefix", "second", 80)], annotations={"app-root": "/second"})
    model = cluster.build()
    assert model.routes_json()["app.example.com"]["app_root"] == "/first"
    assert any("already has app-root /first" in line for line in model.problem_lines())


@pytest.mark.parametrize("value", ["/", "app", "http://x/app", "/a$b"])
def test_app_root_must_be_a_path_other_than_slash(cluster, value):
    cluster.app(annotations={"app-root": value})
    model = cluster.build()
    cluster.set_aside(model, "app-root", value)
    assert "app_root" not in model.routes_json()["app.example.com"]

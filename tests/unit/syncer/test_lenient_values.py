"""The values of issue 33 that ingress-nginx serves and pyngress refused: each now behaves as in ingress-nginx
(docs/migrating.md, "Invalid annotation values")."""
import pytest

from services.syncer.annotations import parse_annotations

PREFIX = "nginx.ingress.kubernetes.io"


def route(model) -> dict:
    return model.routes_json()["app.example.com"]["prefix"][0][1]


def profile_of(model):
    return next(p for p in model.config.profiles if p.name == route(model)["profile"])


@pytest.mark.parametrize("name, value", [
    ("proxy-body-size", "15r"), ("proxy-read-timeout", "50k"), ("proxy-send-timeout", "50k"),
    ("proxy-connect-timeout", "50k"), ("proxy-next-upstream-tries", "888888"),
])
def test_an_invalid_value_leaves_the_default_and_warns(cluster, name, value):
    cluster.app(annotations={name: value})
    model = cluster.build()
    cluster.set_aside(model, name, value)  # a warning naming the Ingress, the annotation and the value
    assert profile_of(model).directives == ()  # the defaults: nothing of the value reaches nginx.conf


def test_an_invalid_auth_url_denies_the_paths(cluster):
    cluster.app(annotations={"auth-url": "https://invalid..auth.url"})
    model = cluster.build()
    cluster.set_aside(model, "auth-url", "https://invalid..auth.url")
    assert profile_of(model).directives == (("return", "503"),)


def test_a_single_label_server_alias_is_a_name(cluster):
    cluster.app(annotations={"server-alias": "bar"})
    model = cluster.build()
    assert model.problem_lines() == [] and model.routes_json()["bar"] == model.routes_json()["app.example.com"]


def test_an_empty_x_forwarded_prefix_sends_no_header(cluster):
    cluster.app(annotations={"x-forwarded-prefix": ""})
    model = cluster.build()
    assert model.problem_lines() == [] and profile_of(model).directives == ()


@pytest.mark.parametrize("value, origins, skipped", [
    (" https://a.example.com , https://b.example.com,", "https://a.example.com,https://b.example.com", None),
    ("https://a.example.com, localhost:3000, tauri://localhost, http://:8080",
     "https://a.example.com", "'localhost:3000', 'tauri://localhost', 'http://:8080' skipped"),
    ("https://a.example.com, *", "*", None),
    ("*, foo.bar.com", "*", None),
])
def test_cors_origin_lists_are_read_as_ingress_nginx_reads_them(cluster, value, origins, skipped):
    cluster.app(annotations={"enable-cors": "true", "cors-allow-origin": value})
    model = cluster.build()
    assert profile_of(model).cors.allow_origin == origins
    about = [line for line in model.problem_lines() if "cors-allow-origin" in line]
    if skipped is None:
        assert about == []
    else:
        [line] = about
        assert line.startswith(f"warning: Ingress default/web: annotation {PREFIX}/cors-allow-origin value {value!r}: "
                               f"{skipped}")


@pytest.mark.parametrize("value", ["   ", "tauri://localhost", ","])
def test_a_cors_origin_list_without_an_origin_is_ignored(cluster, value):
    cluster.app(annotations={"enable-cors": "true", "cors-allow-origin": value})
    model = cluster.build()
    cluster.set_aside(model, "cors-allow-origin", value)
    assert profile_of(model).cors.allow_origin == "*"  # the default, as ingress-nginx answers


def test_method_and_header_lists_take_blanks_and_trailing_commas():
    parsed = parse_annotations({f"{PREFIX}/enable-cors": "true", f"{PREFIX}/cors-allow-methods": "GET, POST,",
                                f"{PREFIX}/cors-allow-headers": " X-A ,, X-B"}, prefix=PREFIX)
    assert (parsed.cors.allow_methods, parsed.cors.allow_headers, parsed.warnings) == ("GET,POST", "X-A,X-B", [])


def test_a_value_that_would_inject_configuration_is_never_rendered(cluster):
    cluster.app(annotations={"proxy-read-timeout": "60s; return 200 owned"})
    model = cluster.build()
    cluster.set_aside(model, "proxy-read-timeout", "60s; return 200 owned")
    assert profile_of(model).directives == ()

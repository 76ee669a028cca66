"""Values that passed their validator but that render() or `nginx -t` refused: each now touches only its own
Ingress (set aside as ingress-nginx does, or the Ingress rejected) or ConfigMap key, with a message saying what
to write."""
import itertools
import string
from dataclasses import replace

import pytest

from services.nginxconf.render import lua_string
from services.syncer.annotations import ANNOTATIONS
from services.syncer.annotations.renderable import MAX_LUA_STRING
from services.syncer.model.configmap_directives import DEFAULT_SSL_CIPHERS, GLOBAL_DIRECTIVES

PREFIX = "nginx.ingress.kubernetes.io"


def rejection(cluster, annotations: dict[str, str]) -> str:
    """The one problem of an Ingress with `annotations`, after checking that a good Ingress still works."""
    cluster.app("good", host="good.example.com")
    cluster.app("bad", host="bad.example.com", annotations=annotations)
    model = cluster.build()
    assert list(model.routes) == ["good.example.com"]
    [problem] = cluster.rejections(model)
    return problem


def set_aside(cluster, annotations: dict[str, str], name: str) -> str:
    """The reason given for the invalid value of `name` among an Ingress's `annotations`, which is set aside as
    ingress-nginx does (the Ingress served, or denied for an access-control annotation), a good Ingress untouched."""
    cluster.app("good", host="good.example.com")
    cluster.app("bad", host="bad.example.com", annotations=annotations)
    model = cluster.build()
    assert sorted(model.routes) == ["bad.example.com", "good.example.com"]
    return cluster.set_aside(model, name, annotations[name], ingress="default/bad")


def accepted(cluster, annotations: dict[str, str]) -> None:
    cluster.app(annotations=annotations)
    model = cluster.build()
    assert cluster.rejections(model) == [] and list(model.routes) == ["app.example.com"]


# --- every setting passes render.py's quoting, blamed on its annotation ------------------------

def _long_list(template: str, length: int) -> str:
    """A comma-separated list of distinct items (`template` with {} a distinct run of letters) whose Lua
    string is at least `length` bytes."""
    words = ("".join(letters) for letters in itertools.product(string.ascii_lowercase, repeat=3))
    items: list[str] = []
    while len(lua_string(",".join(items))) < length:
        items.append(template.format(next(words)))
    return ",".join(items)


@pytest.mark.parametrize("annotations, blamed, value", [
    # Directives set straight from one annotation.
    ({"proxy-read-timeout": "60s$x"}, "proxy-read-timeout", "60s$x"),
    ({"proxy-body-size": "1m\nreturn 200"}, "proxy-body-size", "1m\nreturn 200"),
    # Settings a group's apply() derives from a value: proxy_buffers, proxy_set_header, return, allow.
    ({"proxy-buffer-size": "8k$x"}, "proxy-buffer-size", "8k$x"),
    ({"upstream-vhost": "a.example.com\x00"}, "upstream-vhost", "a.example.com\x00"),
    ({"permanent-redirect": "https://a.example.com/$hostname", "permanent-redirect-code": "308"},
     "permanent-redirect", "https://a.example.com/$hostname"),
    ({"allowlist-source-range": "10.0.0.0/8$x"}, "allowlist-source-range", "10.0.0.0/8$x"),
])
def test_a_value_render_refuses_is_set_aside_naming_its_annotation(cluster, monkeypatch, annotations, blamed, value):
    # Validators that let anything through: the render check alone must stop the value.
    for name in annotations:
        monkeypatch.setitem(ANNOTATIONS, name, replace(ANNOTATIONS[name], validate=lambda v: v))
    assert "cannot be written into nginx.conf" in set_aside(cluster, annotations, blamed)


@pytest.mark.parametrize("name, template", [
    ("cors-allow-origin", "https://app{}.example.com"),
    ("cors-allow-methods", "M{}"),
    ("cors-allow-headers", "X_Header_{}"),
    ("cors-expose-headers", "X-Header-{}"),
])
def test_cors_lists_too_long_for_nginx_s_lua_block_reader_are_refused(cluster, name, template):
    value = _long_list(template, MAX_LUA_STRING + 1)
    problem = rejection(cluster, {"enable-cors": "true", name: value})
    assert problem.startswith(f"Ingress default/bad: annotation {PREFIX}/{name} value ")
    assert "shorten it" in problem


def test_a_cors_list_at_the_limit_is_accepted(cluster):
    value = _long_list("https://app{}.example.com", MAX_LUA_STRING - 40)
    assert len(lua_string(value)) <= MAX_LUA_STRING
    accepted(cluster, {"enable-cors": "true", "cors-allow-origin": value})


# --- IPv6 zone ids -------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["allowlist-source-range", "whitelist-source-range"])
@pytest.mark.parametrize("value", [
    "fe80::1%$x", "fe80::1%x;y", "fe80::1%eth0", "fe80::1%eth0/64", "fe80::1%25eth0", "::1%1",
    "10.0.0.0/8, fe80::1%x", "fe80::1%",
])
def test_ipv6_zone_ids_deny_the_paths_saying_what_to_write(cluster, name, value):
    reason = set_aside(cluster, {name: value}, name)
    assert "IPv6 zone id" in reason and "write the address without it, such as fe80::1" in reason


# --- ports ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("annotations, name", [
    ({"upstream-vhost": "internal.example.com:65536"}, "upstream-vhost"),
    ({"upstream-vhost": "internal.example.com:99999"}, "upstream-vhost"),
    ({"upstream-vhost": "internal.example.com:0"}, "upstream-vhost"),
    ({"upstream-vhost": "internal.example.com:080"}, "upstream-vhost"),
    ({"enable-cors": "true", "cors-allow-origin": "https://a.example.com:65536"}, "cors-allow-origin"),
    ({"enable-cors": "true", "cors-allow-origin": "https://*.example.com:0"}, "cors-allow-origin"),
    ({"permanent-redirect": "https://a.example.com:70000/x"}, "permanent-redirect"),
    ({"temporal-redirect": "http://a.example.com:0"}, "temporal-redirect"),
])
def test_ports_outside_1_to_65535_are_set_aside(cluster, annotations, name):
    assert "1-65535" in set_aside(cluster, annotations, name)


@pytest.mark.parametrize("annotations", [
    {"upstream-vhost": "internal.example.com:65535"},
    {"upstream-vhost": "internal:1"},
    {"enable-cors": "true", "cors-allow-origin": "https://a.example.com:65535,http://*.b.example.com:8080"},
    {"permanent-redirect": "https://a.example.com:65535/x"},
])
def test_ports_at_the_edges_of_the_range_are_accepted(cluster, annotations):
    accepted(cluster, annotations)


# --- the ConfigMap ------------------------------------------------------------------------------

@pytest.mark.parametrize("value", ["!aNULL", "TLS_AES_128_GCM_SHA256", "FOO", "FOO:BAR", "-ALL"])
def test_cipher_lists_that_select_no_cipher_are_refused(cluster, value):
    cluster.configmap({"ssl-ciphers": value})
    model = cluster.build()
    assert model.config.globals["ssl_ciphers"] == DEFAULT_SSL_CIPHERS
    assert model.problem_lines() == [f"ConfigMap ingress/ingress-nginx-controller: key ssl-ciphers value {value!r}: "
                              "selects no cipher OpenSSL knows, so nginx would refuse it; name at least one TLS "
                              "1.2 cipher such as ECDHE-RSA-AES128-GCM-SHA256 (TLS 1.3 suites cannot be set "
                              "here); the default applies"]


@pytest.mark.parametrize("value", ["HIGH:!aNULL", "DEFAULT:FOO", "@SECLEVEL=0:ALL", "ECDHE-RSA-AES128-GCM-SHA256"])
def test_cipher_lists_that_select_a_cipher_are_accepted(cluster, value):
    cluster.configmap({"ssl-ciphers": value})
    model = cluster.build()
    assert model.problem_lines() == [] and model.config.globals["ssl_ciphers"] == value


@pytest.mark.parametrize("key, value", [("proxy-read-timeout", "60s$x"), ("keep-alive", "75s\n"),
                                        ("proxy-body-size", "1m\x00")])
def test_a_configmap_value_render_refuses_keeps_the_default(cluster, monkeypatch, key, value):
    directive, _, default = GLOBAL_DIRECTIVES[key]
    monkeypatch.setitem(GLOBAL_DIRECTIVES, key, (directive, lambda v: v, default))
    cluster.configmap({key: value})
    model = cluster.build()
    assert model.config.globals[directive] == default
    [problem] = model.problem_lines()
    assert problem.startswith(f"ConfigMap ingress/ingress-nginx-controller: key {key} value {value!r}: ")
    assert "cannot be written into nginx.conf" in problem and problem.endswith("; the default applies")

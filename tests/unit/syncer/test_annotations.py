import re

import pytest

from services.syncer.annotations import ANNOTATIONS, Risk
from services.nginxconf.config import DEFAULT_PROFILE, CorsPolicy, LocationProfile
from services.nginxconf.render import render
from services.syncer.annotations.access_control import is_access_control
from services.tools.ingress_nginx_annotations import NOT_IMPLEMENTED

PREFIX = "nginx.ingress.kubernetes.io"
CORS_DEFAULTS = CorsPolicy(
    allow_origin="*", allow_methods="GET,PUT,POST,DELETE,PATCH,OPTIONS",
    allow_headers="DNT,Keep-Alive,User-Agent,X-Requested-With,If-Modified-Since,Cache-Control,Content-Type,"
                  "Range,Authorization",
    allow_credentials=True, max_age=1728000)


def route_profile(model) -> LocationProfile:
    """The location profile the app's "/" route is served with."""
    profile_name = model.routes["app.example.com"].prefix["/"].profile
    [profile] = [p for p in model.config.profiles if p.name == profile_name]
    return profile


def route_settings(model) -> list[tuple[str, str]]:
    """The nginx directives the app's "/" route is served with."""
    return list(route_profile(model).directives)


@pytest.mark.parametrize("annotations, settings", [
    ({"proxy-connect-timeout": "5"}, {"proxy_connect_timeout": "5s"}),
    ({"proxy-connect-timeout": "500ms"}, {"proxy_connect_timeout": "500ms"}),
    ({"proxy-send-timeout": "2m"}, {"proxy_send_timeout": "2m"}),
    ({"proxy-read-timeout": "1h"}, {"proxy_read_timeout": "1h"}),
    ({"proxy-read-timeout": "0060"}, {"proxy_read_timeout": "60s"}),
    ({"proxy-read-timeout": "596h"}, {"proxy_read_timeout": "596h"}),
    ({"proxy-body-size": "8M"}, {"client_max_body_size": "8m"}),
    ({"proxy-body-size": "0"}, {"client_max_body_size": "0"}),
    ({"proxy-body-size": "1024"}, {"client_max_body_size": "1024"}),
    ({"proxy-body-size": "2g"}, {"client_max_body_size": "2g"}),
    ({"proxy-buffering": "ON"}, {"proxy_buffering": "on"}),
    ({"proxy-buffer-size": "16k"}, {"proxy_buffer_size": "16k", "proxy_buffers": "4 16k"}),
    ({"proxy-buffer-size": "8M"}, {"proxy_buffer_size": "8m", "proxy_buffers": "4 8m"}),
    ({"proxy-buffer-size": "1024"}, {"proxy_buffer_size": "1024", "proxy_buffers": "4 1024"}),
    ({"proxy-request-buffering": "off"}, {"proxy_request_buffering": "off"}),
    ({"proxy-http-version": "1.0"}, {"proxy_http_version": "1.0"}),
    ({"backend-protocol": "HTTP"}, {}),
    ({"upstream-vhost": "internal.example.com"}, {"proxy_set_header": "Host internal.example.com"}),
    ({"upstream-vhost": "internal:8080"}, {"proxy_set_header": "Host internal:8080"}),
    ({"permanent-redirect": "https://new.example.com"}, {"return": "301 https://new.example.com"}),
    ({"permanent-redirect": "https://new.example.com/", "permanent-redirect-code": "308"},
     {"return": "308 https://new.example.com/"}),
    ({"permanent-redirect": "http://new.example.com:8080/a/b?x=1&y=%20#top"},
     {"return": "301 http://new.example.com:8080/a/b?x=1&y=%20#top"}),
    ({"temporal-redirect": "https://maint.example.com/down"}, {"return": "302 https://maint.example.com/down"}),
    ({"allowlist-source-range": "192.168.1.1, 10.0.0.0/8,2001:db8::/32,10.0.0.0/8"},
     [("allow", "10.0.0.0/8"), ("allow", "192.168.1.1/32"), ("allow", "2001:db8::/32"), ("deny", "all")]),
    ({"whitelist-source-range": "10.1.2.3/8"}, [("allow", "10.0.0.0/8"), ("deny", "all")]),
    ({"ssl-redirect": "false", "force-ssl-redirect": "1", "ssl-passthrough": "F"}, {}),
])
def test_valid_annotations_become_location_settings(cluster, annotations, settings):
    cluster.app(annotations=annotations)
    model = cluster.build()
    assert model.problem_lines() == []
    assert route_settings(model) == (sorted(settings.items()) if isinstance(settings, dict) else settings)
    assert (route_profile(model).backend_scheme, route_profile(model).cors) == ("http", None)


def test_backend_protocol_https_is_the_profiles_backend_scheme(cluster):
    cluster.app(annotations={"backend-protocol": "https"})
    profile = route_profile(cluster.build())
    assert (profile.backend_scheme, profile.directives, profile.cors) == ("https", (), None)


@pytest.mark.parametrize("annotations, policy", [
    ({"enable-cors": "true"}, CORS_DEFAULTS),
    ({"enable-cors": "True", "cors-allow-origin": "https://a.example.com,https://*.b.example.com:8443 , ",
      "cors-allow-methods": "GET,POST,", "cors-allow-headers": "X-Api-Key, Content-Type",
      "cors-expose-headers": "X-Request-Id", "cors-allow-credentials": "false", "cors-max-age": "600"},
     CorsPolicy(allow_origin="https://a.example.com,https://*.b.example.com:8443", allow_methods="GET,POST",
                allow_headers="X-Api-Key,Content-Type", expose_headers="X-Request-Id", allow_credentials=False,
                max_age=600)),
    # As ingress-nginx reads the list: "*" anywhere allows every origin.
    ({"enable-cors": "true", "cors-allow-origin": "https://a.example.com, *"}, CORS_DEFAULTS),
])
def test_enable_cors_gives_the_profile_its_cors_policy(cluster, annotations, policy):
    cluster.app(annotations=annotations)
    profile = route_profile(cluster.build())
    assert (profile.cors, profile.directives, profile.backend_scheme) == (policy, (), "http")


@pytest.mark.parametrize("name, value", [
    *[(name, value) for name in ("proxy-connect-timeout", "proxy-send-timeout", "proxy-read-timeout")
      for value in ("60s; return 200", "60s\n", "\n60", "60 s", " 60", "-1", "1d", "60s}", '"60s"', "", "60.5",
                    "597h", "99999999999", "60s #")],
    *[("proxy-body-size", v) for v in ("8mb", "1t", "8m;", "1.5m", "2000g", "8m\nreturn 200", "'8m'")],
    *[("proxy-buffering", v) for v in ("yes", "on;", "on\n", "true")],
    *[("proxy-buffer-size", v) for v in ("9m", "16k\n", "16k }", "", "0", "1023")],
    *[("proxy-request-buffering", v) for v in ("maybe", "off; deny all")],
    *[("proxy-http-version", v) for v in ("2", "1.1;", "1")],
    *[("backend-protocol", v) for v in ("FTP", "HTTPS;", "http\n")],
    *[(name, v) for name in ("permanent-redirect", "temporal-redirect")
      for v in ("javascript:alert(1)", "https://x.example.com/a b", 'https://x.example.com/"',
                "https://x.example.com/;return 200", "https://x.example.com/}", "https://x.example.com\n",
                "relative", "https://x.example.com/$hostname", "https://x.example.com$remote_addr",
                "https://x.example.com/\\", "https://x.example.com/'", "https://$hosts/", "ftp://x.example.com")],
    *[("permanent-redirect-code", v) for v in ("200", "309", "301;", "30l")],
    ("enable-cors", "yes"),
    *[("cors-allow-origin", v) for v in ("https://a.example.com;", "https://a.example.com}", "ftp://a.example.com",
                                         '"*"', "https://a.example.com/path", "", " , ")],
    *[("cors-allow-methods", v) for v in ("GET;DELETE", "GET\nPOST", "GET }", ",")],
    *[("cors-allow-headers", v) for v in ("X-A; x", 'X-"A', "X-A\r\nX-B: 1")],
    ("cors-expose-headers", "X-A}"),
    ("cors-allow-credentials", "yes"),
    *[("cors-max-age", v) for v in ("-1", "1h", "1;")],
    *[(name, v) for name in ("allowlist-source-range", "whitelist-source-range")
      for v in ("10.0.0.0/33", "10.0.0.0/8; allow all", "", "any", "10.0.0.0/8\n")],
    *[("upstream-vhost", v) for v in ("a.example.com; proxy_pass http://evil", "a.example.com\n", "a b",
                                      "$host", '"a.example.com"', "a.example.com:99999x", "")],
    *[(name, "yes") for name in ("ssl-redirect", "force-ssl-redirect", "ssl-passthrough")],
])
def test_invalid_values_are_set_aside_and_others_keep_working(cluster, name, value):
    cluster.app("good", host="good.example.com")
    cluster.app("bad", annotations={name: value}, host="app.example.com")
    model = cluster.build()
    assert sorted(model.routes) == ["app.example.com", "good.example.com"]
    cluster.set_aside(model, name, value, ingress="default/bad")


def test_ajp_backends_are_rejected_as_not_supported(cluster):
    cluster.app(annotations={"backend-protocol": "ajp"})
    [problem] = cluster.rejections(cluster.build())
    assert "AJP backends are not supported by pyngress (nginx has no AJP module)" in problem


@pytest.mark.parametrize("protocol, scheme", [("GRPC", "grpc"), ("grpcs", "grpcs"), ("HTTPS", "https"), ("http", "http"),
                                              ("FCGI", "fcgi"), ("auto_http", "auto")])
def test_backend_protocols_choose_the_profile_scheme(cluster, protocol, scheme):
    cluster.app(annotations={"backend-protocol": protocol})
    model = cluster.build()
    assert not cluster.rejections(model)
    profile = model.routes["app.example.com"].prefix["/"].profile
    assert {p.name: p.backend_scheme for p in model.config.profiles}.get(profile, "http") == scheme


@pytest.mark.parametrize("name", ["configuration-snippet", "server-snippet", "auth-snippet", "stream-snippet",
                                  "modsecurity-snippet"])
@pytest.mark.parametrize("configmap", [{}, {"annotations-risk-level": "Critical"}, {"allow-snippet-annotations": "true"}])
def test_snippets_are_rejected_unless_the_configmap_allows_them_at_critical_risk(cluster, name, configmap):
    if configmap:
        cluster.configmap(configmap)
    cluster.app(annotations={name: "more_set_headers 'X: y';"})
    model = cluster.build(watch_ingress_without_class=True)
    assert model.routes == {}
    [problem] = cluster.rejections(model)
    if "allow-snippet-annotations" not in configmap:
        assert "snippet annotations are disabled: remove it, or have the cluster administrator set" in problem
    elif name == "configuration-snippet":
        assert "risk level CRITICAL is above the ConfigMap's annotations-risk-level HIGH" in problem


def test_auth_snippet_goes_into_the_auth_location_when_snippets_are_allowed(cluster):
    cluster.configmap({"allow-snippet-annotations": "true", "annotations-risk-level": "Critical"})
    cluster.app(annotations={"auth-url": "http://auth.example.com/check", "auth-snippet": "proxy_set_header X-A b;"})
    model = cluster.build()
    assert cluster.rejections(model) == []
    [profile] = [p for p in model.config.profiles if p.external_auth]
    assert profile.external_auth.snippet == "proxy_set_header X-A b;"


def test_auth_snippet_without_auth_url_is_ignored_with_a_warning(cluster):
    cluster.configmap({"allow-snippet-annotations": "true", "annotations-risk-level": "Critical"})
    cluster.app(annotations={"auth-snippet": "proxy_set_header X-A b;"})
    model = cluster.build()
    assert model.problem_lines() == [f"warning: Ingress default/web: annotation {PREFIX}/auth-snippet has no effect "
                                     "without auth-url; ignored"]


def test_annotations_above_the_configmap_risk_level_are_rejected(cluster):
    cluster.configmap({"annotations-risk-level": "Low"})
    cluster.app("low", host="low.example.com", annotations={"proxy-read-timeout": "10"})
    cluster.app("medium", annotations={"allowlist-source-range": "10.0.0.0/8"})
    model = cluster.build()
    assert list(model.routes) == ["low.example.com"]
    assert cluster.rejections(model) == [
        f"Ingress default/medium: annotation {PREFIX}/allowlist-source-range value '10.0.0.0/8': its risk level "
        "MEDIUM is above the ConfigMap's annotations-risk-level LOW; remove the annotation or raise "
        "annotations-risk-level"]


def test_values_that_are_not_strings_are_rejected(cluster):
    cluster.app(annotations={"proxy-read-timeout": 60})
    assert cluster.rejections(cluster.build()) == [
        f"Ingress default/web: annotation {PREFIX}/proxy-read-timeout value 60: annotation values must be "
        "strings; quote it in the manifest"]


def test_unknown_annotations_under_our_prefix_are_ignored_with_a_warning(cluster):
    cluster.app(annotations={"enable-influxdb": "true", "example.com/other": "x",
                             "kubectl.kubernetes.io/x": "y"})
    model = cluster.build()
    assert route_settings(model) == []
    assert model.problem_lines() == [f"warning: Ingress default/web: annotation {PREFIX}/enable-influxdb is not "
                                     "supported by pyngress; ignored"]


@pytest.mark.parametrize("name, value", [
    ("limit-some-future-option", "5"), ("blacklist-source-range", "10.0.0.0/8"), ("auth-some-future-option", "x"),
    # ingress-nginx's own, as docs/annotations.md lists them (the value is never looked at).
    *((name, "true") for name in NOT_IMPLEMENTED if is_access_control(name)),
])
def test_access_control_annotations_pyngress_lacks_refuse_the_ingress(cluster, name, value):
    # Fail closed: an Ingress protected by ingress-nginx must never be served open by pyngress.
    cluster.app(annotations={name: value})
    cluster.app("other", host="other.example.com")
    model = cluster.build()
    assert list(model.routes) == ["other.example.com"]
    assert cluster.rejections(model) == [
        f"Ingress default/web: annotation {PREFIX}/{name} value {value!r}: controls access, and pyngress does not "
        "implement it yet: the Ingress is refused rather than served without that protection; remove the "
        "annotation only if the backend needs no such protection"]


def test_options_without_their_switch_are_ignored_with_a_warning(cluster):
    cluster.app(annotations={"cors-max-age": "10", "permanent-redirect-code": "308"})
    model = cluster.build()
    assert route_settings(model) == []
    assert model.problem_lines() == [
        f"warning: Ingress default/web: annotation {PREFIX}/permanent-redirect-code has no effect without "
        "permanent-redirect; ignored",
        f"warning: Ingress default/web: annotation {PREFIX}/cors-max-age has no effect without enable-cors: "
        '"true"; ignored',
    ]


def test_precedence_between_alternatives(cluster):
    cluster.app(annotations={"temporal-redirect": "https://t.example.com",
                             "permanent-redirect": "https://p.example.com",
                             "allowlist-source-range": "10.0.0.0/8", "whitelist-source-range": "192.168.0.0/16"})
    model = cluster.build()
    assert route_settings(model) == [("allow", "10.0.0.0/8"), ("deny", "all"), ("return", "302 https://t.example.com")]
    assert len(cluster.warnings(model)) == 2


def test_a_custom_annotation_prefix(cluster):
    cluster.app(annotations={"custom.example.com/proxy-read-timeout": "5", f"{PREFIX}/proxy-send-timeout": "7"})
    assert route_settings(cluster.build(annotations_prefix="custom.example.com")) == [("proxy_read_timeout", "5s")]


def test_equal_settings_share_one_profile_named_by_a_stable_hash(cluster):
    cluster.app("a", host="a.example.com", annotations={"proxy-read-timeout": "60"})
    cluster.app("b", host="b.example.com", annotations={"proxy-read-timeout": "60s"})
    cluster.app("c", host="c.example.com", annotations={"proxy-read-timeout": "61"})
    cluster.app("d", host="d.example.com")
    model = cluster.build()
    names = {host: r.prefix["/"].profile for host, r in model.routes.items()}
    assert names["a.example.com"] == names["b.example.com"] != names["c.example.com"]
    assert names["d.example.com"] == DEFAULT_PROFILE
    assert all(re.fullmatch(r"[0-9a-f]{12}", names[h]) for h in ("a.example.com", "c.example.com"))
    assert [p.name for p in model.config.profiles] == sorted({DEFAULT_PROFILE, *names.values()})
    assert model.config.profiles == cluster.build().config.profiles


def test_profiles_list_only_what_routes_use_and_always_default(cluster):
    cluster.service("web")
    cluster.ingress("first", annotations={"proxy-read-timeout": "5"})
    cluster.ingress("loser", annotations={"proxy-read-timeout": "9"})  # all its paths lose the conflict
    profiles = cluster.build().config.profiles
    assert [dict(p.directives) for p in profiles if p.name != DEFAULT_PROFILE] == [{"proxy_read_timeout": "5s"}]
    assert DEFAULT_PROFILE in [p.name for p in profiles]


def test_every_annotation_has_a_validator_a_risk_level_and_a_doc():
    assert len(ANNOTATIONS) >= 30
    for name, annotation in ANNOTATIONS.items():
        assert name == annotation.name and re.fullmatch(r"[a-z0-9-]+", name)
        assert isinstance(annotation.risk, Risk) and annotation.doc and callable(annotation.validate)


def test_the_oldest_server_snippet_of_a_host_wins(cluster):
    cluster.configmap({"allow-snippet-annotations": "true", "annotations-risk-level": "Critical"})
    cluster.app("first", annotations={"server-snippet": "return 418;"}, created=cluster.timestamp())
    cluster.ingress("second", host="app.example.com", paths=(("/b", "Prefix", "first", 80),),
                    annotations={"server-snippet": "return 419;"}, created=cluster.timestamp())
    model = cluster.build()
    [first] = [p for p in model.config.profiles if p.server_snippet == "return 418;"]
    assert model.config.snippet_servers == (("app.example.com", first.name),)
    assert model.problem_lines() == ["warning: Ingress default/second: server-snippet is ignored for host "
                                     "app.example.com: Ingress default/first (older) sets the server block settings "
                                     "of that host (server-snippet)"]
    conf = render(model.config)
    assert conf.count("server_name \"app.example.com\";") == 1 and "return 418;" in conf and "return 419;" not in conf
    assert conf.count("listen 80 default_server;") == 1 and conf.count("listen 80;") == 1


def test_stream_snippets_make_a_stream_block_with_the_stream_module(cluster):
    cluster.configmap({"allow-snippet-annotations": "true", "annotations-risk-level": "Critical"})
    assert "stream {" not in render(cluster.build().config)
    cluster.app(annotations={"stream-snippet": "server { listen 127.0.0.1:9999; return ok; }"})
    conf = render(cluster.build().config)
    assert "load_module /usr/lib/nginx/modules/ngx_stream_module.so;" in conf
    stream = conf[conf.index("\nstream {\n"):]
    assert "\n    server { listen 127.0.0.1:9999; return ok; }\n}\n" in stream and "js_import" not in stream


def test_the_configmap_load_balance_is_the_default_of_the_annotation(cluster):
    cluster.configmap({"load-balance": "ewma"})
    cluster.app("plain")
    cluster.app("own", host="own.example.com", annotations={"load-balance": "round_robin"})
    model = cluster.build()
    assert model.problem_lines() == []
    routes = model.routes_json()
    assert routes["app.example.com"]["prefix"][0][1].get("ewma") is True
    assert "ewma" not in routes["own.example.com"]["prefix"][0][1]
    cluster.configmap({"load-balance": "least_conn"})
    [problem] = cluster.build().problem_lines()
    assert "key load-balance value 'least_conn': must be one of round_robin, ewma" in problem

"""auth-url and its options: the validators, the profile the model makes, and what nginx.conf gets."""
import re

import pytest

from services.nginxconf.config import AuthKeepalive, ExternalAuth
from services.nginxconf.render import render
from services.nginxconf.resolvers import system_resolvers
from services.syncer.annotations import ANNOTATIONS
from services.syncer.annotations.base import InvalidValue
from services.syncer.model.auth_secrets import DENIED_PROFILE

PREFIX = "nginx.ingress.kubernetes.io"
URL = "http://auth.auth-ns.svc.cluster.local:8080/check"


@pytest.mark.parametrize("name, value, canonical", [
    ("auth-url", URL, URL),
    ("auth-url", "https://10.0.0.5/oauth2/auth", "https://10.0.0.5/oauth2/auth"),
    ("auth-url", "http://auth", "http://auth/"),
    ("auth-method", "post", "POST"),
    ("auth-signin", "https://login.example.com/start", "https://login.example.com/start"),
    ("auth-signin", "https://$host/oauth2/start?rd=$escaped_request_uri",
     "https://$host/oauth2/start?rd=$escaped_request_uri"),
    ("auth-signin", "https://login.example.com:8443/s?a=b&c=$request_uri",
     "https://login.example.com:8443/s?a=b&c=$request_uri"),
    ("auth-signin-redirect-param", "redirect_to", "redirect_to"),
    ("auth-response-headers", "X-Auth-Request-User, X-Auth-Request-Email,X-Auth-Request-User",
     "X-Auth-Request-User,X-Auth-Request-Email"),
    ("auth-request-redirect", "https://app.example.com/home", "https://app.example.com/home"),
    ("auth-always-set-cookie", "True", "true"),
    ("auth-keepalive", "10", "10"),
    ("auth-url", "https://$host/oauth2/auth", "https://$host/oauth2/auth"),
    ("auth-url", "http://$best_http_host:8080", "http://$best_http_host:8080/"),
    ("auth-cache-key", "$remote_user$http_authorization", "$remote_user$http_authorization"),
    ("auth-cache-key", "v1:$cookie_session-$arg_tenant", "v1:$cookie_session-$arg_tenant"),
    ("auth-cache-duration", "200 202 401 5m", "200 202 401 5m"),
    ("auth-cache-duration", "200 1m, 401 30s,any 1h", "200 1m,401 30s,any 1h"),
])
def test_accepted_values(name, value, canonical):
    assert ANNOTATIONS[name].validate(value) == canonical


@pytest.mark.parametrize("name, value, message", [
    ("auth-url", "ftp://auth/check", "must be an http:// or https:// URL"),
    ("auth-url", "http://$remote_addr/oauth2/auth", "the nginx variables it may hold are $host, $http_host"),
    ("auth-url", "http://$hostname/oauth2/auth", "the nginx variables it may hold are $host"),
    ("auth-url", "http://auth/check?x=1", "without query"),
    ("auth-url", 'http://auth/check"; return 200; "', "must be an http:// or https:// URL"),
    ("auth-url", "http://auth:99999/check", "port 1-65535"),
    ("auth-method", "BREW", "must be one of GET"),
    ("auth-signin", "https://$hostname/x", "the nginx variables it may hold are $best_http_host"),
    ("auth-signin", "https://login/$request_id", "the nginx variables it may hold"),
    ("auth-signin", "javascript:alert(1)", "must be an http:// or https:// URL"),
    ("auth-signin", "https://login/x y", "must be an http:// or https:// URL"),
    ("auth-signin-redirect-param", "rd&x=1", "must be a query parameter name"),
    ("auth-response-headers", "X-User;", "must be a comma-separated list of header names"),
    ("auth-response-headers", "X-User, Host", "Host is set by the controller for every request"),
    ("auth-response-headers", "x-forwarded-for", "x-forwarded-for is set by the controller"),
    ("auth-request-redirect", "$request_uri", "without quotes, spaces, '$' or ';'"),
    ("auth-cache-key", "$x;", "must be nginx variables"),
    ("auth-cache-key", "$request_body", "must be nginx variables"),
    ("auth-cache-key", "${host}", "must be nginx variables"),
    ("auth-cache-key", "$hostname", "must be nginx variables"),
    ("auth-cache-duration", "5", "must be comma-separated durations"),
    ("auth-cache-duration", "200 5m; proxy_pass x", "must be comma-separated durations"),
])
def test_refused_values(name, value, message):
    with pytest.raises(InvalidValue, match=message.replace("$", r"\$").replace("(", r"\(")):
        ANNOTATIONS[name].validate(value)


def route_profile(model):
    name = model.routes["app.example.com"].prefix["/"].profile
    [profile] = [p for p in model.config.profiles if p.name == name]
    return profile


def test_the_profile_carries_the_external_auth(cluster):
    cluster.app(annotations={"auth-url": URL, "auth-method": "POST", "auth-signin": "https://login/s",
                             "auth-response-headers": "X-User", "auth-always-set-cookie": "true"})
    model = cluster.build()
    assert route_profile(model).external_auth == ExternalAuth(
        url=URL, method="POST", signin="https://login/s", response_headers=("X-User",), always_set_cookie=True)
    assert cluster.rejections(model) == [] and cluster.warnings(model) == []


def test_options_without_auth_url_are_ignored_with_a_warning(cluster):
    cluster.app(annotations={"auth-signin": "https://login/s"})
    model = cluster.build()
    assert route_profile(model).name == "default"
    assert cluster.warnings(model) == [
        f"warning: Ingress default/web: annotation {PREFIX}/auth-signin has no effect without auth-url; ignored"]


def test_keepalive_makes_an_upstream_of_its_own_and_a_lua_subrequest(cluster):
    cluster.app(annotations={"auth-url": URL, "auth-keepalive": "10", "auth-keepalive-timeout": "30",
                             "auth-response-headers": "X-User"})
    model = cluster.build()
    profile = route_profile(model)
    assert profile.external_auth.keepalive == AuthKeepalive(connections=10, requests=1000, timeout=30, share_vars=False)
    assert cluster.warnings(model) == []
    assert model.backends[f"pyngress_auth_{profile.name}"] == ["auth.auth-ns.svc.cluster.local:8080"]
    conf = render(model.config)
    upstream = conf[conf.index(f"upstream pyngress_auth_{profile.name} {{"):]
    upstream = upstream[:upstream.index("\n    }\n")]
    assert f'require("pyngress.balancer").balance("pyngress_auth_{profile.name}")' in upstream
    assert "keepalive 10;\n        keepalive_requests 1000;\n        keepalive_timeout 30s;" in upstream
    assert f'proxy_pass "http://pyngress_auth_{profile.name}/check";' in conf
    assert 'proxy_ssl_name "auth.auth-ns.svc.cluster.local";' in conf
    # HTTP/1 requests: the Lua subrequest; HTTP/2 ones (the router picks the location): auth_request.
    http1 = conf[conf.index(f"location @profile_{profile.name} {{"):conf.index(f"location @profile_{profile.name}_http2")]
    assert f'require("pyngress.external_auth").ask("/_pyngress_auth_{profile.name}"' in http1
    assert "auth_request " not in http1
    http2 = conf[conf.index(f"location @profile_{profile.name}_http2 {{"):]
    assert f"auth_request /_pyngress_auth_{profile.name};" in http2[:http2.index("\n        }\n")]
    assert f'http2_locations = {{ ["{profile.name}"] = "\\64profile_{profile.name}_http2", }},' in conf  # \64: "@"
    assert 'response_headers = { "X-User", },' in conf


@pytest.mark.parametrize("annotations, warning", [
    ({"auth-keepalive": "0", "auth-keepalive-timeout": "5"}, "auth-keepalive-timeout has no effect without "
                                                              "auth-keepalive above 0; ignored"),
    ({"auth-keepalive": "4", "auth-keepalive-requests": "0"}, "auth-keepalive-requests is 0, which turns "
                                                               "auth-keepalive off"),
    ({"auth-keepalive": "4", "auth-keepalive-timeout": "0"}, "auth-keepalive-timeout is 0, which turns "
                                                              "auth-keepalive off"),
])
def test_keepalive_off_as_in_ingress_nginx(cluster, annotations, warning):
    cluster.app(annotations={"auth-url": URL, **annotations})
    model = cluster.build()
    assert route_profile(model).external_auth.keepalive is None
    [line] = cluster.warnings(model)
    assert warning in line
    assert not any(name.startswith("pyngress_auth_") for name in model.backends)


def test_auth_url_with_the_request_host_is_asked_per_host_without_keepalive(cluster):
    # ingress-nginx's oauth2-proxy example; kept connections need one fixed host, so auth-keepalive is ignored.
    cluster.app(annotations={"auth-url": "https://$host/oauth2/auth", "auth-keepalive": "4"})
    model = cluster.build()
    assert route_profile(model).external_auth.keepalive is None
    [line] = cluster.warnings(model)
    assert "auth-keepalive is ignored: auth-url holds nginx variables" in line
    conf = render(model.config)
    assert 'set $pyngress_auth_url "https://${host}/oauth2/auth";' in conf
    assert 'proxy_set_header Host "${host}";' in conf


def test_the_default_port_of_a_kept_alive_https_service_is_443(cluster):
    cluster.app(annotations={"auth-url": "https://10.0.0.5/oauth2/auth", "auth-keepalive": "2",
                             "auth-keepalive-share-vars": "true"})
    model = cluster.build()
    profile = route_profile(model)
    assert profile.external_auth.keepalive.share_vars
    assert model.backends[f"pyngress_auth_{profile.name}"] == ["10.0.0.5:443"]
    assert "share_vars = true," in render(model.config)


def test_the_cache_key_takes_the_default_durations(cluster):
    cluster.app(annotations={"auth-url": URL, "auth-cache-key": "$remote_user$http_authorization"})
    auth = route_profile(cluster.build()).external_auth
    assert (auth.cache_key, auth.cache_durations) == ("$remote_user$http_authorization", ("200 202 401 5m",))
    conf = render(cluster.build().config)
    assert 'proxy_cache_key "${host}|${pyngress_metric}|${uri}|${remote_user}${http_authorization}";' in conf
    assert 'proxy_cache_valid "200" "202" "401" "5m";' in conf and "keys_zone=pyngress_auth_cache:10m" in conf


def test_cache_duration_without_cache_key_is_ignored_with_a_warning(cluster):
    cluster.app(annotations={"auth-url": URL, "auth-cache-duration": "5m"})
    model = cluster.build()
    assert route_profile(model).external_auth.cache_durations == ()
    assert "proxy_cache_path" not in render(model.config)
    assert cluster.warnings(model) == [f"warning: Ingress default/web: annotation {PREFIX}/auth-cache-duration has "
                                       "no effect without auth-cache-key; ignored"]


def headers_configmap(cluster, data, *, name="auth-headers", ns="default"):
    cluster.add({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}, "data": data})


@pytest.mark.parametrize("reference", ["auth-headers", "default/auth-headers"])
def test_auth_proxy_set_headers_are_sent_to_the_auth_service(cluster, reference):
    headers_configmap(cluster, {"X-Tenant": "team-a", "X-Scopes": "read write", "X-Client": "${remote_addr}"})
    cluster.app(annotations={"auth-url": URL, "auth-proxy-set-headers": reference})
    model = cluster.build()
    assert cluster.rejections(model) == []
    assert route_profile(model).external_auth.proxy_set_headers == (
        ("X-Client", "${remote_addr}"), ("X-Scopes", "read write"), ("X-Tenant", "team-a"))
    conf = render(model.config)
    # nginx evaluates the variables of these values, as ingress-nginx's template lets it.
    assert ('proxy_set_header "X-Client" "${remote_addr}";\n            proxy_set_header "X-Scopes" "read write";\n'
            '            proxy_set_header "X-Tenant" "team-a";') in conf


@pytest.mark.parametrize("configmap, reference, problem", [
    (None, "auth-headers", "ConfigMap default/auth-headers not found (it must be in a namespace the controller "
                           "watches)"),
    ({"X-Tenant": "a$no_such"}, "auth-headers", "entry 'X-Tenant': names variables nginx does not define: $no_such"),
    ({"X-Tenant": "a$"}, "auth-headers", "entry 'X-Tenant': has a $ that starts no variable name"),
    ({"X-Tenant\n": "a"}, "auth-headers", "entry 'X-Tenant\\n': not a header name"),
    ({"X-Original-URL": "http://x/"}, "auth-headers", "entry 'X-Original-URL': pyngress sets this header itself"),
    ({"X-Tenant": "a"}, "other/auth-headers", "auth-proxy-set-headers other/auth-headers is in another namespace"),
])
def test_an_unusable_auth_proxy_set_headers_configmap_denies_the_paths(cluster, configmap, reference, problem):
    if configmap is not None:
        headers_configmap(cluster, configmap, ns=reference.split("/")[0] if "/" in reference else "default")
    cluster.app(annotations={"auth-url": URL, "auth-proxy-set-headers": reference})
    model = cluster.build()
    assert route_profile(model) == DENIED_PROFILE
    [rejection] = cluster.rejections(model)
    assert problem in rejection and "its paths answer 503 until the ConfigMap is" in rejection


def test_nginx_conf_has_an_internal_location_per_profile_and_the_auth_request(cluster):
    cluster.app(annotations={"auth-url": URL, "auth-signin": "https://$host/start", "auth-response-headers": "X-User"})
    model = cluster.build()
    name = route_profile(model).name
    conf = render(model.config)
    assert f"location = /_pyngress_auth_{name} {{\n            internal;" in conf
    assert f"auth_request /_pyngress_auth_{name};" in conf
    assert f'set $pyngress_auth_url "{URL}";' in conf
    assert f"resolver {' '.join(system_resolvers())} valid=30s;" in conf
    assert 'proxy_set_header "X-User" $pyngress_auth_response_0;' in conf
    assert f"error_page 401 = @pyngress_signin_{name};" in conf
    # The signin URL goes to Lua as a string whose '$' is an escape, never an nginx variable.
    assert 'signin("https://\\36host/start", "rd")' in conf


def test_the_router_variables_are_set_in_location_slash_where_no_subrequest_runs_them_again(cluster):
    # A subrequest (auth, mirror) shares the request's variables and runs the server-level `set`s again: the
    # backend, the HSTS value and the client-certificate values the router chose must not be set there.
    cluster.app(annotations={"auth-url": URL})
    conf = render(cluster.build().config)
    assert re.findall(r"^        set \$(\w+) ", conf, re.MULTILINE) == []
    router = conf[conf.index("        location / {"):conf.index("require(\"pyngress.router\").route()")]
    for variable in ("proxy_upstream_name", "pyngress_hsts", "pyngress_client_verify", "pyngress_metric"):
        assert f"            set ${variable} " in router, variable
def test_system_resolvers(tmp_path):
    conf = tmp_path / "resolv.conf"
    conf.write_text("# comment\nnameserver 10.96.0.10\nnameserver fe80::1%eth0\nnameserver bogus\n"
                    "search svc.cluster.local\nnameserver 10.96.0.10\n")
    assert system_resolvers(conf) == ("10.96.0.10", "[fe80::1]")
    assert system_resolvers(tmp_path / "missing") == ("127.0.0.1",)


# --- the ConfigMap's global-auth-* keys ----------------------------------------------------------------

GLOBAL = {"global-auth-url": URL, "global-auth-signin": "https://login/s",
          "global-auth-response-headers": "X-User"}


def profile_of(model, host):
    name = model.routes[host].prefix["/"].profile
    [profile] = [p for p in model.config.profiles if p.name == name]
    return profile


def test_global_auth_applies_unless_the_ingress_has_its_own_or_opts_out(cluster):
    cluster.configmap(GLOBAL)
    cluster.app("plain", host="plain.example.com")
    cluster.app("own", host="own.example.com", annotations={"auth-url": "http://other/check"})
    cluster.app("out", host="out.example.com", annotations={"enable-global-auth": "false"})
    model = cluster.build()
    assert profile_of(model, "plain.example.com").external_auth == ExternalAuth(
        url=URL, signin="https://login/s", response_headers=("X-User",))
    assert profile_of(model, "own.example.com").external_auth.url == "http://other/check"
    assert profile_of(model, "out.example.com").name == "default"
    assert cluster.rejections(model) == [] and cluster.warnings(model) == []


@pytest.mark.parametrize("key, value", [
    ("global-auth-url", "http://$remote_addr/check"), ("global-auth-method", "BREW"),
    ("global-auth-response-headers", "Host"), ("global-auth-snippet", "return 200;"),
])
def test_a_bad_global_auth_key_denies_the_ingresses_it_covers(cluster, key, value):
    # Fail closed: the paths that global authentication protects answer 503, never without it.
    cluster.configmap({**GLOBAL, key: value})
    cluster.app("plain", host="plain.example.com")
    cluster.app("out", host="out.example.com", annotations={"enable-global-auth": "false"})
    model = cluster.build()
    assert profile_of(model, "plain.example.com") == DENIED_PROFILE
    assert profile_of(model, "out.example.com").name == "default"
    rejections = cluster.rejections(model)
    assert any(r.startswith(f"ConfigMap ingress/ingress-nginx-controller: key {key} value {value!r}: ")
               for r in rejections), rejections
    assert (f"Ingress default/plain: the ConfigMap's {key} is invalid; this Ingress's paths answer 503 until it "
            "is fixed (or set enable-global-auth: \"false\" on it)") in rejections


def test_global_auth_options_without_global_auth_url_are_ignored_with_a_warning(cluster):
    cluster.configmap({"global-auth-signin": "https://login/s"})
    cluster.app()
    model = cluster.build()
    assert profile_of(model, "app.example.com").name == "default"
    assert cluster.warnings(model) == ["warning: ConfigMap ingress/ingress-nginx-controller: key global-auth-signin "
                                       "has no effect without global-auth-url; ignored"]

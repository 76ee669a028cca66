"""`pyngress convert`: each annotation's mapping, the report, and the YAML round trip."""
from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from services.tools.gateway_convert import GatewayOptions, convert
from services.tools.lint import Located
from tests.support import k8s

PREFIX = "nginx.ingress.kubernetes.io"
HOST = "app.example.com"


def _convert(*objects: dict, options: GatewayOptions | None = None, ingress_class: str | None = None):
    return convert([Located(f"in.yaml:{i + 1}", obj) for i, obj in enumerate(objects)], options,
                   ingress_class=ingress_class)


def _app(annotations: dict[str, str] | None = None, *paths, name: str = "app", tls: list[dict] | None = None,
         namespace: str = "default", host: str | None = HOST, **kwargs) -> dict:
    paths = paths or (("/", "Prefix", "web", 80),)
    return k8s.ingress(name, [k8s.rule(host, *paths)], namespace=namespace,
                       annotations={f"{PREFIX}/{k}": v for k, v in (annotations or {}).items()}, tls=tls, **kwargs)


def _of(resources: list[dict], kind: str) -> list[dict]:
    return [r for r in resources if r["kind"] == kind]


def _route(conversion, name: str = "app") -> dict:
    return next(r for r in _of(conversion.resources, "HTTPRoute") if r["metadata"]["name"] == name)


def _rules(conversion, name: str = "app") -> list[dict]:
    return _route(conversion, name)["spec"]["rules"]


def test_a_plain_ingress_becomes_a_class_a_gateway_and_a_route_on_the_http_listener():
    conversion = _convert(_app(None, ("/", "Prefix", "web", 80), ("/exact", "Exact", "web", 80),
                               ("/impl", "ImplementationSpecific", "web", 8080)))
    assert conversion.report == []
    [gateway_class] = _of(conversion.resources, "GatewayClass")
    assert gateway_class["spec"] == {"controllerName": "pyngress.io/gateway-controller"}
    [gateway] = _of(conversion.resources, "Gateway")
    assert gateway["spec"] == {"gatewayClassName": "pyngress",
                               "listeners": [{"name": "http", "protocol": "HTTP", "port": 80}]}
    route = _route(conversion)
    assert route["spec"]["parentRefs"] == [{"name": "pyngress", "sectionName": "http"}]
    assert route["spec"]["hostnames"] == [HOST]
    assert [(r["matches"][0]["path"], r["backendRefs"]) for r in route["spec"]["rules"]] == [
        ({"type": "PathPrefix", "value": "/"}, [{"name": "web", "port": 80}]),
        ({"type": "Exact", "value": "/exact"}, [{"name": "web", "port": 80}]),
        ({"type": "PathPrefix", "value": "/impl"}, [{"name": "web", "port": 8080}])]


def test_tls_hosts_get_https_listeners_and_the_http_listener_redirects_them():
    conversion = _convert(_app(tls=[{"hosts": [HOST], "secretName": "app-tls"}]))
    [gateway] = _of(conversion.resources, "Gateway")
    assert gateway["spec"]["listeners"][1] == {
        "name": "https-app-example-com", "protocol": "HTTPS", "port": 443, "hostname": HOST,
        "tls": {"mode": "Terminate", "certificateRefs": [{"group": "", "kind": "Secret", "name": "app-tls"}]}}
    assert _route(conversion)["spec"]["parentRefs"] == [{"name": "pyngress", "sectionName": "https-app-example-com"}]
    redirect = _route(conversion, "app-to-https")
    assert redirect["spec"]["parentRefs"] == [{"name": "pyngress", "sectionName": "http"}]
    assert redirect["spec"]["rules"] == [{"filters": [{"type": "RequestRedirect", "requestRedirect": {
        "scheme": "https", "statusCode": 308}}]}]


def test_ssl_redirect_false_serves_both_listeners_and_force_ssl_redirect_redirects_without_tls():
    kept = _convert(_app({"ssl-redirect": "false"}, tls=[{"hosts": [HOST], "secretName": "app-tls"}]))
    assert [p["sectionName"] for p in _route(kept)["spec"]["parentRefs"]] == ["http", "https-app-example-com"]
    assert not [r for r in _of(kept.resources, "HTTPRoute") if r["metadata"]["name"].endswith("to-https")]
    forced = _convert(_app({"force-ssl-redirect": "true"}))
    assert _route(forced, "app-to-https")["spec"]["hostnames"] == [HOST]
    assert any("force-ssl-redirect: host app.example.com has no certificate" in line for line in forced.report)


def test_secrets_in_another_namespace_than_the_gateway_get_a_reference_grant():
    conversion = _convert(_app(namespace="shop", tls=[{"hosts": [HOST], "secretName": "app-tls"}]),
                          options=GatewayOptions(namespace="gateways"))
    [gateway] = _of(conversion.resources, "Gateway")
    assert gateway["spec"]["listeners"][1]["tls"]["certificateRefs"][0]["namespace"] == "shop"
    assert gateway["spec"]["listeners"][0]["allowedRoutes"] == {"namespaces": {"from": "All"}}
    [grant] = _of(conversion.resources, "ReferenceGrant")
    assert grant["metadata"]["namespace"] == "shop"
    assert grant["spec"] == {"from": [{"group": "gateway.networking.k8s.io", "kind": "Gateway",
                                       "namespace": "gateways"}],
                             "to": [{"group": "", "kind": "Secret", "name": "app-tls"}]}
    assert _route(conversion)["spec"]["parentRefs"][0]["namespace"] == "gateways"


def test_the_oldest_ingress_keeps_a_tls_host_and_the_other_is_reported():
    older = _app(name="older", tls=[{"hosts": [HOST], "secretName": "one"}], created="2023-01-01T00:00:00Z")
    newer = _app(name="newer", tls=[{"hosts": [HOST], "secretName": "two"}], created="2024-01-01T00:00:00Z")
    conversion = _convert(newer, older)
    [gateway] = _of(conversion.resources, "Gateway")
    assert gateway["spec"]["listeners"][1]["tls"]["certificateRefs"][0]["name"] == "one"
    assert any("Ingress default/newer: spec.tls host app.example.com: the listener already has Secret default/one"
               in line for line in conversion.report)
    # Both routes claim the host's "/": each keeps its Ingress's age, so that the older still wins.
    assert {r["metadata"]["name"]: r["metadata"]["creationTimestamp"] for r in _of(conversion.resources, "HTTPRoute")
            if not r["metadata"]["name"].endswith("to-https")} == {"older": "2023-01-01T00:00:00Z",
                                                                   "newer": "2024-01-01T00:00:00Z"}


@pytest.mark.parametrize("path, target, match, rewrite", [
    ("/api(/|$)(.*)", "/$2", {"type": "PathPrefix", "value": "/api"},
     {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/"}),
    ("/api(/|$)(.*)", "/v2/$2", {"type": "PathPrefix", "value": "/api"},
     {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/v2"}),
    ("/old", "/new", {"type": "RegularExpression", "value": "(?i)(?:/old).*"},
     {"type": "ReplaceFullPath", "replaceFullPath": "/new"}),
])
def test_rewrite_target_maps_its_prefix_and_fixed_forms(path, target, match, rewrite):
    conversion = _convert(_app({"rewrite-target": target}, (path, "ImplementationSpecific", "web", 80)))
    assert conversion.report == []
    [rule] = _rules(conversion)
    assert rule["matches"] == [{"path": match}]
    assert rule["filters"] == [{"type": "URLRewrite", "urlRewrite": {"path": rewrite}}]


def test_a_rewrite_with_captures_it_cannot_map_is_reported_and_its_path_left_out():
    conversion = _convert(_app({"rewrite-target": "/item/$1"}, ("/items/(\\d+)", "ImplementationSpecific", "web", 80),
                               ("/exact", "Exact", "web", 80)))
    [exact] = _rules(conversion)  # an Exact path has no captures: $1 is empty, as in pyngress
    assert (exact["matches"][0]["path"]["value"], exact["filters"][0]["urlRewrite"]["path"]) == (
        "/exact", {"type": "ReplaceFullPath", "replaceFullPath": "/item/"})
    assert conversion.report == ["in.yaml:1: Ingress default/app: host app.example.com path /items/(\\d+): not "
                                 "converted: rewrite-target /item/$1 takes capture groups of path /items/(\\d+): an "
                                 "HTTPRoute rewrites a path prefix or the whole path only (the prefix form is path "
                                 "/app(/|$)(.*) with rewrite-target /$2)"]


def test_use_regex_makes_the_hosts_paths_case_insensitive_regular_expressions_longest_first():
    regex = _app({"use-regex": "true"}, ("/a", "ImplementationSpecific", "web", 80),
                 ("/a/[0-9]+", "ImplementationSpecific", "web", 80), ("/e", "Exact", "web", 80))
    other = _app(None, ("/b", "Prefix", "web", 80), name="other")  # same host: regex too, as in ingress-nginx
    conversion = _convert(regex, other)
    assert [r["matches"][0]["path"] for r in _rules(conversion)] == [
        {"type": "RegularExpression", "value": "(?i)(?:/a/[0-9]+).*"},
        {"type": "RegularExpression", "value": "(?i)(?:/a).*"}, {"type": "Exact", "value": "/e"}]
    assert _rules(conversion, "other")[0]["matches"][0]["path"] == {"type": "RegularExpression",
                                                                    "value": "(?i)(?:/b).*"}


@pytest.mark.parametrize("annotations, redirect", [
    ({"permanent-redirect": "https://new.example.com/landing"},
     {"statusCode": 301, "scheme": "https", "hostname": "new.example.com",
      "path": {"type": "ReplaceFullPath", "replaceFullPath": "/landing"}}),
    ({"temporal-redirect": "http://new.example.com:8080", "temporal-redirect-code": "307"},
     {"statusCode": 307, "scheme": "http", "hostname": "new.example.com", "port": 8080,
      "path": {"type": "ReplaceFullPath", "replaceFullPath": "/"}}),
])
def test_redirect_annotations_become_request_redirects_without_backends(annotations, redirect):
    conversion = _convert(_app(annotations))
    assert conversion.report == []
    assert _rules(conversion) == [{"matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                                   "filters": [{"type": "RequestRedirect", "requestRedirect": redirect}]}]


def test_a_redirect_code_or_query_the_gateway_api_cannot_say_is_reported():
    conversion = _convert(_app({"permanent-redirect": "https://x.example.com/?a=1", "permanent-redirect-code": "300"}))
    assert _rules(conversion)[0]["filters"][0]["requestRedirect"]["statusCode"] == 301
    assert sorted(line.split(": ", 3)[2:] for line in conversion.report) == [
        [f"annotation {PREFIX}/permanent-redirect",
         "the query string or fragment of https://x.example.com/?a=1 has no RequestRedirect field; the redirect "
         "leaves it out"],
        [f"annotation {PREFIX}/permanent-redirect-code",
         "a RequestRedirect answers 301, 302, 303, 307 or 308, not 300; 301 is used"]]


def test_app_root_redirects_exact_slash():
    rules = _rules(_convert(_app({"app-root": "/app"})))
    assert rules[0] == {"matches": [{"path": {"type": "Exact", "value": "/"}}], "filters": [
        {"type": "RequestRedirect", "requestRedirect": {
            "path": {"type": "ReplaceFullPath", "replaceFullPath": "/app"}, "statusCode": 302}}]}


def test_headers_host_and_timeouts_become_filters_and_timeouts():
    headers = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "hdrs", "namespace": "default"},
               "data": {"X-Frame-Options": "DENY"}}
    conversion = _convert(_app({"x-forwarded-prefix": "/app", "upstream-vhost": "internal.example.com",
                                "custom-headers": "hdrs", "proxy-read-timeout": "90", "proxy-send-timeout": "30"}),
                          headers)
    assert conversion.report == []
    [rule] = _rules(conversion)
    assert rule["filters"] == [
        {"type": "RequestHeaderModifier", "requestHeaderModifier": {"set": [{"name": "X-Forwarded-Prefix",
                                                                              "value": "/app"}]}},
        {"type": "ResponseHeaderModifier", "responseHeaderModifier": {"set": [{"name": "X-Frame-Options",
                                                                                "value": "DENY"}]}},
        {"type": "URLRewrite", "urlRewrite": {"hostname": "internal.example.com"}}]
    assert rule["timeouts"] == {"backendRequest": "1m30s"}


def test_a_custom_headers_configmap_not_given_is_reported():
    conversion = _convert(_app({"custom-headers": "missing"}))
    assert "filters" not in _rules(conversion)[0]
    assert conversion.report == [f"in.yaml:1: Ingress default/app: annotation {PREFIX}/custom-headers: ConfigMap "
                                 "default/missing is not among the objects read; give it with the Ingresses to "
                                 "convert its headers"]


def test_canary_weight_splits_the_main_rules_backends():
    canary = _app({"canary": "true", "canary-weight": "25"}, ("/", "Prefix", "web-v2", 80), name="app-canary")
    conversion = _convert(_app(), canary)
    assert conversion.report == []
    assert [r["metadata"]["name"] for r in _of(conversion.resources, "HTTPRoute")] == ["app"]
    assert _rules(conversion)[0]["backendRefs"] == [{"name": "web", "port": 80, "weight": 75},
                                                    {"name": "web-v2", "port": 80, "weight": 25}]


def test_canary_by_header_always_and_never_and_by_value():
    by_header = _convert(_app(), _app({"canary": "true", "canary-by-header": "X-Canary"},
                                      ("/", "Prefix", "web-v2", 80), name="c"))
    assert [(r["matches"][0].get("headers"), r["backendRefs"]) for r in _rules(by_header)] == [
        (None, [{"name": "web", "port": 80}]),
        ([{"name": "X-Canary", "value": "always"}], [{"name": "web-v2", "port": 80}]),
        ([{"name": "X-Canary", "value": "never"}], [{"name": "web", "port": 80}])]
    by_value = _convert(_app(), _app({"canary": "true", "canary-by-header": "X-Canary",
                                      "canary-by-header-value": "yes"}, ("/", "Prefix", "web-v2", 80), name="c"))
    assert [r["matches"][0].get("headers") for r in _rules(by_value)] == [None, [{"name": "X-Canary", "value": "yes"}]]


def test_a_canary_in_another_namespace_gets_a_reference_grant_for_its_service():
    canary = _app({"canary": "true", "canary-weight": "10"}, ("/", "Prefix", "web-v2", 80), name="c", namespace="b")
    conversion = _convert(_app(), canary)
    assert _rules(conversion)[0]["backendRefs"][1] == {"name": "web-v2", "port": 80, "namespace": "b", "weight": 10}
    [grant] = _of(conversion.resources, "ReferenceGrant")
    assert (grant["metadata"]["namespace"], grant["spec"]["from"][0]["kind"], grant["spec"]["to"]) == (
        "b", "HTTPRoute", [{"group": "", "kind": "Service", "name": "web-v2"}])


def test_a_canary_without_a_main_rule_and_a_cookie_canary_are_reported():
    canary = _app({"canary": "true", "canary-by-cookie": "beta"}, ("/other", "Prefix", "web-v2", 80), name="c")
    conversion = _convert(_app(), canary)
    assert conversion.report == [
        f"in.yaml:2: Ingress default/c: annotation {PREFIX}/canary-by-cookie: not converted: the Gateway API has "
        "no cookie match",
        "in.yaml:2: Ingress default/c: canary host app.example.com path /other: no other Ingress has a rule for it; "
        "not converted"]


def test_access_control_keeps_the_whole_ingress_out():
    conversion = _convert(_app({"auth-url": "http://auth.example.com/check"}))
    assert _of(conversion.resources, "HTTPRoute") == []
    assert conversion.report[0].startswith(f"in.yaml:1: Ingress default/app: annotation {PREFIX}/auth-url: not "
                                           "converted: it controls access")
    assert conversion.report[1] == "in.yaml:1: Ingress default/app: not converted (see above)"


def test_default_backend_is_the_catch_all_or_the_hosts_unmatched_paths():
    alone = k8s.ingress("catch-all", None, default_backend=("fallback", 80))
    conversion = _convert(alone, _app(None, ("/x", "Prefix", "web", 80), default_backend=("fallback", 80)))
    assert "hostnames" not in _route(conversion, "catch-all")["spec"]
    assert _rules(conversion, "catch-all") == [{"matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                                                "backendRefs": [{"name": "fallback", "port": 80}]}]
    assert [r["matches"][0]["path"]["value"] for r in _rules(conversion)] == ["/x", "/"]


def test_ingress_class_keeps_only_that_classs_ingresses():
    legacy = _app(name="legacy", class_name=None, host="legacy.example.com")
    legacy["metadata"]["annotations"] = {"kubernetes.io/ingress.class": "nginx"}
    other = _app(name="other", class_name="traefik", host="other.example.com")
    routes = _of(_convert(_app(), legacy, other, ingress_class="nginx").resources, "HTTPRoute")
    assert [r["metadata"]["name"] for r in routes] == ["app", "legacy"]
    assert len(_of(_convert(_app(), legacy, other).resources, "HTTPRoute")) == 3


def test_hosts_with_different_paths_get_routes_of_their_own():
    ingress = k8s.ingress("two", [k8s.rule("a.example.com", ("/", "Prefix", "web", 80)),
                                  k8s.rule("b.example.com", ("/", "Prefix", "web", 80)),
                                  k8s.rule("c.example.com", ("/c", "Prefix", "web", 80))])
    routes = _of(_convert(ingress).resources, "HTTPRoute")
    assert [(r["metadata"]["name"], r["spec"]["hostnames"]) for r in routes] == [
        ("two", ["a.example.com", "b.example.com"]), ("two-2", ["c.example.com"])]


def test_port_names_are_resolved_from_the_service_or_reported():
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "default"},
               "spec": {"ports": [{"name": "http", "port": 8080}]}}
    named = _app(None, ("/", "Prefix", "web", "http"), ("/x", "Prefix", "other", "http"))
    conversion = _convert(named, service)
    assert [r["backendRefs"] for r in _rules(conversion)] == [[{"name": "web", "port": 8080}]]
    assert conversion.report == ["in.yaml:1: Ingress default/app: host app.example.com path /x: not converted: port "
                                 "'http' of Service default/other is a name, and a backendRef needs the number: give "
                                 "the Service with the Ingresses, or write the number"]


def test_every_other_annotation_is_named_in_the_report_with_why():
    conversion = _convert(_app({"proxy-body-size": "8m", "enable-cors": "true", "no-such-thing": "1",
                                "proxy-read-timeout": "ten"}))
    reasons = {line.split(": ")[2]: line.split(": ", 3)[3] for line in conversion.report}
    assert reasons == {
        f"annotation {PREFIX}/enable-cors": "not converted: the Gateway API's CORS filter is not in its standard channel",
        f"annotation {PREFIX}/no-such-thing": "not converted: not an annotation ingress-nginx or pyngress reads",
        f"annotation {PREFIX}/proxy-body-size": "not converted: an nginx setting with no Gateway API field; "
                                                "pyngress's default applies to the route",
        f"annotation {PREFIX}/proxy-read-timeout": reasons[f"annotation {PREFIX}/proxy-read-timeout"]}
    assert reasons[f"annotation {PREFIX}/proxy-read-timeout"].startswith("invalid value 'ten'")
    assert "timeouts" not in _rules(conversion)[0]


def test_the_command_prints_yaml_that_reads_back_and_the_report_on_stderr(tmp_path):
    manifests = tmp_path / "in"
    manifests.mkdir()
    (manifests / "app.yaml").write_text(yaml.safe_dump_all([
        _app({"rewrite-target": "/$2", "proxy-body-size": "1m"}, ("/api(/|$)(.*)", "ImplementationSpecific", "web", 80),
             tls=[{"hosts": [HOST], "secretName": "tls"}]),
        _app({"canary": "true", "canary-weight": "5"}, ("/api(/|$)(.*)", "ImplementationSpecific", "v2", 80),
             name="app-canary")]))
    done = subprocess.run([sys.executable, "-m", "services.cli", "convert", "--manifests", str(manifests),
                           "--gateway-class", "gw", "--gateway-controller-name", "example.com/gw",
                           "--gateway-name", "edge", "--gateway-namespace", "infra", "--https-port", "8443"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 1, done.stderr
    documents = list(yaml.safe_load_all(done.stdout))
    expected = convert([Located(f"{manifests / 'app.yaml'}:1", d) for d in yaml.safe_load_all(
        (manifests / "app.yaml").read_text())],
        GatewayOptions(class_name="gw", controller_name="example.com/gw", name="edge", namespace="infra",
                       https_port=8443))
    assert documents == expected.resources
    assert [d["kind"] for d in documents] == ["GatewayClass", "Gateway", "ReferenceGrant", "HTTPRoute", "HTTPRoute"]
    assert "&id" not in done.stdout
    assert done.stderr.splitlines() == [f"{manifests / 'app.yaml'}:1: Ingress default/app: annotation "
                                        f"{PREFIX}/proxy-body-size: not converted: an nginx setting with no Gateway "
                                        "API field; pyngress's default applies to the route"]


def test_the_report_can_go_to_a_file_and_an_empty_report_exits_0(tmp_path):
    source = tmp_path / "in.yaml"
    source.write_text(yaml.safe_dump(_app()))
    report = tmp_path / "report.txt"
    done = subprocess.run([sys.executable, "-m", "services.cli", "convert", "-f", str(source), "--report", str(report)],
                          capture_output=True, text=True, check=False)
    assert (done.returncode, done.stderr, report.read_text()) == (0, "", "")
    assert [d["kind"] for d in yaml.safe_load_all(done.stdout)] == ["GatewayClass", "Gateway", "HTTPRoute"]

"""Every annotation of the registry, table-driven: a value it accepts builds the Ingress without a problem
naming it, a value it refuses is set aside as ingress-nginx does (ignored with a warning, or its paths denied
for an access-control annotation) or, for a value pyngress does not implement, rejects the Ingress, each with a
message naming the annotation and the value, and an
annotation the registry says is applied without a reload (ingress-nginx decides it per request, in Lua) changes
the pushed tables and leaves nginx.conf exactly as it was: nginx_ingress_controller_success stays put."""
from __future__ import annotations

import pytest

from services.nginxconf.render import render
from services.syncer.annotations import ANNOTATIONS
from services.syncer.model.types import Model
from tests.support.annotation_cluster import FUZZED_HOST, GOOD_HOST, cluster_with_good_ingress, with_companions
from tests.support.model_cluster import Cluster

PREFIX = "nginx.ingress.kubernetes.io"

# name: (a value it accepts, or None when pyngress refuses every value; a value it refuses)
VALUES: dict[str, tuple[str | None, str]] = {
    "affinity": ("cookie", "ip"),
    "affinity-canary-behavior": ("legacy", "x"),
    "affinity-mode": ("persistent", "x"),
    "allowlist-source-range": ("10.0.0.0/8", "10.0.0.0/33"),
    "app-root": ("/app", "app"),
    "auth-always-set-cookie": ("true", "maybe"),
    "auth-cache-duration": ("200 202 401 5m", "5x"),
    "auth-cache-key": ("$remote_user$http_authorization", "$hostname"),
    "auth-keepalive": ("10", "-1"),
    "auth-keepalive-requests": ("100", "x"),
    "auth-keepalive-share-vars": ("true", "x"),
    "auth-keepalive-timeout": ("30", "x"),
    "auth-method": ("POST", "BREW"),
    "auth-proxy-set-headers": ("auth-headers", "a/b/c"),
    "auth-realm": ("Staff only", 'a"b'),
    "auth-request-redirect": ("/home", "a b"),
    "auth-response-headers": ("X-User,X-Email", "X User"),
    "auth-secret": ("basic-auth", "a/b/c"),
    "auth-secret-type": ("auth-file", "htpasswd"),
    "auth-signin": ("https://login.example.com/start?rd=$escaped_request_uri", "https://$hostname/x"),
    "auth-signin-redirect-param": ("redirect_to", "a b"),
    "auth-snippet": ("proxy_set_header X-Snippet 1;", "proxy_set_header X-Snippet 1; }"),
    "auth-tls-error-page": ("/denied", "/a b"),
    "auth-tls-match-cn": ("CN=client", "CN=("),
    "auth-tls-pass-certificate-to-upstream": ("true", "x"),
    "auth-tls-secret": ("default/ca", "default/ca/x"),
    "auth-tls-verify-client": ("optional", "maybe"),
    "auth-tls-verify-depth": ("2", "x"),
    "auth-type": ("basic", "ntlm"),
    "auth-url": ("http://auth.example.com/check", "ftp://auth.example.com/"),
    "backend-protocol": ("GRPC", "SPDY"),
    "canary": ("true", "maybe"),
    "canary-by-cookie": ("canary", "a;b"),
    "canary-by-header": ("X-Canary", "a b"),
    "canary-by-header-pattern": ("^blue$", "("),
    "canary-by-header-value": ("blue", "é"),
    "canary-weight": ("30", "x"),
    "canary-weight-total": ("200", "x"),
    "client-body-buffer-size": ("16k", "16q"),
    "configuration-snippet": ("add_header X-Snippet 1;", "add_header X-Snippet 1; }"),
    "connection-proxy-header": ("close", "a b"),
    "cors-allow-credentials": ("false", "x"),
    "cors-allow-headers": ("X-Api-Key", "X Bad"),
    "cors-allow-methods": ("GET,POST", "G ET"),
    "cors-allow-origin": ("https://a.example.com", "ftp://a.example.com"),
    "cors-expose-headers": ("X-Total", "X Bad"),
    "cors-max-age": ("600", "x"),
    "custom-headers": ("auth-headers", "a/b/c"),
    "custom-http-errors": ("404,503", "600"),
    "default-backend": ("good", "x;y"),
    "denylist-source-range": ("10.0.0.0/8", "bad"),
    "disable-proxy-intercept-errors": ("true", "x"),
    "enable-access-log": ("false", "x"),
    "enable-cors": ("true", "x"),
    "enable-global-auth": ("false", "x"),
    "enable-modsecurity": ("true", "x"),
    "enable-owasp-core-rules": ("true", "x"),
    "enable-rewrite-log": ("true", "x"),
    "enable-opentelemetry": ("true", "x"),
    "opentelemetry-trust-incoming-span": ("false", "x"),
    "opentelemetry-operation-name": ("checkout", "a b"),
    "fastcgi-index": ("index.php", "index php"),
    "fastcgi-params-configmap": ("fastcgi-params", "a/b/c"),
    "force-ssl-redirect": ("true", "x"),
    "from-to-www-redirect": ("true", "x"),
    "http2-push-preload": ("true", "maybe"),
    "limit-allowlist": ("10.0.0.0/8", "bad"),
    "limit-burst-multiplier": ("3", "x"),
    "limit-connections": ("5", "x"),
    "limit-rate": ("1024", "x"),
    "limit-rate-after": ("1024", "x"),
    "limit-rph": (None, "60"),
    "limit-rpm": ("60", "x"),
    "limit-rps": ("5", "x"),
    "limit-whitelist": ("10.0.0.0/8", "bad"),
    "load-balance": ("ewma", "least_conn"),
    "mirror-host": ("shadow.internal", "a b"),
    "mirror-request-body": ("off", "true"),
    "mirror-target": ("http://mirror.internal/copy", "ftp://m"),
    "modsecurity-snippet": ("SecRuleEngine On", "Include /etc/passwd"),
    "modsecurity-transaction-id": ("$request_id", "$hostname"),
    "permanent-redirect": ("https://new.example.com$request_uri", "https://new.example.com$hostname"),
    "permanent-redirect-code": ("308", "200"),
    "preserve-trailing-slash": ("true", "x"),
    "proxy-body-size": ("8m", "8q"),
    "proxy-buffer-size": ("8k", "8q"),
    "proxy-buffering": ("on", "maybe"),
    "proxy-buffers-number": ("8", "x"),
    "proxy-busy-buffers-size": ("8k", "x"),
    "proxy-connect-timeout": ("5", "5 s"),
    "proxy-cookie-domain": ("backend.internal example.com", "a b c"),
    "proxy-cookie-path": ("/app /", "a;b"),
    "proxy-http-version": ("1.0", "3"),
    "proxy-max-temp-file-size": ("1024m", "x"),
    "proxy-next-upstream": ("error timeout http_502", "bogus"),
    "proxy-next-upstream-timeout": ("10", "x"),
    "proxy-next-upstream-tries": ("2", "x"),
    "proxy-read-timeout": ("120", "x"),
    "proxy-redirect-from": ("http://backend.internal/", "a b"),
    "proxy-redirect-to": ("https://app.example.com/", "a b"),
    "proxy-request-buffering": ("off", "x"),
    "proxy-send-timeout": ("120", "x"),
    "proxy-ssl-ciphers": ("HIGH:!aNULL", "HIGH;"),
    "proxy-ssl-name": ("api.internal", "x;y"),
    "proxy-ssl-protocols": ("TLSv1.3", "SSLv3"),
    "proxy-ssl-secret": ("ca", "a/b/c"),
    "proxy-ssl-server-name": ("on", "yes"),
    "proxy-ssl-verify": ("on", "true"),
    "proxy-ssl-verify-depth": ("2", "x"),
    "relative-redirects": ("true", "x"),
    "rewrite-target": ("/$1", "/a b"),
    "server-alias": ("alias.example.com", "~^x$"),
    "satisfy": ("any", "some"),
    "server-snippet": ("location /snippet { return 204; }", "} server {"),
    "service-upstream": ("true", "x"),
    "session-cookie-change-on-failure": ("true", "x"),
    "session-cookie-conditional-samesite-none": ("true", "x"),
    "session-cookie-domain": (".example.com", "a b"),
    "session-cookie-expires": ("60", "x"),
    "session-cookie-max-age": ("60", "x"),
    "session-cookie-name": ("route", "a;b"),
    "session-cookie-path": ("/app", "app"),
    "session-cookie-samesite": ("Lax", "Maybe"),
    "session-cookie-secure": ("true", "x"),
    "ssl-ciphers": ("ECDHE-ECDSA-AES256-GCM-SHA384", "!aNULL"),
    "ssl-passthrough": ("true", "x"),
    "ssl-prefer-server-ciphers": ("false", "maybe"),
    "ssl-redirect": ("false", "x"),
    "stream-snippet": ("server { listen 127.0.0.1:9999; return ok; }", "} x {"),
    "temporal-redirect": ("https://new.example.com/", "ftp://new.example.com/"),
    "temporal-redirect-code": ("307", "200"),
    "upstream-hash-by": ("$request_uri", "plain"),
    "upstream-hash-by-subset": ("true", "x"),
    "upstream-hash-by-subset-size": ("5", "x"),
    "upstream-vhost": ("internal.example.com", "a b"),
    "use-port-in-redirects": ("true", "x"),
    "use-regex": ("true", "x"),
    "whitelist-source-range": ("10.0.0.0/8", "bad"),
    "x-forwarded-prefix": ("/api", "a b"),
}

# What else the Ingress (or the controller) needs for the annotation to mean something, beyond the companions
# the fuzz test uses.
_CONTEXT: dict[str, dict[str, str]] = {
    "upstream-hash-by-subset": {"upstream-hash-by": "$request_uri"},
    "upstream-hash-by-subset-size": {"upstream-hash-by": "$request_uri", "upstream-hash-by-subset": "true"},
    "disable-proxy-intercept-errors": {"custom-http-errors": "404"},
    "proxy-redirect-from": {"proxy-redirect-to": "https://app.example.com/"},
    "auth-snippet": {"auth-url": "http://127.0.0.1:9/check"},
    "affinity-canary-behavior": {"canary": "true"},
    **{name: {"auth-keepalive": "10"} for name in ("auth-keepalive-requests", "auth-keepalive-timeout",
                                                 "auth-keepalive-share-vars")},
}
_SNIPPETS = {"configuration-snippet", "server-snippet", "auth-snippet", "stream-snippet", "modsecurity-snippet"}


def build(name: str, value: str | None) -> Model:
    """The cluster with the Ingress "fuzz" carrying `name` (absent when `value` is None) and its context."""
    cluster = cluster_with_good_ingress()
    if name in _SNIPPETS:
        cluster.configmap({"allow-snippet-annotations": "true", "annotations-risk-level": "Critical"})
    if name == "custom-headers":
        cluster.configmap({"global-allowed-response-headers": "X-Tenant"})
    context = {k: v for k, v in with_companions({name: ""}).items() if k != name} | _CONTEXT.get(name, {})
    annotations = context | ({name: value} if value is not None else {})
    host = GOOD_HOST if "canary" in annotations else FUZZED_HOST  # a canary needs the main Ingress's host
    cluster.app("fuzz", host=host, annotations=annotations)
    return cluster.build(enable_ssl_passthrough=True)


def _about(model: Model, name: str) -> list[str]:
    return [line for line in model.problem_lines() if f"{PREFIX}/{name} " in line or f"{PREFIX}/{name}:" in line]


def test_the_table_lists_every_annotation():
    assert set(VALUES) == set(ANNOTATIONS)


@pytest.mark.parametrize("name", sorted(name for name, a in ANNOTATIONS.items() if a.default is not None))
def test_the_default_passes_its_own_validator_as_it_is(name):
    annotation = ANNOTATIONS[name]
    assert annotation.default is not None and annotation.validate(annotation.default) == annotation.default


@pytest.mark.parametrize("name", sorted(name for name, (accepted, _) in VALUES.items() if accepted is not None))
def test_the_accepted_value_is_taken(name):
    accepted = VALUES[name][0]
    model = build(name, accepted)
    assert _about(model, name) == [] and not any("default/fuzz" in line for line in model.problem_lines()
                                                 if not line.startswith("warning:")), model.problem_lines()


@pytest.mark.parametrize("name", sorted(name for name, (accepted, _) in VALUES.items() if accepted is not None))
def test_the_refused_value_is_set_aside_with_a_message(name):
    refused = VALUES[name][1]
    Cluster.set_aside(build(name, refused), name, refused, ingress="default/fuzz")


@pytest.mark.parametrize("name", sorted(name for name, (accepted, _) in VALUES.items() if accepted is None))
def test_a_value_pyngress_does_not_implement_rejects_the_ingress_with_a_message(name):
    refused = VALUES[name][1]
    [line] = _about(build(name, refused), name)
    assert line.startswith(f"Ingress default/fuzz: annotation {PREFIX}/{name} value {refused!r}: "), line
    assert len(line.split(": ", 2)[2]) > 20, f"the message should say what to write instead: {line}"


@pytest.mark.parametrize("name", sorted(n for n, a in ANNOTATIONS.items() if not a.reloads))
def test_an_annotation_applied_without_reload_changes_only_the_pushed_tables(name):
    without, with_it = build(name, None), build(name, VALUES[name][0])
    assert render(with_it.config) == render(without.config)

    def tables(model: Model) -> tuple:
        return model.routes_json(), model.backends, model.certificates, model.passthrough
    assert tables(with_it) != tables(without), f"{name} changed nothing the syncer pushes"


@pytest.mark.parametrize("name", sorted(n for n, a in ANNOTATIONS.items() if a.directive and VALUES[n][0] is not None))
def test_a_plain_directive_annotation_puts_its_directive_into_the_ingress_s_profile(name):
    annotation, accepted = ANNOTATIONS[name], VALUES[name][0]
    argument = annotation.argument(annotation.validate(accepted))
    model = build(name, accepted)
    profile = next(p for p in model.config.profiles if p.name == model.routes[FUZZED_HOST].prefix["/"].profile)
    if argument is None:  # the value that leaves the directive to nginx's default
        assert annotation.directive not in dict(profile.directives)
    else:
        assert (annotation.directive, argument) in profile.directives

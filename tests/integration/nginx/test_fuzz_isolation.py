"""Property tests: no value in one tenant's objects can stop the configuration of the others.

For every annotation, every ConfigMap key and the Ingress/Service spec fields, hypothesis generates values
that mix valid forms with hostile ones (nginx syntax, quotes, '$', control characters, non-ASCII, Lua
directive names, IPv6 zone ids, huge numbers). Each goes into a store beside one good Ingress on its own
host, and:
- build_model never raises;
- the fuzzed Ingress is either rejected (a problem names it and it has no routes) or served;
- either way render() writes an nginx.conf that the real `nginx -t` accepts, and the tables pushed to
  nginx's Lua serialize;
- read back as nginx reads it, that nginx.conf holds each value only as the arguments it was meant to be
  (tests/support/injection_check.py);
- the good Ingress is routed.
Runs are derandomized and database-less so that CI sees the same examples every time; `nginx -t` runs once
per distinct nginx.conf.
"""
from __future__ import annotations

import base64
import copy
import json
from dataclasses import replace
from typing import Any, Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.nginxconf.prefix import make_self_signed
from services.nginxconf.render import render
from services.nginxconf.table_schema import check_table
from services.syncer.annotations import ANNOTATIONS
from services.syncer.annotations.external_auth import GLOBAL_AUTH_KEYS
from services.syncer.model.auth_secrets import DENIED_PROFILE
from services.syncer.model.configmap import FIELDS, GLOBAL_DIRECTIVES, SERVER_FIELDS, UNSUPPORTED
from services.syncer.model.configmap_server_keys import ANNOTATION_DEFAULTS
from services.syncer.model.configmap_snippets import SNIPPET_KEYS
from services.syncer.model.types import Model
from services.syncer.nginx_apply.worker_files import write_root_only
from tests.support.annotation_cluster import (FUZZED, FUZZED_HOST, GOOD, GOOD_HOST, cluster_with_good_ingress,
                                              headers_configmap, with_companions)
from tests.support.injection_check import assert_values_stay_arguments
from tests.support.model_cluster import Cluster
from tests.support.nginx_check import NginxCheck, nginx_check_in_tmp
from tests.unit.syncer.test_annotation_table import VALUES as TABLE_VALUES

pytestmark = pytest.mark.long_file

FUZZ = settings(deadline=None, derandomize=True, database=None, max_examples=40)


# --- values -------------------------------------------------------------------------------------

HOSTILE_WORDS = (
    ";", "{", "}", "#", '"', "'", "\\", "$", "$host", "${x}", "\n", "\r\n", "\x00", "\t", " ", ",", "*", "%",
    "é", "\u212a", "\u017f", "\u0130", "\u2603", "\U0001f4a5", "\ufeff",
    "content_by_lua_block", "access_by_lua", "}; content_by_lua_block { os.execute('id') } #",
    "\"; return 200 \"x", "include /etc/passwd;", "--[[", "]]",
    "%eth0", "%$x", "%x;y", "%25", "99999999999999999999", "18446744073709551616", "2147483648", "-1", "0",
)
_HOSTILE_CHARS = list(";{}#\"'\\$\n\r\x00\t é%,*:/.-_=+@!()[]<>`|~^?&aZ09") + ["\u212a", "\U0001f4a5"]
hostile = st.one_of(st.sampled_from(HOSTILE_WORDS), st.text(st.sampled_from(_HOSTILE_CHARS), max_size=12),
                    st.text(max_size=8))


def _splice(valid: str, bad: str, at: int) -> str:
    return valid[:at] + bad + valid[at:]


def fuzzed(valid: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """Valid values, valid values with something hostile spliced in, and hostile values alone."""
    return st.one_of(valid, st.builds(_splice, valid, hostile, st.integers(0, 80)), hostile,
                     st.lists(st.one_of(valid, hostile), min_size=2, max_size=4).map(",".join))


def _number() -> st.SearchStrategy[int]:
    return st.one_of(st.integers(0, 10**4), st.sampled_from([2**31 - 1, 2**31, 2**32, 2**63, 10**20]),
                     st.integers(0, 10**22))


def _with_unit(units: list[str]) -> st.SearchStrategy[str]:
    return st.builds(lambda n, unit, zeros: "0" * zeros + f"{n}{unit}", _number(), st.sampled_from(units),
                     st.integers(0, 2))


durations = _with_unit(["", "ms", "s", "m", "h", "d", "y", "S", "M"])
sizes = _with_unit(["", "k", "m", "g", "K", "M", "G", "t", "mb"])
booleans = st.sampled_from(["true", "false", "1", "0", "t", "f", "TRUE", "False", "yes", "on"])
numbers = st.one_of(_number().map(str), st.integers(-10, 1000).map(str))
_label = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,8}[a-z0-9])?", fullmatch=True)
hostnames = st.one_of(
    st.lists(_label, min_size=1, max_size=4).map(".".join),
    st.sampled_from(["EXAMPLE.com", "a" * 63 + ".example.com", "a" * 64 + ".example.com", "x." * 126 + "io",
                     "10.0.0.1", "999.1.1.1", "localhost", "-a.example.com", "a_b.example.com"]),
)
ports = st.one_of(st.integers(0, 70000), st.sampled_from([65535, 65536, 99999, 0])).map(str)
host_and_ports = st.builds(lambda host, port: f"{host}:{port}" if port else host, hostnames, st.none() | ports)
_url_tail = st.text(st.sampled_from(list("abcXYZ019-._~%!&()*+,=:@/?#")), max_size=40)
urls = st.builds(lambda scheme, host, tail: f"{scheme}://{host}{'/' + tail if tail else ''}",
                 st.sampled_from(["http", "https", "HTTPS", "ftp", "javascript"]), host_and_ports, _url_tail)
origins = st.one_of(st.just("*"), st.builds(lambda scheme, star, host: f"{scheme}://{star}{host}",
                                            st.sampled_from(["http", "https"]), st.sampled_from(["", "*."]),
                                            host_and_ports))
_token = st.from_regex(r"[A-Za-z0-9_-]{1,30}", fullmatch=True)


def _letters(number: int) -> str:
    """A distinct run of letters for each number (list validators drop repeated items)."""
    text = ""
    while True:
        number, digit = divmod(number, 26)
        text += chr(ord("a") + digit)
        if not number:
            return text


def comma_lists(item: st.SearchStrategy[str], template: str) -> st.SearchStrategy[str]:
    """Short lists of `item`, and long lists of `template` with {} a distinct word each: long enough that,
    written as one Lua string, some exceed what nginx reads as one token of a Lua block."""
    short = st.lists(item, min_size=1, max_size=5).map(",".join)
    long = st.integers(20, 400).map(lambda n: ",".join(template.format(_letters(i)) for i in range(n)))
    return st.one_of(short, long)


_zone = st.sampled_from(["%eth0", "%$x", "%x;y", "%1", "%"])
networks = st.one_of(
    st.ip_addresses().map(str),
    st.builds(lambda address, bits: f"{address}/{bits}", st.ip_addresses().map(str), st.integers(0, 130)),
    st.builds(lambda address, zone, bits: f"{address}{zone}{bits}", st.ip_addresses(v=6).map(str), _zone,
              st.sampled_from(["", "", "/128", "/64"])),
)
network_lists = st.lists(networks, min_size=1, max_size=6).map(", ".join)
nginx_text = st.sampled_from(["more_set_headers 'X: y';", "return 200;", "content_by_lua_block { ngx.say(1) }"])
ciphers = st.lists(st.sampled_from(["ECDHE-RSA-AES128-GCM-SHA256", "HIGH", "!aNULL", "@SECLEVEL=0", "ALL",
                                    "TLS_AES_128_GCM_SHA256", "FOO", "DEFAULT", "+RSA", "-ALL"]),
                   min_size=1, max_size=4).map(":".join)

_cookie_paths = st.from_regex(r"/[A-Za-z0-9\-._~/]{0,20}", fullmatch=True)

# Valid forms of each annotation's value; `fuzzed` mixes hostile ones in. A plain directive annotation without
# a row here gets one derived from its description (derived_examples).
ANNOTATION_VALUES: dict[str, st.SearchStrategy[str]] = {
    "proxy-connect-timeout": durations, "proxy-send-timeout": durations, "proxy-read-timeout": durations,
    "proxy-body-size": sizes, "proxy-buffer-size": sizes,
    "proxy-buffering": st.sampled_from(["on", "off", "ON", "yes"]),
    "proxy-request-buffering": st.sampled_from(["on", "off", "Off"]),
    "proxy-http-version": st.sampled_from(["1.0", "1.1", "2", "1"]),
    "backend-protocol": st.sampled_from(["HTTP", "HTTPS", "https", "GRPC", "AJP", "FCGI", "AUTO_HTTP"]),
    "fastcgi-params-configmap": st.sampled_from(["fastcgi-params", "default/fastcgi-params", "other/fastcgi-params",
                                                 "missing", "A"]),
    **{name: st.one_of(urls, st.sampled_from(["https://n.example.com$request_uri", "https://n.example.com/$hostname",
                                              "https://$host$uri$is_args$args", "https://n.example.com/${uri}"]))
       for name in ("permanent-redirect", "temporal-redirect")},
    "permanent-redirect-code": numbers,
    "ssl-redirect": booleans, "force-ssl-redirect": booleans, "ssl-passthrough": booleans,
    "ssl-ciphers": ciphers, "ssl-prefer-server-ciphers": booleans,
    "enable-cors": booleans, "cors-allow-origin": comma_lists(origins, "https://*.{}.example.com:8443"),
    "cors-allow-methods": comma_lists(st.sampled_from(["GET", "POST", "PUT", "OPTIONS", "PROPFIND"]), "X{}"),
    "cors-allow-headers": comma_lists(st.one_of(_token, st.just("*")), "X_{}"),
    "cors-expose-headers": comma_lists(_token, "X-Long-{}"), "cors-allow-credentials": booleans,
    "cors-max-age": numbers,
    "allowlist-source-range": network_lists, "whitelist-source-range": network_lists,
    "upstream-vhost": host_and_ports, "service-upstream": booleans, "use-regex": booleans,
    "rewrite-target": st.sampled_from(["/$1", "/$2", "/api/$1/x", "/", "$host", "/a b"]),
    "app-root": st.one_of(_cookie_paths, st.sampled_from(["/", "app", "/a$b"])),
    "x-forwarded-prefix": st.one_of(_cookie_paths, st.sampled_from(["/", "api", "/a b"])),
    "canary": booleans, "canary-by-header": st.sampled_from(["X-Canary", "x_y", "a b"]),
    "canary-by-header-value": st.sampled_from(["blue", "a b", "é"]),
    "canary-by-header-pattern": st.sampled_from(["^blue$", "(", "a|b"]),
    "canary-by-cookie": st.sampled_from(["canary", "a.b", "c"]), "canary-weight": numbers,
    "canary-weight-total": numbers,
    "affinity": st.sampled_from(["cookie", "Cookie", "ip"]),
    "affinity-mode": st.sampled_from(["balanced", "persistent", "x"]),
    "affinity-canary-behavior": st.sampled_from(["sticky", "legacy", "x"]),
    "session-cookie-name": st.sampled_from(["INGRESSCOOKIE", "route", "a b", "a;b"]),
    "session-cookie-path": st.one_of(_cookie_paths, st.sampled_from(["app", "/a b"])),
    "session-cookie-max-age": numbers, "session-cookie-expires": numbers, "session-cookie-secure": booleans,
    "session-cookie-samesite": st.sampled_from(["None", "Lax", "Strict", "lax", "x"]),
    "load-balance": st.sampled_from(["round_robin", "ewma", "chash"]), "from-to-www-redirect": booleans,
    "upstream-hash-by": st.sampled_from(["$request_uri", "$http_x_user", "$host:$uri", "$remote_user", "x"]),
    "upstream-hash-by-subset": booleans, "upstream-hash-by-subset-size": numbers,
    "proxy-next-upstream": st.lists(st.sampled_from(["error", "timeout", "http_502", "non_idempotent", "off",
                                                     "http_418", "updating", ""]), min_size=1, max_size=4).map(" ".join),
    "proxy-next-upstream-timeout": durations, "proxy-next-upstream-tries": numbers,
    "proxy-redirect-from": st.one_of(urls, st.sampled_from(["off", "default", "/"])), "proxy-redirect-to": urls,
    "proxy-cookie-path": st.one_of(st.just("off"), st.builds("{} {}".format, _cookie_paths, _cookie_paths)),
    "proxy-cookie-domain": st.one_of(st.just("off"), st.builds("{} {}".format, hostnames, hostnames)),
    "proxy-buffers-number": numbers, "proxy-busy-buffers-size": sizes, "proxy-max-temp-file-size": sizes,
    "client-body-buffer-size": sizes,
    "connection-proxy-header": st.sampled_from(["keep-alive", "close", "upgrade", "Keep-Alive", "a b"]),
    "auth-tls-secret": st.sampled_from(["default/ca", "default/missing", "other/ca", "ca", "default/ca/x"]),
    "auth-tls-verify-client": st.sampled_from(["on", "off", "optional", "optional_no_ca", "ON", "maybe"]),
    "auth-tls-verify-depth": numbers, "auth-tls-pass-certificate-to-upstream": booleans,
    "auth-tls-error-page": st.one_of(urls, st.sampled_from(["/denied", "@named", "/a b"])),
    "auth-tls-match-cn": st.builds(lambda body: "CN=" + body, st.text(st.sampled_from(list("abc()|*$^.\\")),
                                                                      max_size=12)),
    "denylist-source-range": network_lists, "limit-allowlist": network_lists, "limit-whitelist": network_lists,
    **{name: numbers for name in ("limit-rps", "limit-rpm", "limit-connections", "limit-burst-multiplier",
                                  "limit-rate", "limit-rate-after", "limit-rph")},
    "auth-type": st.sampled_from(["basic", "BASIC", "digest", "ntlm"]),
    "auth-secret": st.sampled_from(["basic-auth", "default/basic-auth", "other/basic-auth", "missing", "Basic",
                                    "a/b/c", "../basic-auth"]),
    "auth-secret-type": st.sampled_from(["auth-file", "auth-map", "htpasswd"]),
    "auth-realm": st.one_of(st.sampled_from(["Authentication Required", "off", "OFF", "", "a/b:c~d"]),
                            st.text(max_size=30)),
    "auth-url": urls, "auth-method": st.sampled_from(["GET", "post", "HEAD", "BREW"]),
    "auth-signin": st.one_of(urls, st.sampled_from(["https://$host/oauth2/start?rd=$escaped_request_uri",
                                                    "https://$hostname/x", "https://login/$request_id"])),
    "auth-signin-redirect-param": st.sampled_from(["rd", "redirect_to", "a b", ""]),
    "auth-response-headers": comma_lists(_token, "X-Auth-{}"),
    "auth-request-redirect": st.one_of(urls, st.sampled_from(["/home", "$request_uri"])),
    "auth-always-set-cookie": booleans, "enable-global-auth": booleans, "auth-keepalive": numbers,
    "auth-keepalive-requests": numbers, "auth-keepalive-timeout": numbers, "auth-keepalive-share-vars": booleans,
    "proxy-ssl-secret": st.sampled_from(["ca", "default/ca", "other/ca", "missing", "Ca", "a/b/c"]),
    "proxy-ssl-verify": st.sampled_from(["on", "off", "true", "on;"]),
    "proxy-ssl-verify-depth": numbers,
    "proxy-ssl-ciphers": st.sampled_from(["DEFAULT", "HIGH:!aNULL", "!aNULL", "bogus", "HIGH;"]),
    "proxy-ssl-protocols": st.sampled_from(["TLSv1.2", "TLSv1.2 TLSv1.3", "SSLv3", "TLSv1.2;"]),
    "proxy-ssl-name": st.sampled_from(["api.internal", "$host", "a b", "x;y"]),
    "proxy-ssl-server-name": st.sampled_from(["on", "off", "yes"]),
    "default-backend": st.sampled_from(["good", "missing", "Bad", "a/b", "x;y"]),
    "custom-http-errors": comma_lists(st.sampled_from(["404", "503", "418", "200", "x", "600"]), "{},500"),
    "disable-proxy-intercept-errors": booleans,
    "mirror-target": st.one_of(urls, st.sampled_from(["https://m.example.com$request_uri", "http://m.example.com/$uri$is_args$args",
                                                      "http://m.example.com/$hostname", "http://$host/x", "ftp://m"])),
    "mirror-host": st.sampled_from(["shadow.internal", "shadow.internal:8080", "a b", "$host"]),
    "mirror-request-body": st.sampled_from(["on", "off", "true"]),
    "session-cookie-conditional-samesite-none": booleans, "session-cookie-change-on-failure": booleans,
    "session-cookie-domain": st.sampled_from([".example.com", "example.com", "a b", "$host", ".."]),
    "temporal-redirect-code": numbers, "preserve-trailing-slash": booleans, "enable-rewrite-log": booleans,
    "relative-redirects": booleans, "use-port-in-redirects": booleans,
    "custom-headers": st.sampled_from(["auth-headers", "default/auth-headers", "other/auth-headers", "missing", "A"]),
    "server-alias": st.one_of(st.sampled_from(["alias.example.com", "*.alias.example.com", "good.example.com",
                                               "a.example.com,b.example.com", "~^x$", "_"]), hostile),
    "auth-proxy-set-headers": st.sampled_from(["auth-headers", "default/auth-headers", "other/auth-headers",
                                               "missing", "Auth", "a/b/c", "../auth-headers"]),
    "auth-cache-key": st.sampled_from(["$remote_user$http_authorization", "$cookie_session", "x", "$hostname",
                                       "a:$arg_x-b"]),
    "auth-cache-duration": st.sampled_from(["200 202 401 5m", "5m", "1h 401", "200 1m, 401 30s", "any 99999d"]),
    "enable-access-log": booleans,
    **{name: nginx_text for name in ("configuration-snippet", "server-snippet", "auth-snippet", "stream-snippet",
                                     "modsecurity-snippet")},
    "enable-modsecurity": booleans, "enable-owasp-core-rules": booleans,
    "modsecurity-transaction-id": st.sampled_from(["$request_id", "$req_id", "$REQUEST_ID", "$hostname", "request_id"]),
    "enable-opentelemetry": booleans, "opentelemetry-trust-incoming-span": booleans,
    "opentelemetry-operation-name": st.one_of(st.sampled_from(["checkout", "a-b_c", "", "$uri", "a b"]), hostile),
}

header_patterns = st.one_of(
    st.text(st.sampled_from(list("abcXYZ019-._/:() ")), min_size=1, max_size=20),
    st.builds(lambda flags, body: flags + body, st.sampled_from(["~", "~*"]),
              st.text(st.sampled_from(list("abc019.^$*+?()[]{}|\\-/ ")), max_size=20)))

_protocols = st.lists(st.sampled_from(["TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3", "SSLv3", ""]), min_size=1,
                      max_size=4).map(" ".join)
CONFIGMAP_VALUES: dict[str, st.SearchStrategy[str]] = {
    "proxy-connect-timeout": durations, "proxy-read-timeout": durations, "proxy-send-timeout": durations,
    "proxy-body-size": sizes, "keep-alive": durations, "keep-alive-requests": numbers,
    "client-header-timeout": durations, "client-body-timeout": durations,
    "ssl-protocols": _protocols, "ssl-ciphers": ciphers,
    "ssl-redirect": booleans, "force-ssl-redirect": booleans, "hsts": booleans, "hsts-max-age": numbers,
    "use-geoip2": booleans, "geoip2-autoreload-in-minutes": numbers,
    "hsts-include-subdomains": booleans, "hsts-preload": booleans, "use-forwarded-headers": booleans,
    "use-proxy-protocol": booleans, "allow-cross-namespace-resources": booleans,
    "annotations-risk-level": st.sampled_from(["Low", "Medium", "High", "Critical", "critical", "none"]),
    "strict-validate-path-type": booleans, "strict-host-ownership": booleans, "disable-ipv6": booleans,
    "annotation-value-word-blocklist": st.lists(hostile, max_size=5).map(",".join),
    "allow-snippet-annotations": booleans,
    "limit-req-status-code": numbers, "limit-conn-status-code": numbers,
    "block-cidrs": network_lists,
    **{key: comma_lists(header_patterns, "~*{}bot$") for key in ("block-user-agents", "block-referers")},
    **{key: booleans for key in ("disable-access-log", "log-format-escape-json", "log-format-escape-none",
                                 "enable-access-log-for-default-backend")},
    "access-log-path": st.one_of(st.sampled_from(["/dev/stdout", "/var/log/nginx/access.log", "/tmp/x y", "/a/../b"]),
                                 hostile.map(lambda h: "/var/log/" + h)),
    "access-log-params": st.one_of(st.sampled_from(["buffer=16k flush=5s", "gzip=9", "if=$x", "buffer=1g"]), hostile),
    **{key: booleans for key in ("proxy-buffering", "proxy-request-buffering", "server-tokens",
                                 "ignore-invalid-headers", "enable-underscores-in-headers", "ssl-session-tickets",
                                 "ssl-session-cache", "use-gzip", "use-http2", "generate-request-id",
                                 "compute-full-forwarded-for", "enable-real-ip", "relative-redirects",
                                 "enable-brotli")},
    "brotli-types": st.sampled_from(["text/css application/json", "*/*", "text/html;"]),
    "default-type": st.sampled_from(["text/html", "application/octet-stream", "text/html; charset=x", "x"]),
    **{key: sizes for key in ("proxy-buffer-size", "client-body-buffer-size", "client-header-buffer-size",
                              "ssl-buffer-size", "ssl-session-cache-size")},
    **{key: durations for key in ("proxy-next-upstream-timeout", "ssl-session-timeout", "worker-shutdown-timeout",
                                  "upstream-keepalive-timeout", "upstream-keepalive-time")},
    **{key: numbers for key in ("proxy-next-upstream-tries", "variables-hash-bucket-size", "variables-hash-max-size",
                                "map-hash-bucket-size", "server-name-hash-bucket-size", "server-name-hash-max-size",
                                "http2-max-concurrent-streams", "proxy-buffers-number", "gzip-level",
                                "gzip-min-length", "max-worker-connections", "max-worker-open-files",
                                "upstream-keepalive-connections", "upstream-keepalive-requests",
                                "proxy-headers-hash-max-size", "proxy-headers-hash-bucket-size", "grpc-buffer-size-kb",
                                "brotli-level", "brotli-min-length")},
    "proxy-next-upstream": st.sampled_from(["error timeout", "http_502 non_idempotent", "off", "error;", "bogus"]),
    "proxy-http-version": st.sampled_from(["1.1", "1.0", "2", "1.1;"]),
    "large-client-header-buffers": st.sampled_from(["4 8k", "8 16k", "0 8k", "4", "4 8k;"]),
    "ssl-ecdh-curve": st.sampled_from(["auto", "X25519:prime256v1", "secp384r1", "bogus curve", "auto:X25519", "9999"]),
    "gzip-types": st.sampled_from(["text/css application/json", "*/*", "text/html;", "application/x-foo+xml"]),
    "worker-processes": st.sampled_from(["auto", "2", "0", "-1", "two"]),
    "worker-cpu-affinity": st.sampled_from(["", "auto", "01 10", "auto 0011", "0x3"]),
    "error-log-level": st.sampled_from(["notice", "debug", "warn", "verbose"]),
    "hide-headers": comma_lists(st.sampled_from(["X-Powered-By", "Server", "X Bad"]), "{},X-A"),
    "skip-access-log-urls": comma_lists(st.sampled_from(["/healthz", "/a b", "/x;y", "nohost"]), "{},/metrics"),
    "no-tls-redirect-locations": comma_lists(st.sampled_from(["/.well-known/acme-challenge", "/x", "bad"]), "{}"),
    "no-auth-locations": comma_lists(st.sampled_from(["/.well-known/acme-challenge", "/public", " /x ", ""]), "{}"),
    "http-redirect-code": st.sampled_from(["301", "302", "307", "308", "200", "999"]),
    **{key: st.sampled_from(["ingress/headers", "ingress/missing", "a/b/c", "x"]) for key in ("add-headers",
                                                                                              "proxy-set-headers")},
    **{key: network_lists for key in ("whitelist-source-range", "denylist-source-range")},
    "custom-http-errors": comma_lists(st.sampled_from(["404", "503", "500", "200", "x", "599"]), "{},502"),
    "forwarded-for-header": st.sampled_from(["X-Forwarded-For", "X-Real-IP", "CF-Connecting-IP", "X Y"]),
    "proxy-real-ip-cidr": network_lists,
    "global-allowed-response-headers": comma_lists(st.sampled_from(["X-Tenant", "X Bad", "Set-Cookie"]), "{},X-A"),
    "load-balance": st.sampled_from(["round_robin", "ewma", "EWMA", "least_conn", "round_robin;"]),
    "ssl-dh-param": st.sampled_from(["ingress/dhparam", "ingress/missing", "a/b/c", "x", "ingress/dh;param"]),
    "log-format-stream": st.lists(st.one_of(
        st.sampled_from(["$remote_addr", "${protocol}", "$session_time", "$proxy_upstream_name", "$request_uri",
                         "\"", "{", ";", "$", "$status;"]), hostile), min_size=1, max_size=6).map(" ".join),
    "stream-access-log-path": st.sampled_from(["/dev/stdout", "/tmp/stream.log", "relative", "/a b", "/tmp"]),
    "proxy-stream-timeout": st.sampled_from(["600s", "10m", "0", "1x", "5s;"]),
    "proxy-stream-responses": st.sampled_from(["1", "0", "3", "-1", "x"]),
    "proxy-protocol-header-timeout": st.sampled_from(["5s", "500ms", "0", "1h", "5x", "5s;"]),
    **{key: nginx_text for key in SNIPPET_KEYS},
    **{key: booleans for key in ("enable-modsecurity", "enable-owasp-modsecurity-crs")},
    "modsecurity-snippet": st.sampled_from(["SecRuleEngine On", "SecRuleRemoveById 920350", "Include /etc/passwd",
                                            "Include /etc/nginx/owasp-modsecurity-crs/nginx-modsecurity.conf",
                                            "SecAuditLog /dev/stdout", "SecRuleEngine On\n}\nserver {"]),
    "log-format-upstream": st.lists(st.one_of(
        st.sampled_from(["$remote_addr", "${status}", "$namespace", "$http_x_y", "$sent_http_a", "$cookie_b",
                         "$secret", "\"", "'", "\\", "{", "}", ";", "$", "$$x", "$request_id;"]), hostile),
        min_size=1, max_size=6).map(" ".join),
    **{key: booleans for key in ("enable-syslog", "enable-multi-accept", "enable-aio-write", "allow-backend-server-header",
                                 "proxy-add-original-uri-header", "retry-non-idempotent", "ssl-reject-handshake",
                                 "disable-ipv6-dns", "enable-ocsp")},
    # "true" would send the good Ingress to its Service's cluster IP, which the fuzzed Service has none of.
    "service-upstream": st.sampled_from(["false", "x", "true;"]),
    "syslog-host": st.sampled_from(["127.0.0.1", "::1", "syslog.example.com", "bad host", "10.0.0.0/8", "a;b"]),
    "syslog-port": st.sampled_from(["514", "0", "65536", "x"]),
    **{key: st.sampled_from(["/dev/stderr", "stderr", "/tmp/pyngress.log", "relative", "/a b", "/tmp"])
       for key in ("error-log-path", "http-access-log-path")},
    "debug-connections": network_lists,
    "bind-address": st.sampled_from(["127.0.0.1", "127.0.0.1,::1", "10.0.0.0/8", "localhost", "::1;", ""]),
    # OpenTelemetry (services/syncer/model/configmap_tracing.py): values reach Lua only, quoted.
    **{key: booleans for key in ("enable-opentelemetry", "opentelemetry-trust-incoming-span",
                                 "otel-sampler-parent-based")},
    **{key: numbers for key in ("otlp-collector-port", "otel-max-queuesize", "otel-schedule-delay-millis",
                                "otel-max-export-batch-size")},
    "otlp-collector-host": st.sampled_from(["127.0.0.1", "::1", "otel.example.com", "bad host", "a;b", "x]"]),
    "otel-service-name": st.one_of(st.sampled_from(["nginx", "edge proxy", "a\"b"]), hostile),
    "opentelemetry-operation-name": st.one_of(st.sampled_from(["HTTP $request_method $uri", "$", "a]]b"]), hostile),
    "otel-sampler": st.sampled_from(["AlwaysOn", "AlwaysOff", "TraceIdRatioBased", "always_on", ""]),
    "otel-sampler-ratio": st.sampled_from(["0.01", "1", "0", "1.5", "-1", "x", ".5"]),
    "opentelemetry-config": st.sampled_from(["/etc/nginx/opentelemetry.toml", "relative", "/a b"]),
    "gzip-disable": st.sampled_from(["msie6", "Opera.*Mini msie6", "(", "a$", "x;y", "\\"]),
    "limit-conn-zone-variable": st.sampled_from(["$binary_remote_addr", "$http_x_api_key", "$request_uri", "x", "$a;b"]),
    "ssl-session-ticket-key": st.sampled_from(["", "abc", base64.b64encode(bytes(48)).decode(),
                                               base64.b64encode(bytes(80)).decode(), base64.b64encode(bytes(81)).decode()]),
    **{key: numbers for key in ("limit-rate", "limit-rate-after")},
    "use-port-in-redirects": booleans,
    **{key: st.sampled_from(["off", "/ /app", "a b c", "/a;b /c", "$x /"]) for key in ("proxy-cookie-path",
                                                                                     "proxy-cookie-domain")},
    **{key: st.sampled_from(["off", "default", "http://backend/", "/", "a b", "$x"]) for key in ("proxy-redirect-from",
                                                                                              "proxy-redirect-to")},
}


def derived_examples(name: str) -> tuple[str, ...]:
    """The values of a plain directive annotation without a row above: its default and its row of the annotation
    table (a value it accepts, one it refuses); none for an annotation whose group interprets the value."""
    annotation = ANNOTATIONS[name]
    if annotation.directive is None:
        return ()
    return tuple(v for v in (annotation.default, *TABLE_VALUES[name]) if v is not None)


def _valid(name: str, value: str) -> bool:
    try:
        ANNOTATIONS[name].validate(value)
    except ValueError:
        return False
    return True


def test_every_annotation_and_configmap_key_has_a_value_strategy():
    assert set(ANNOTATION_VALUES) <= set(ANNOTATIONS)
    derived = set(ANNOTATIONS) - set(ANNOTATION_VALUES)
    assert {name for name in derived if not derived_examples(name)} == set(), "add a row to ANNOTATION_VALUES"
    # A derived strategy still fuzzes around a value the annotation takes.
    assert {name for name in derived if not any(_valid(name, v) for v in derived_examples(name))} == set()
    assert set(CONFIGMAP_VALUES) == set(GLOBAL_DIRECTIVES) | set(FIELDS) | set(SERVER_FIELDS) | set(ANNOTATION_DEFAULTS)
    assert not set(CONFIGMAP_VALUES) & set(UNSUPPORTED)


def annotation_values(name: str) -> st.SearchStrategy[str]:
    explicit = ANNOTATION_VALUES.get(name)
    return fuzzed(explicit if explicit is not None else st.sampled_from(derived_examples(name)))


# --- the store, the model and nginx -t -----------------------------------------------------------

@pytest.fixture(scope="module")
def nginx_check() -> Iterator[NginxCheck]:
    yield from nginx_check_in_tmp()


@pytest.fixture(scope="module")
def certificate() -> dict[str, str]:
    """Secret data of a real certificate for the fuzzed host (so that TLS code paths run)."""
    pem = make_self_signed("/CN=fuzz.example.com", ("fuzz.example.com",)).decode()
    end = pem.index("-----END CERTIFICATE-----") + len("-----END CERTIFICATE-----\n")
    return {"tls.crt": base64.b64encode(pem[:end].encode()).decode(),
            "tls.key": base64.b64encode(pem[end:].encode()).decode()}


def _all_denied(model: Model, ingress: str) -> bool:
    return all(route.profile == DENIED_PROFILE.name for host_routes in model.routes.values()
               for route in [*host_routes.exact.values(), *host_routes.prefix.values(), host_routes.default]
               if route is not None and route.ingress == ingress)


def check_isolation(cluster: Cluster, nginx_check: NginxCheck) -> Model:
    model = cluster.build(state_dir=str(nginx_check.paths.state_dir), run_dir=str(nginx_check.paths.run_dir))
    good = model.routes.get(GOOD_HOST)
    assert good is not None and good.prefix["/"].ingress == GOOD and good.prefix["/"].backend, model.problem_lines()
    routed_by = {route.ingress for host_routes in model.routes.values()
                 for route in [*host_routes.exact.values(), *host_routes.prefix.values(), host_routes.default]
                 if route is not None}
    if any(p.startswith(f"Ingress {FUZZED}: ") for p in model.problem_lines()):
        # Rejected, or routed to ingress-nginx's denied location (503) while its auth-secret is unusable.
        assert FUZZED not in routed_by or _all_denied(model, FUZZED), model.problem_lines()
    text = render(model.config)
    assert_values_stay_arguments(model.config, text)
    for name, content in model.ssl_files.items():  # what the syncer writes before nginx loads the configuration
        write_root_only(nginx_check.paths.ssl_dir, name, content)
    error = nginx_check.error(text)
    assert error is None, f"nginx -t refused the configuration: {error}\nproblems: {model.problem_lines()}"
    json.dumps([model.routes_json(), model.backends, model.certificates, model.passthrough])
    # serialise leaves the values' types to this check (services/nginxconf/table_schema.py).
    for table, data in (("routes", model.routes_json()), ("backends", model.backends),
                        ("certificates", model.certificates)):
        check_table(table, data)
    return model


# --- annotations --------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(ANNOTATIONS))
def test_one_annotation_never_breaks_the_configuration(name, nginx_check):
    @settings(FUZZ, max_examples=25)
    @given(value=annotation_values(name))
    def check(value: str) -> None:
        cluster = cluster_with_good_ingress()
        cluster.app("fuzz", host=FUZZED_HOST, annotations=with_companions({name: value}))
        check_isolation(cluster, nginx_check)
    check()


_annotation_sets = st.lists(st.sampled_from(sorted(ANNOTATIONS)), min_size=2, max_size=6, unique=True).flatmap(
    lambda names: st.fixed_dictionaries({name: annotation_values(name) for name in names}))


@settings(FUZZ, max_examples=80)
@given(annotations=_annotation_sets)
def test_annotations_together_never_break_the_configuration(annotations, nginx_check):
    cluster = cluster_with_good_ingress()
    cluster.app("fuzz", host=FUZZED_HOST, annotations=with_companions(annotations))
    check_isolation(cluster, nginx_check)


_htpasswd_lines = st.lists(st.one_of(
    st.sampled_from(["alice:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=", "bob:$apr1$x$" + "a" * 22, "# comment", "",
                     "carol:{PLAIN}pw", "dave", ":x", "e:f:g"]),
    st.builds(lambda user, tail: f"{user}:{tail}", hostile, hostile)), max_size=5).map("\n".join)


@settings(FUZZ, max_examples=60)
@given(content=st.one_of(_htpasswd_lines, hostile), secret_type=st.sampled_from(["auth-file", "auth-map"]))
def test_a_hostile_htpasswd_secret_never_breaks_the_configuration(content, secret_type, nginx_check):
    cluster = cluster_with_good_ingress()
    data = {"auth": content} if secret_type == "auth-file" else {"u": content, "v": content[:5]}
    cluster.add({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                 "metadata": {"name": "fuzz-auth", "namespace": "default"},
                 "data": {k: base64.b64encode(v.encode("utf-8", "surrogatepass")).decode() for k, v in data.items()}})
    cluster.app("fuzz", host=FUZZED_HOST, annotations={"auth-type": "basic", "auth-secret": "fuzz-auth",
                                                      "auth-secret-type": secret_type})
    model = check_isolation(cluster, nginx_check)
    assert _all_denied(model, FUZZED) or model.auth_files, model.problem_lines()


@settings(FUZZ, max_examples=60)
@given(data=st.dictionaries(st.one_of(st.sampled_from(["X-Tenant", "Host", "X-Original-URL"]), hostile),
                            st.one_of(st.sampled_from(["team-a", "a b", "$host"]), hostile), max_size=4))
def test_a_hostile_auth_headers_configmap_never_breaks_the_configuration(data, nginx_check):
    cluster = cluster_with_good_ingress()
    cluster.add(headers_configmap("fuzz-headers", data))
    cluster.app("fuzz", host=FUZZED_HOST, annotations={"auth-url": "http://127.0.0.1:9/check",
                                                      "auth-proxy-set-headers": "fuzz-headers"})
    model = check_isolation(cluster, nginx_check)
    sent = [p.external_auth.proxy_set_headers for p in model.config.profiles if p.external_auth]
    assert _all_denied(model, FUZZED) or sent == [tuple(sorted(data.items()))], model.problem_lines()


@settings(FUZZ, max_examples=60)
@given(data=st.dictionaries(st.one_of(st.sampled_from(["X-Team", "X-Dollar"]), hostile),
                            st.one_of(st.sampled_from(["42", "$remote_addr", "${host}", "a$", "$$"]), hostile),
                            min_size=1, max_size=4))
def test_a_hostile_custom_headers_configmap_never_breaks_the_configuration(data, nginx_check):
    # custom-headers values are sent as written, `$` included (render.literal): nothing in one reaches nginx's parser
    # or its variables.
    cluster = cluster_with_good_ingress()
    cluster.configmap({"global-allowed-response-headers": "X-Team,X-Dollar"})
    cluster.add(headers_configmap("fuzz-headers", data))
    cluster.app("fuzz", host=FUZZED_HOST, annotations={"custom-headers": "fuzz-headers"})
    model = check_isolation(cluster, nginx_check)
    sent = [p.response_headers for p in model.config.profiles if p.response_headers]
    assert _all_denied(model, FUZZED) or sent == [tuple(sorted(data.items()))], model.problem_lines()


# --- the controller ConfigMap -------------------------------------------------------------------

# The ConfigMap's snippets are raw configuration by design: one that nginx -t refuses is caught by the applier, and
# the applied ones keep applying (tests/e2e/ingress/test_configmap_snippets.py).
@pytest.mark.parametrize("key", sorted(set(CONFIGMAP_VALUES) - set(SNIPPET_KEYS)))
def test_a_configmap_value_never_breaks_the_configuration(key, nginx_check):
    @FUZZ
    @given(value=fuzzed(CONFIGMAP_VALUES[key]))
    def check(value: str) -> None:
        cluster = cluster_with_good_ingress()
        cluster.configmap({key: value})
        # A TCP and a UDP service, so that the stream block is rendered too.
        cluster.add({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "streams", "namespace": "ingress"},
                     "data": {"9000": "default/good:80"}})
        cluster.settings = cluster.settings.replace_flags(tcp_services_configmap="ingress/streams",
                                                          udp_services_configmap="ingress/streams")
        model = check_isolation(cluster, nginx_check)
        assert not any(p.startswith(f"Ingress {GOOD}") for p in model.problem_lines()), model.problem_lines()
    check()


@pytest.mark.parametrize("key", sorted(GLOBAL_AUTH_KEYS))
def test_a_global_auth_value_never_breaks_the_configuration_nor_serves_open(key, nginx_check):
    @FUZZ
    @given(value=annotation_values(GLOBAL_AUTH_KEYS[key]) if GLOBAL_AUTH_KEYS[key] in ANNOTATIONS else hostile)
    def check(value: str) -> None:
        cluster = cluster_with_good_ingress()
        cluster.configmap({"global-auth-url": "http://127.0.0.1:9/check", key: value})
        model = check_isolation(cluster, nginx_check)
        # The good Ingress is covered by global authentication, or denied while it is invalid: never open.
        profile = next(p for p in model.config.profiles if p.name == model.routes[GOOD_HOST].prefix["/"].profile)
        assert profile.external_auth is not None or profile == DENIED_PROFILE, model.problem_lines()
    check()


# --- Ingress and Service spec fields ------------------------------------------------------------

_json_like = st.recursive(
    st.none() | st.booleans() | st.integers(-2**63, 2**64) | hostile,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["name", "port", "number", "x"]),
                                                                inner, max_size=3),
    max_leaves=6)
_paths = st.one_of(st.from_regex(r"/[A-Za-z0-9\-._~%!$&()*+,=:@/]{0,20}", fullmatch=True),
                   st.sampled_from(["/", "//", "/a/../b", "/a/", "/%00", "/a?b", "/a#b", "/a b", "a", "", "/${x}"]))
_path_types = st.sampled_from(["Exact", "Prefix", "ImplementationSpecific", "prefix", "Regex", ""])
_names = st.one_of(_label, st.sampled_from(["a" * 63, "a" * 64, "web", "Web", "web.x", "-web", "0"]))
_port_numbers = st.one_of(st.integers(-1, 70000), st.sampled_from([0, 65535, 65536, 2**63]))
_service_types = st.sampled_from(["ClusterIP", "NodePort", "LoadBalancer", "ExternalName", "Headless", ""])
_addresses = st.one_of(st.ip_addresses().map(str), st.builds(lambda a, z: f"{a}{z}", st.ip_addresses(v=6).map(str),
                                                             _zone))

BACKEND = ("spec", "rules", 0, "http", "paths", 0, "backend")
# What to replace in the fuzzed Ingress, its Service or its EndpointSlice, and the values to try there. The
# test adds JSON values of any shape to each, except under metadata, whose shape the watcher checks
# (services/watcher/manifest_objects.py; an API server does too).
SPEC_FIELDS: dict[str, tuple[str, tuple[Any, ...], st.SearchStrategy[Any]]] = {
    "host": ("Ingress", ("spec", "rules", 0, "host"),
             fuzzed(st.one_of(hostnames, hostnames.map(lambda h: "*." + h)))),
    "path": ("Ingress", ("spec", "rules", 0, "http", "paths", 0, "path"), fuzzed(_paths)),
    "pathType": ("Ingress", ("spec", "rules", 0, "http", "paths", 0, "pathType"), fuzzed(_path_types)),
    "rules": ("Ingress", ("spec", "rules"), st.lists(st.fixed_dictionaries({"host": hostnames}), max_size=2)),
    "paths": ("Ingress", ("spec", "rules", 0, "http", "paths"), st.lists(st.fixed_dictionaries({"path": _paths}))),
    "spec": ("Ingress", ("spec",), st.fixed_dictionaries({"ingressClassName": st.just("nginx")})),
    "ingressClassName": ("Ingress", ("spec", "ingressClassName"), fuzzed(st.sampled_from(["nginx", "other"]))),
    "annotations": ("Ingress", ("metadata", "annotations"),
                    st.dictionaries(fuzzed(st.sampled_from(["kubernetes.io/ingress.class", "x/y"])), hostile)),
    "backend": ("Ingress", BACKEND, st.fixed_dictionaries({"service": st.fixed_dictionaries({"name": _names})})),
    "service name": ("Ingress", (*BACKEND, "service", "name"), fuzzed(_names)),
    "service port number": ("Ingress", (*BACKEND, "service", "port", "number"), _port_numbers),
    "service port name": ("Ingress", (*BACKEND, "service", "port"), st.fixed_dictionaries({"name": fuzzed(_names)})),
    "defaultBackend": ("Ingress", ("spec", "defaultBackend"),
                       st.fixed_dictionaries({"service": st.fixed_dictionaries(
                           {"name": _names, "port": st.fixed_dictionaries({"number": _port_numbers})})})),
    "tls host": ("Ingress", ("spec", "tls", 0, "hosts", 0), fuzzed(st.one_of(hostnames, st.just(FUZZED_HOST)))),
    "tls hosts": ("Ingress", ("spec", "tls", 0, "hosts"), st.lists(fuzzed(hostnames), max_size=3)),
    "tls secretName": ("Ingress", ("spec", "tls", 0, "secretName"), fuzzed(_names)),
    "Service type": ("Service", ("spec", "type"), fuzzed(_service_types)),
    "Service externalName": ("Service", ("spec", "externalName"), fuzzed(hostnames)),
    "Service ports": ("Service", ("spec", "ports"), st.lists(st.fixed_dictionaries(
        {"name": _names, "port": _port_numbers}), max_size=3)),
    "Service port": ("Service", ("spec", "ports", 0, "port"), _port_numbers),
    "Service port name": ("Service", ("spec", "ports", 0, "name"), fuzzed(_names)),
    "endpoint address": ("EndpointSlice", ("endpoints", 0, "addresses", 0), fuzzed(_addresses)),
}


def _replace(obj: dict[str, Any], path: tuple[Any, ...], value: Any) -> None:
    for step in path[:-1]:
        obj = obj[step]
    obj[path[-1]] = value


@pytest.mark.parametrize("field", sorted(SPEC_FIELDS))
def test_a_spec_field_never_breaks_the_configuration(field, nginx_check, certificate):
    kind, path, valid = SPEC_FIELDS[field]
    noise = st.nothing() if path[0] == "metadata" else _json_like

    @FUZZ
    @given(value=st.one_of(valid, noise))
    def check(value: Any) -> None:
        cluster = cluster_with_good_ingress()
        cluster.add({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                     "metadata": {"name": "fuzz-tls", "namespace": "default"}, "data": dict(certificate)})
        objects = {
            "Service": cluster.service("fuzz", ports=(("http", 80),), type="ClusterIP"),
            "EndpointSlice": cluster.endpoint_slice("fuzz", addresses=("10.0.0.2",)),
            "Ingress": cluster.ingress("fuzz", host=FUZZED_HOST, paths=(("/", "Prefix", "fuzz", 80),),
                                       tls=[{"hosts": [FUZZED_HOST], "secretName": "fuzz-tls"}]),
        }
        _replace(objects[kind], path, copy.deepcopy(value))
        check_isolation(cluster, nginx_check)
    check()


# --- snippets, where the administrator allows them ------------------------------------------------

_snippet_words = st.one_of(hostile, st.sampled_from([
    "add_header X-A b;", "return 200;", "if ($arg_x) {", "}", "{", "location @x {", "set $a ${host};", "'}'",
    '"{"', "\\}", "# }\n", "access_by_lua 'ngx.exit(403)';", "proxy_set_header X y;", "\n"]))
snippets = st.lists(_snippet_words, max_size=8).map(" ".join)


@settings(FUZZ, max_examples=150)
@given(snippet=snippets)
def test_a_snippet_stays_in_its_location_and_one_nginx_refuses_is_blamed_on_its_own_profile(snippet, nginx_check):
    # The model may accept a snippet that `nginx -t` then refuses: the syncer halves the new profiles to find
    # it (services/syncer/nginx_apply/applier.py), which works only if the configuration without it passes.
    cluster = cluster_with_good_ingress()
    cluster.configmap({"allow-snippet-annotations": "true", "annotations-risk-level": "Critical"})
    cluster.app("fuzz", host=FUZZED_HOST, annotations={"configuration-snippet": snippet})
    model = cluster.build(state_dir=str(nginx_check.paths.state_dir), run_dir=str(nginx_check.paths.run_dir))
    assert model.routes[GOOD_HOST].prefix["/"].ingress == GOOD
    text = render(model.config)
    if nginx_check.error(text) is not None:
        fuzzed = {route.profile for route in model.routes[FUZZED_HOST].prefix.values()}
        others = [p for p in model.config.profiles if p.name not in fuzzed]
        assert nginx_check.error(render(replace(model.config, profiles=others))) is None
    else:
        # Read back as nginx reads it: the snippet's directives are all inside its own location.
        assert_values_stay_arguments(model.config, text)

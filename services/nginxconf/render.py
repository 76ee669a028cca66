"""NginxConfig → nginx.conf text, from templates/nginx.conf.j2.

Every value that reaches nginx.conf passes through a filter here: directive names must be plain
identifiers, each argument is double-quoted with its backslashes and quotes escaped, and characters that
no quoting makes safe (control characters; `$`, which nginx expands as a variable even inside quotes)
are refused with a RenderError. Values are validated by allow-lists before they get here; this is the
second line, so that a validator's bug can never add a directive or a block.

Setting values (ConfigMap globals and profile directives) are argument lists: a string is split on spaces
("4 8k" → two arguments), a tuple or list gives the arguments as they are. A profile's typed fields
(config.py) are the template's own: the backend scheme chooses its proxy_pass, the CORS policy becomes
a Lua table for templates/lua/pyngress/cors.lua, basic authentication its auth_basic directives.
"""
from __future__ import annotations

import functools
import hashlib
import math
import re
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence


from services.nginxconf.config import (DEFAULT_PROFILE, AuthKeepalive, BackendTls, BasicAuth, Mirror, BlockLists, CorsPolicy, ExternalAuth,
                                       LocationProfile, NginxConfig, RateLimit, ServerSettings)
from services.nginxconf.paths import NginxPaths, nginx_module
from services.nginxconf.resolvers import system_resolvers
from services.nginxconf.snippet_blocks import SnippetError, check_contained
from services.nginxconf.modsecurity import ModSecurityRenderError, check_profile_modsecurity, rendered_modsecurity
from services.nginxconf import tracing
from services.nginxconf.variables import VARIABLE
from services.nginxconf.template import BUILTIN_DIR, LUA_SUBDIR, Template, compile_files, read_files

# Size of each Lua shared dictionary holding a pushed table (also the largest table the internal
# port accepts). Memory is only used as the tables fill it.
SHARED_DICT_SIZE = "64m"
# Request-metrics batches between two collections by the syncer (pages are used only as batches wait).
METRICS_DICT_SIZE = "32m"

# http-level settings used unless the ConfigMap (NginxConfig.globals) sets the same directive.
# Values follow ingress-nginx's defaults.
HTTP_DEFAULTS: dict[str, str] = {
    "server_tokens": "off",
    # ingress-nginx writes port_in_redirect off in every location unless use-port-in-redirects asks for it.
    "port_in_redirect": "off",
    "sendfile": "on",
    "tcp_nopush": "on",
    "tcp_nodelay": "on",
    "keepalive_timeout": "75s",
    "keepalive_requests": "1000",
    "client_header_timeout": "60s",
    "client_body_timeout": "60s",
    "client_max_body_size": "1m",
    "client_body_buffer_size": "8k",
    "proxy_http_version": "1.1",
    "proxy_connect_timeout": "5s",
    "proxy_send_timeout": "60s",
    "proxy_read_timeout": "60s",
    "proxy_buffering": "off",
    "proxy_request_buffering": "on",
    "proxy_buffer_size": "4k",
    "proxy_buffers": "4 4k",
    "proxy_redirect": "off",
    "proxy_next_upstream": "error timeout",
    "proxy_next_upstream_tries": "3",
    "proxy_next_upstream_timeout": "0",
    "ssl_protocols": "TLSv1.2 TLSv1.3",
    "ssl_ciphers": "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"
                   "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305:"
                   "DHE-RSA-AES128-GCM-SHA256:DHE-RSA-AES256-GCM-SHA384",
    "ssl_prefer_server_ciphers": "on",
    "ssl_session_cache": "shared:SSL:10m",
    "ssl_session_timeout": "10m",
    "ssl_session_tickets": "off",
}

# Request headers every profile sends upstream (nginx variables, not quoted values). A profile that sets
# one of these itself (proxy_set_header) replaces it; any proxy_set_header in a location stops nginx from
# inheriting them, so each named location lists them all.
PROXY_HEADERS: tuple[tuple[str, str], ...] = (
    # ingress-nginx's $best_http_host: with use-forwarded-headers, the first host of X-Forwarded-Host.
    ("Host", "$pyngress_forwarded_host"),
    ("X-Request-ID", "$pyngress_request_id"),
    ("X-Real-IP", "$remote_addr"),
    # The $pyngress_forwarded_* maps take a client's X-Forwarded-* only with use-forwarded-headers; a client's
    # own X-Forwarded-Scheme never passes (ingress-nginx sets it as X-Forwarded-Proto).
    ("X-Forwarded-For", "$pyngress_forwarded_for"),
    ("X-Forwarded-Host", "$pyngress_forwarded_host"),
    ("X-Forwarded-Port", "$pyngress_forwarded_port"),
    ("X-Forwarded-Proto", "$pyngress_forwarded_proto"),
    ("X-Forwarded-Scheme", "$pyngress_forwarded_proto"),
    ("X-Scheme", "$pyngress_forwarded_proto"),
    # What the client sent, whether trusted or not, as ingress-nginx passes it (X-Original-Forwarded-For is read
    # from the ConfigMap's forwarded-for-header: _header_sources).
    ("X-Original-Forwarded-For", "$http_x_forwarded_for"),
    ("X-Original-Forwarded-Host", "$http_x_forwarded_host"),
    ("Upgrade", "$pyngress_upgrade"),  # websocket only: an h2c upgrade could tunnel past routing
    ("Connection", "$pyngress_connection_upgrade"),
    # httpoxy: a client's Proxy header must not become HTTP_PROXY in a CGI-style backend.
    ("Proxy", '""'),
    # Client certificates (auth-tls-*): set by the router (client_auth.lua) on routes that check one, empty
    # (not sent) elsewhere, so that a client can never send its own.
    ("ssl-client-verify", "$pyngress_client_verify"),
    ("ssl-client-subject-dn", "$pyngress_client_subject_dn"),
    ("ssl-client-issuer-dn", "$pyngress_client_issuer_dn"),
    ("ssl-client-cert", "$pyngress_client_cert"),
)


def _header_sources(*, use_forwarded_headers: bool, use_proxy_protocol: bool, compute_full_forwarded_for: bool,
                    forwarded_for_header: str) -> dict[str, str]:
    """The variable each $pyngress_forwarded_* header value is read from in the profiles' locations. When a
    client's X-Forwarded-* are not trusted those maps only copy another variable, and every request paid for
    the copy (a map lowercases and hashes its key: about 3,500 instructions a request for the four); the
    maps stay defined for what else reads them (external_auth.lua, the router's redirects, snippets), and
    unread maps cost nothing. X-Original-Forwarded-For is the forwarded-for-header the client sent."""
    if not _HEADER_NAME.fullmatch(forwarded_for_header):
        raise RenderError(f"forwarded-for-header {forwarded_for_header!r} is not a header name")
    sources = {"$http_x_forwarded_for": "$http_" + forwarded_for_header.lower().replace("-", "_")}
    if not use_forwarded_headers:
        sources.update({"$pyngress_forwarded_host": "$pyngress_best_http_host",
                        "$pyngress_forwarded_port": "$pyngress_server_port"})
        if not use_proxy_protocol:  # a PROXY header naming port 443 makes it https
            sources["$pyngress_forwarded_proto"] = "$scheme"
    if not (use_forwarded_headers and compute_full_forwarded_for):
        sources["$pyngress_forwarded_for"] = "$remote_addr"
    return sources


# gRPC backends (backend-protocol GRPC, GRPCS) are spoken to with nginx's grpc module: its own pass and header
# directives, and its own timeouts, which take the proxy ones' values as in ingress-nginx.
GRPC_SCHEMES = frozenset({"grpc", "grpcs"})
# What the auth-url request carries from pyngress itself (the template's auth location); auth-proxy-set-headers
# may not replace them.
AUTH_REQUEST_HEADERS = frozenset({
    "content-length", "x-forwarded-proto", "x-request-id", "host", "x-original-url", "x-original-method",
    "x-sent-from", "x-real-ip", "x-forwarded-for", "x-auth-request-redirect", "x-original-uri", "x-scheme",
    "connection"})
_GRPC_TIMEOUTS = {"proxy_connect_timeout": "grpc_connect_timeout", "proxy_send_timeout": "grpc_send_timeout",
                  "proxy_read_timeout": "grpc_read_timeout"}
# Hop-by-hop headers have no place in HTTP/2 to the backend.
_HOP_BY_HOP = frozenset({"upgrade", "connection", "proxy"})

_DIRECTIVE = re.compile(r"[a-z][a-z0-9_]{0,63}")
_PROFILE_NAME = re.compile(r"[A-Za-z0-9_-]{1,128}")
_UNSAFE = re.compile(r"[\x00-\x1f\x7f$]")
_LUA_PLAIN = re.compile(r"[A-Za-z0-9 /._:-]")


class RenderError(ValueError):
    """A value cannot be written into nginx.conf safely; the message names it."""


def quote(value: object) -> str:
    """One nginx argument, double-quoted."""
    text = str(value)
    bad = _UNSAFE.search(text)
    if bad:
        raise RenderError(f"{text!r}: character {bad.group()!r} cannot be written into nginx.conf")
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def literal(value: object) -> str:
    """One nginx argument, double-quoted, that nginx sends exactly as written: each `$` is the template's
    $pyngress_dollar (a geo value, which nginx never expands), so no variable of the text is evaluated."""
    return '"' + "${pyngress_dollar}".join(quote(piece)[1:-1] for piece in str(value).split("$")) + '"'


def lua_string(value: object) -> str:
    """A Lua string literal; every byte that is not plainly safe is a decimal escape."""
    data = str(value).encode()
    return '"' + "".join(chr(b) if _LUA_PLAIN.fullmatch(chr(b)) else f"\\{b}" for b in data) + '"'


def with_variables(value: object) -> str:
    """One nginx argument, double-quoted, whose variables nginx evaluates (a log format, a header value of the
    ConfigMap's add-headers or proxy-set-headers): each `$` must start a variable name, whose name the model
    checked against variables.py; no control characters."""
    text = str(value)
    rest = VARIABLE.sub("", text)
    bad = re.search(r"[\x00-\x1f\x7f$]", rest)
    if bad:
        raise RenderError(f"{text!r}: {bad.group()!r} cannot be written into nginx.conf")
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def lua_literal(value: object) -> str:
    """A Lua literal of a JSON-like value (None, booleans, finite numbers, strings, lists, string-keyed dicts)."""
    if value is None:
        return "nil"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        if not math.isfinite(value):
            raise RenderError(f"{value!r} cannot be written as a Lua number")
        return repr(value)
    if isinstance(value, str):
        return lua_string(value)
    if isinstance(value, (list, tuple)):
        return "{ " + " ".join(f"{lua_literal(item)}," for item in value) + " }"
    if isinstance(value, dict):
        return "{ " + " ".join(f"[{lua_string(key)}] = {lua_literal(item)}," for key, item in value.items()) + " }"
    raise RenderError(f"{value!r} cannot be written as a Lua value")


def directive(name: str) -> str:
    if not _DIRECTIVE.fullmatch(name):
        raise RenderError(f"{name!r} is not an nginx directive name")
    return name


def _words(value: str | Sequence[str]) -> list[str]:
    # Split on spaces only: a tab or newline stays in its word, where quote() refuses it.
    return [w for w in value.split(" ") if w] if isinstance(value, str) else [str(v) for v in value]


def arguments(value: str | Sequence[str]) -> str:
    words = _words(value)
    if not words:
        raise RenderError("a setting needs at least one argument")
    return " ".join(quote(w) for w in words)


def _settings(pairs: Iterable[tuple[str, str | Sequence[str]]]) -> list[tuple[str, str]]:
    return [(directive(name), directive_arguments(name, value)) for name, value in pairs]


def directive_arguments(name: str, value: str | Sequence[str]) -> str:
    """The arguments of the setting `name` as nginx.conf gets them (each quoted; a redirect's URL may hold the
    request's variables)."""
    return _redirect(value) if name == "return" else arguments(value)


def _redirect(value: str | Sequence[str]) -> str:
    """`return CODE` (a denied location) or `return 3xx URL` (permanent- and temporal-redirect), whose URL may hold
    the request's variables."""
    words = _words(value)
    if len(words) == 1 and words[0].isdigit() and 200 <= int(words[0]) <= 599:
        return str(int(words[0]))
    if len(words) != 2 or not words[0].isdigit() or not 300 <= int(words[0]) <= 399:
        raise RenderError(f"return takes a status, or a 3xx status and a URL; got {value!r}")
    return f"{int(words[0])} {url_with_request_variables(words[1])}"


@dataclass(frozen=True, kw_only=True)
class _RenderedRateLimit:
    """A profile's rate limits as nginx.conf lines: `zones` at the http level, `limits` in its location."""
    allow_variable: str  # "$pyngress_limit_allowed_<id>": 1 for a client in the allowlist (a geo block)
    allowlist: list[str]  # quoted networks
    key_variable: str  # "$pyngress_limit_key_<id>": the client address, or "" (not counted) when allowlisted
    zones: list[str]
    limits: list[str]


# 5 MiB per zone, as ingress-nginx: about 80,000 client addresses each.
RATE_LIMIT_ZONE_SIZE = "5m"


def rate_limit_lines(limit: RateLimit) -> _RenderedRateLimit:
    """nginx's limit_req/limit_conn for `limit`, in ingress-nginx's order: connections, then rps, then rpm."""
    # Variable names take letters, digits and '_' only: a digest of the zone name, which holds '-' and '.'.
    # The key is this variable also without an allowlist: nginx refuses to reload a zone whose key changed.
    var_id = hashlib.sha256(limit.zone.encode()).hexdigest()[:16]
    key = f"$pyngress_limit_key_{var_id}"
    zones, limits = [], []
    if limit.connections:
        zone = quote(f"zone={limit.zone}_conn:{RATE_LIMIT_ZONE_SIZE}")
        zones.append(f"limit_conn_zone {key} {zone};")
        limits.append(f"limit_conn {quote(limit.zone + '_conn')} {quote(limit.connections)};")
    for suffix, count, unit in (("rps", limit.rps, "s"), ("rpm", limit.rpm, "m")):
        if count:
            zone = quote(f"zone={limit.zone}_{suffix}:{RATE_LIMIT_ZONE_SIZE}")
            zones.append(f"limit_req_zone {key} {zone} {quote(f'rate={count}r/{unit}')};")
            # nginx refuses "burst=0", which is its default (limit-burst-multiplier 0).
            burst = f" {quote(f'burst={count * limit.burst_multiplier}')}" if limit.burst_multiplier else ""
            limits.append(f"limit_req {quote(f'zone={limit.zone}_{suffix}')}{burst} nodelay;")
    return _RenderedRateLimit(allow_variable=f"$pyngress_limit_allowed_{var_id}",
                              allowlist=[quote(network) for network in limit.allowlist],
                              key_variable=key, zones=zones, limits=limits)


@dataclass(frozen=True, kw_only=True)
class _RenderedProfile:
    name: str
    settings: list[tuple[str, str]]
    headers: list[tuple[str, str]]
    scheme: str  # of proxy_pass (grpc_pass for gRPC) to the backend
    cors: str | None  # a Lua table literal of cors.lua's options, when the profile answers CORS
    rate_limit: _RenderedRateLimit | None
    denied: list[str]  # quoted networks
    snippet: str | None  # raw nginx configuration, checked by snippet_blocks.check_contained
    basic_auth: BasicAuth | None
    external_auth: _RenderedExternalAuth | None
    # proxy-ssl-* (see _backend_tls), and whether the profile sets the SNI name and its use itself (else the
    # HTTPS backends' defaults apply).
    backend_tls: list[tuple[str, str, bool]]
    custom_http_errors: tuple[int, ...] | None  # None: the ConfigMap's list
    pass_backend_errors: bool
    unreachable_answers_503: bool
    mirror: _RenderedMirror | None
    response_headers: list[str]  # custom-headers: "Name: value", its value literal (render.literal)
    fastcgi_params: list[str]  # fastcgi_param arguments: the quoted name and value (fastcgi_param_arguments)
    sets_ssl_name: bool
    sets_ssl_server_name: bool
    # proxy-ssl-verify on (a BackendTLSPolicy's too): to the upstream that keeps no connection (see _backend_tls).
    verified: bool

    @property
    def grpc(self) -> bool:
        return self.scheme in GRPC_SCHEMES


@dataclass(frozen=True, kw_only=True)
class _RenderedExternalAuth:
    """An ExternalAuth with every value quoted for nginx.conf (or written as a Lua string for the signin)."""
    url: str
    host: str
    method: str | None
    request_redirect: str | None
    response_headers: list[tuple[str, str]]  # (quoted header name, $upstream_http_* variable name)
    response_headers_lua: str  # the names as a Lua list literal
    signin: str | None  # Lua string literals
    signin_redirect_param: str
    always_set_cookie: bool
    cache_key: str | None  # one double-quoted nginx argument holding variables
    cache_durations: list[str]  # proxy_cache_valid arguments, each word quoted
    proxy_set_headers: list[tuple[str, str]]  # quoted (name, literal value)
    keepalive: AuthKeepalive | None
    # With keepalive: proxy_pass's quoted argument, the auth URL with its host:port replaced by the upstream
    # `pyngress_auth_<profile>` (the Host header still names the service).
    keepalive_url: str | None
    server_name: str  # quoted: the service's host name, its SNI
    snippet: str | None  # auth-snippet, checked by snippet_blocks.check_contained


# Where a LocationProfile keeps its rendered form once checked: in the object's own __dict__, outside its fields
# (a frozen dataclass; equality, hash, asdict and digest() do not see it). The model checks each Ingress's profile
# (model.build.plan_one) and render() takes those same objects from NginxConfig.profiles: a profile is rendered once
# and its result travels on with it, whatever the number of profiles (a shared cache of equal profiles, bounded,
# rendered every profile twice beyond its size: 10,000 rate-limited Ingresses are 10,000 profiles).
_RENDERED = "_rendered"


def check_profile(profile: LocationProfile) -> _RenderedProfile:
    """`profile` as the template writes it; raises RenderError naming what cannot be written safely."""
    rendered: _RenderedProfile | None = profile.__dict__.get(_RENDERED)
    if rendered is None:
        rendered = profile.__dict__[_RENDERED] = _rendered_profile(profile)
    return rendered


@functools.lru_cache(maxsize=4096)  # thousands of Ingresses share a handful of profiles, each its own object
def _rendered_profile(profile: LocationProfile) -> _RenderedProfile:
    if not _PROFILE_NAME.fullmatch(profile.name):
        raise RenderError(f"location profile name {profile.name!r} may only hold letters, digits, '_' and '-'")
    own_headers = {_header_name(value).lower() for name, value in profile.directives if name == "proxy_set_header"}
    headers = [(quote(h), v) for h, v in PROXY_HEADERS if h.lower() not in own_headers]
    if profile.backend_scheme not in ("http", "https", *GRPC_SCHEMES, "fcgi", "auto"):
        raise RenderError(f"location profile {profile.name}: the backend scheme must be http, https, grpc, grpcs, "
                          f"fcgi or auto, got {profile.backend_scheme!r}")
    settings = list(profile.directives)
    if profile.backend_scheme in GRPC_SCHEMES:
        headers = [(h, v) for h, v in headers if h.strip('"').lower() not in _HOP_BY_HOP]
        settings = [("grpc_set_header", value) if name == "proxy_set_header" else (name, value)
                    for name, value in settings]
        settings += [(_GRPC_TIMEOUTS[name], value) for name, value in profile.directives if name in _GRPC_TIMEOUTS]
    cors = cors_table(profile.cors) if profile.cors else None
    for what, snippet in (("snippet", profile.snippet), ("server snippet", profile.server_snippet),
                          ("stream snippet", profile.stream_snippet)):
        if snippet is not None:
            try:
                check_contained(snippet)
            except SnippetError as err:
                raise RenderError(f"location profile {profile.name}: {what}: {err}") from None
    if profile.basic_auth is not None:
        check_basic_auth(profile.basic_auth)
    if profile.modsecurity is not None:
        try:
            check_profile_modsecurity(profile.modsecurity)
        except ModSecurityRenderError as err:
            raise RenderError(f"location profile {profile.name}: {err}") from None
    external_auth = _external_auth(profile.external_auth, profile.name) if profile.external_auth else None
    tls = profile.backend_tls
    return _RenderedProfile(
        backend_tls=_backend_tls(tls) if tls else [], sets_ssl_name=bool(tls and tls.name),
        verified=bool(tls and tls.verify == "on"),
        custom_http_errors=_error_codes(profile.custom_http_errors), pass_backend_errors=profile.pass_backend_errors,
        unreachable_answers_503=profile.unreachable_answers_503,
        mirror=_mirror(profile.mirror) if profile.mirror else None,
        response_headers=[literal(f"{_response_header_name(name)}: {value}") for name, value in profile.response_headers],
        fastcgi_params=[fastcgi_param_arguments(name, value) for name, value in profile.fastcgi_params],
        sets_ssl_server_name=bool(tls and tls.server_name),name=profile.name, settings=_settings(settings), headers=headers,
                            scheme=profile.backend_scheme, cors=cors,
                            rate_limit=rate_limit_lines(profile.rate_limit) if profile.rate_limit else None,
                            denied=[quote(network) for network in profile.denied], snippet=profile.snippet,
                            basic_auth=profile.basic_auth, external_auth=external_auth)


_AUTH_URL = re.compile(r"(http|https)://([^/?#]+)(/[^?#]*)")
_HEADER_NAME = re.compile(r"[A-Za-z0-9_-]{1,100}")
_HTTP_METHOD = re.compile(r"[A-Z]{1,16}")


@dataclass(frozen=True)
class _RenderedMirror:
    target: str  # one quoted nginx argument (it may hold the request's variables)
    host: str  # quoted
    request_body: bool


_URL_TEXT = re.compile(r"(?:https?://[A-Za-z0-9.:-]*)?(?:[/?#][A-Za-z0-9\-._~%!&()*+,=:@/?#]*)?")
# The request's own variables a URL of a mirror or a redirect may hold (the annotations allow the same).
REQUEST_VARIABLES = ("request_uri", "uri", "args", "is_args", "host", "scheme")
_REQUEST_VARIABLE = re.compile(r"\$(" + "|".join(REQUEST_VARIABLES) + r")(?![A-Za-z0-9_])")


def url_with_request_variables(url: str) -> str:
    """`url` (http(s), or a path) as one quoted nginx argument: the request's variables as ${name}, the rest plain
    URL text; any other `$`, quote or space raises RenderError."""
    plain = "".join(_REQUEST_VARIABLE.split(url)[::2])
    if not url.startswith(("http://", "https://", "/")) or not _URL_TEXT.fullmatch(plain) or "$" in plain:
        raise RenderError(f"{url!r} cannot be written into nginx.conf: it must be an http(s) URL holding only the "
                          f"request's variables (${', $'.join(REQUEST_VARIABLES)})")
    return '"' + _REQUEST_VARIABLE.sub(lambda m: "${" + m[1] + "}", url) + '"'


# The variables a FastCGI parameter's value may hold (fastcgi-params-configmap): those of nginx's own fastcgi_params
# and fastcgi.conf, which describe the request and the script; a value is never an open door to any variable.
FASTCGI_VARIABLES = ("args", "content_length", "content_type", "document_root", "document_uri", "fastcgi_path_info",
                     "fastcgi_script_name", "host", "https", "is_args", "nginx_version", "query_string",
                     "realpath_root", "remote_addr", "remote_port", "request_filename", "request_method",
                     "request_scheme", "request_uri", "scheme", "server_addr", "server_name", "server_port",
                     "server_protocol", "status", "uri")
_FASTCGI_VARIABLE = re.compile(r"\$(?:\{(" + "|".join(FASTCGI_VARIABLES) + r")\}|(" + "|".join(FASTCGI_VARIABLES)
                               + r")(?![A-Za-z0-9_]))")
_FASTCGI_NAME = re.compile(r"[A-Za-z0-9._-]{1,128}")
_FASTCGI_TEXT = re.compile(r"[A-Za-z0-9_./-]{0,1024}")  # ingress-nginx's characters for a value, but `$`, `{`, `}`


def fastcgi_param_arguments(name: str, value: str) -> str:
    """`fastcgi_param`'s arguments for the parameter `name` with `value`: FASTCGI_VARIABLES as ${name}, the rest
    plain text (ingress-nginx's characters: letters, digits, `_`, `-`, `.`, `/`); anything else raises RenderError."""
    plain = "".join(_FASTCGI_VARIABLE.split(value)[::3])
    if not _FASTCGI_NAME.fullmatch(name) or not _FASTCGI_TEXT.fullmatch(plain):
        raise RenderError(f"FastCGI parameter {name!r} = {value!r} cannot be written into nginx.conf: the name takes "
                          "letters, digits, '.', '_' and '-', the value those, '/' and the variables $"
                          + ", $".join(FASTCGI_VARIABLES))
    expanded = _FASTCGI_VARIABLE.sub(lambda m: "${" + (m[1] or m[2]) + "}", value)
    return f'{quote(name)} "{expanded}"'


def _server_tls(profile: LocationProfile) -> list[tuple[str, str]]:
    """ssl-ciphers and ssl-prefer-server-ciphers of `profile`, as directives of its hosts' server block."""
    lines = []
    if profile.ssl_ciphers is not None:
        lines.append(("ssl_ciphers", quote(profile.ssl_ciphers)))
    if profile.ssl_prefer_server_ciphers is not None:
        lines.append(("ssl_prefer_server_ciphers", quote(profile.ssl_prefer_server_ciphers)))
    return lines


def _mirror(mirror: Mirror) -> _RenderedMirror:
    return _RenderedMirror(target=url_with_request_variables(mirror.target), host=quote(mirror.host),
                           request_body=mirror.request_body)


def _response_header_name(name: str) -> str:
    if not _HEADER_NAME.fullmatch(name):
        raise RenderError(f"custom header {name!r} is not a header name")
    return name


def _error_codes(codes: tuple[int, ...] | None) -> tuple[int, ...] | None:
    if codes is not None and not all(isinstance(code, int) and 400 <= code <= 599 for code in codes):
        raise RenderError(f"custom-http-errors must be statuses from 400 to 599, got {codes!r}")
    return codes


# What proxy-ssl-* writes, after "proxy_ssl_" (or "grpc_ssl_").
BACKEND_TLS_DIRECTIVES = ("trusted_certificate", "ciphers", "protocols", "verify", "verify_depth", "certificate",
                          "certificate_key", "name", "server_name")


def _backend_tls(tls: BackendTls) -> list[tuple[str, str, bool]]:
    """proxy-ssl-*'s directives, as ingress-nginx writes them (the name and SNI only when set): (directive after
    "proxy_ssl_", its quoted arguments or a file name in NginxPaths.ssl_dir, whether it is a file)."""
    for name in (tls.ca_file, tls.cert_file):
        if name is not None and not _USER_FILE.fullmatch(name):
            raise RenderError(f"proxy-ssl file name {name!r} may only hold letters, digits, '.', '_' and '-'")
    if tls.verify not in ("on", "off") or tls.server_name not in (None, "on", "off"):
        raise RenderError("proxy-ssl-verify and proxy-ssl-server-name must be on or off")
    trusted = (tls.ca_file, True) if tls.ca_file is not None else (quote(system_ca_file()), False)
    directives = [("trusted_certificate", *trusted), ("ciphers", quote(tls.ciphers), False),
                  ("protocols", arguments(tls.protocols.split()), False), ("verify", tls.verify, False),
                  ("verify_depth", str(int(tls.depth)), False)]
    if tls.cert_file:
        directives += [("certificate", tls.cert_file, True), ("certificate_key", tls.cert_file, True)]
    if tls.name:
        directives.append(("name", quote(tls.name), False))
    if tls.server_name:
        directives.append(("server_name", tls.server_name, False))
    if tls.verify == "on":
        # The Lua balancer's upstream keeps TLS sessions (and kept-alive connections) by address, whatever the
        # profile: a session another profile verified for another name or CA would be resumed unchecked here.
        directives.append(("session_reuse", "off", False))
    return directives


def system_ca_file() -> str:
    """The file of the CAs the system trusts, as OpenSSL finds it (Debian: /etc/ssl/certs/ca-certificates.crt)."""
    paths = ssl.get_default_verify_paths()
    return paths.cafile or paths.openssl_cafile


def auth_upstream(profile_name: str) -> str:
    """The name of the upstream (and of its backend in the pushed tables) of a profile's auth-keepalive."""
    return f"pyngress_auth_{profile_name}"


def auth_endpoint(auth: ExternalAuth) -> str:
    """host:port of the auth service, as the balancer's table takes an endpoint (the syncer resolves a name)."""
    url = _AUTH_URL.fullmatch(auth.url)
    if not url:
        raise RenderError(f"auth URL {auth.url!r} must be http(s)://host[:port]/path without query")
    host, _, port = url[2].partition(":")
    return f"{host.lower()}:{port or (443 if url[1] == 'https' else 80)}"


def _external_auth(auth: ExternalAuth, profile_name: str) -> _RenderedExternalAuth:
    url = _AUTH_URL.fullmatch(auth.url)
    if not url:
        raise RenderError(f"auth URL {auth.url!r} must be http(s)://host[:port]/path without query")
    for header, _ in auth.proxy_set_headers:
        if not _HEADER_NAME.fullmatch(header):
            raise RenderError(f"auth header {header!r} must be a header name")
    if auth.snippet is not None:
        try:
            check_contained(auth.snippet)
        except SnippetError as err:
            raise RenderError(f"auth-snippet: {err}") from None
    if auth.method is not None and not _HTTP_METHOD.fullmatch(auth.method):
        raise RenderError(f"{auth.method!r} is not an HTTP method")
    headers = []
    for header in auth.response_headers:
        if not _HEADER_NAME.fullmatch(header):
            raise RenderError(f"{header!r} is not a header name")
        headers.append((quote(header), "upstream_http_" + header.lower().replace("-", "_")))
    if auth.keepalive and "$" in auth.url:
        raise RenderError("auth-keepalive needs an auth-url without nginx variables (its host is resolved at each push)")
    return _RenderedExternalAuth(
        url=_with_auth_url_variables(auth.url), host=_with_auth_url_variables(url[2]),
        method=auth.method and quote(auth.method),
        request_redirect=auth.request_redirect and quote(auth.request_redirect), response_headers=headers,
        response_headers_lua=lua_literal(list(auth.response_headers)),
        server_name=_with_auth_url_variables(url[2].partition(":")[0]),
        signin=auth.signin and lua_string(auth.signin),
        signin_redirect_param=lua_string(auth.signin_redirect_param), always_set_cookie=auth.always_set_cookie,
        cache_key=auth.cache_key and _cache_key(auth.cache_key),
        cache_durations=[arguments(duration) for duration in auth.cache_durations],
        proxy_set_headers=[(quote(header), with_variables(value)) for header, value in auth.proxy_set_headers],
        keepalive=auth.keepalive, snippet=auth.snippet,
        keepalive_url=quote(f"{url[1]}://{auth_upstream(profile_name)}{url[3]}") if auth.keepalive else None)


# The nginx variables auth-url may hold (ingress-nginx's oauth2-proxy example: https://$host/oauth2/auth), by the
# name users write → the variable pyngress holds it in. Only names of the request's own host: the auth request
# goes to a host that routed to this Ingress, never to one a client picks in a path or query.
AUTH_URL_VARIABLES = {"host": "host", "http_host": "http_host", "best_http_host": "pyngress_best_http_host"}
_AUTH_URL_VARIABLE = re.compile(r"\$(" + "|".join(AUTH_URL_VARIABLES) + r")(?![A-Za-z0-9_])")


def _with_auth_url_variables(text: str) -> str:
    """`text` as one quoted nginx argument, its allowed variables as ${name}; any other '$' is refused (quote)."""
    parts = _AUTH_URL_VARIABLE.split(text)
    # split() alternates plain text and the captured variable names.
    return '"' + "".join(quote(part)[1:-1] if i % 2 == 0 else "${" + AUTH_URL_VARIABLES[part] + "}"
                         for i, part in enumerate(parts)) + '"'


# The variables an auth cache key may hold: nginx always knows them (the prefixed ones exist for any name),
# so a key never fails nginx -t.
CACHE_KEY_VARIABLES = (r"(?:http|cookie|arg)_[a-z0-9_]{1,64}|remote_user|remote_addr|host|request_uri|uri|scheme|"
                       r"request_method")
_CACHE_KEY_PART = re.compile(rf"\$({CACHE_KEY_VARIABLES})(?![a-z0-9_])|([A-Za-z0-9_:-]+)")


def _cache_key(key: str) -> str:
    """The cache key as one quoted argument: its variables as ${name}, what is between them as plain text.

    The host, the route (its Ingress host, Ingress, Service and path: the labels the router sets in
    $pyngress_metric) and the profile's internal location are part of every key (they come first): as in
    ingress-nginx, which keys the cache per server and location, an answer is never reused for another host's or
    another path's requests, whatever key its Ingress chose (a fixed key would let an allow for /foo admit /bar).
    """
    parts, end = [], 0
    for match in _CACHE_KEY_PART.finditer(key):
        if match.start() != end:
            break
        parts.append("${" + match[1] + "}" if match[1] else match[2])
        end = match.end()
    if end != len(key) or not parts:
        raise RenderError(f"auth cache key {key!r} may only hold known nginx variables, letters, digits and _:-")
    return '"${host}|${pyngress_metric}|${uri}|' + "".join(parts) + '"'


_USER_FILE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def check_basic_auth(auth: BasicAuth) -> None:
    """Raise RenderError unless auth_basic can be written for `auth` and means what it says."""
    quote(auth.realm)
    # nginx reads `auth_basic off` as "no authentication": such a realm would serve the location open.
    if auth.realm == "off":
        raise RenderError('the realm "off" would turn basic authentication off in nginx')
    if not _USER_FILE.fullmatch(auth.user_file):
        raise RenderError(f"htpasswd file name {auth.user_file!r} may only hold letters, digits, '.', '_' and '-'")


def cors_table(policy: CorsPolicy) -> str:
    """The policy as the Lua table literal cors.lua reads (its options are strings)."""
    options = {"allow_origin": policy.allow_origin, "allow_methods": policy.allow_methods,
               "allow_headers": policy.allow_headers, "allow_credentials": str(policy.allow_credentials).lower(),
               "max_age": str(policy.max_age)}
    if policy.expose_headers is not None:
        options["expose_headers"] = policy.expose_headers
    return "{ " + " ".join(f"{name} = {lua_string(value)}," for name, value in sorted(options.items())) + " }"


_SIZE = re.compile(r"([0-9]+)([kKmMgG]?)")
# nginx's size units (the annotation and ConfigMap validators write sizes with them).
BYTES_PER_UNIT = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


def size_bytes(value: str) -> int:
    """An nginx size ("8k", "1m", "512") in bytes."""
    match = _SIZE.fullmatch(value)
    if not match:
        raise RenderError(f"{value!r} is not a size such as 512, 8k or 1m")
    return int(match[1]) * BYTES_PER_UNIT[match[2].lower()]


def body_limits(profiles: Sequence[LocationProfile], globals_: dict[str, str]) -> dict[str, int]:
    """profile name → the largest request body its location takes, in bytes (no entry: no limit).

    nginx checks a request's Content-Length against client_max_body_size when it picks a location, a step
    that a named location entered with ngx.exec skips; the router checks it instead (router.lua). A
    chunked body is checked by nginx while it is read, with the named location's own setting.
    """
    default = size_bytes({**HTTP_DEFAULTS, **globals_}["client_max_body_size"])
    limits = {}
    for profile in profiles:
        own = [value for name, value in profile.directives if name == "client_max_body_size"]
        limit = size_bytes(own[-1]) if own else default
        if limit:
            limits[profile.name] = limit
    return limits


@dataclass(frozen=True, kw_only=True)
class _RenderedBlockLists:
    networks: list[str]  # quoted
    maps: list[tuple[str, str, list[str]]]  # (variable set to 1 for a blocked request, header variable, keys)


def _map_key(entry: str) -> str:
    """A map key matching `entry`: "~regex" as it is; an exact value behind nginx's "\\" prefix, which keeps a
    value such as "default" or "~x" from being read as a map parameter or a regular expression."""
    return quote(entry if entry.startswith("~") else "\\" + entry)


def block_lists(blocked: BlockLists) -> _RenderedBlockLists:
    maps = [(variable, header, [_map_key(entry) for entry in entries])
            for variable, header, entries in (("$pyngress_blocked_user_agent", "$http_user_agent", blocked.user_agents),
                                              ("$pyngress_blocked_referer", "$http_referer", blocked.referers))
            if entries]
    return _RenderedBlockLists(networks=[quote(network) for network in blocked.networks], maps=maps)


def _header_name(value: str | Sequence[str]) -> str:
    words = _words(value)
    return words[0] if words else ""


def _port(name: str, value: int) -> int:
    if not isinstance(value, int) or not 0 < value < 65536:
        raise RenderError(f"{name} must be a port number 1-65535, got {value!r}")
    return value


# The template's own filters: every value reaches nginx.conf through one of them.
TEMPLATE_FILTERS = {"q": quote, "lua": lua_string, "with_variables": with_variables}


def template_from(directory: Path) -> Template:
    """The template in `directory`, its Lua loaded from there; raises TemplateError naming what fails."""
    return compile_files(read_files(directory), source=directory, lua_dir=directory / LUA_SUBDIR,
                         filters=TEMPLATE_FILTERS)


@functools.cache
def builtin_template() -> Template:
    return template_from(BUILTIN_DIR)


def main_settings(server: ServerSettings) -> list[tuple[str, str]]:
    """The main context's settings from the ConfigMap (nginx's processes)."""
    settings = [("worker_processes", server.worker_processes),
                ("worker_shutdown_timeout", server.worker_shutdown_timeout)]
    if server.worker_cpu_affinity:
        settings.append(("worker_cpu_affinity", server.worker_cpu_affinity))
    if server.worker_rlimit_nofile:
        settings.append(("worker_rlimit_nofile", str(server.worker_rlimit_nofile)))
    return settings


def http_level_settings(config: NginxConfig) -> dict[str, str]:
    """The http block's settings: the defaults, the ConfigMap's globals over them, and the gRPC timeouts
    taking the proxy ones' values."""
    settings = {**HTTP_DEFAULTS, **config.globals}
    settings.update({grpc: settings[proxy] for proxy, grpc in _GRPC_TIMEOUTS.items()})
    names = [host for host, _ in config.snippet_servers]
    if names:
        # The hosts with a server block of their own are server names: never fewer buckets, nor smaller ones,
        # than they need (ingress-nginx computes both from the hosts the same way).
        for directive, needed in (("server_names_hash_bucket_size", _hash_bucket_size(max(map(len, names)))),
                                  ("server_names_hash_max_size", _next_power_of_two(len(names)))):
            if directive in settings and int(settings[directive]) < needed:
                settings[directive] = str(needed)
    return settings


def _next_power_of_two(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


def _hash_bucket_size(longest_name: int) -> int:
    """The bucket size a server name of this length needs in nginx's hash (64-bit words: a pointer, the length,
    the name aligned to a word), as a power of two."""
    word = 8
    aligned = (longest_name + 2 + word - 1) // word * word
    return _next_power_of_two(2 * word + aligned)


def _gateway_ports(own_ports: tuple[tuple[int, str], ...], *, taken: set[int]) -> list[tuple[int, str]]:
    """The ports Gateway listeners have to themselves, checked: a number, not nginx's HTTP or HTTPS port, http or https."""
    for port, scheme in own_ports:
        if _port("a Gateway listener's port", port) in taken or scheme not in ("http", "https"):
            raise RenderError(f"a Gateway listener cannot have port {port} ({scheme}) to itself")
    return list(own_ports)


def render(config: NginxConfig, template: Template | None = None) -> str:
    """The nginx.conf for `config` from `template` (the built-in one by default). Raises RenderError naming
    any value that cannot be written safely, TemplateError when the template itself fails."""
    # nginx's only TCP ports (its configuration API and passthrough TLS listener are Unix sockets); with
    # passthrough the proxy owns the HTTPS port, and the numbers still fill nginx's redirects and headers.
    ports = {name: _port(name, getattr(config, name)) for name in ("http_port", "https_port")}
    if ports["http_port"] == ports["https_port"]:
        raise RenderError(f"nginx needs distinct ports for HTTP and HTTPS, got {ports['http_port']} for both")
    profiles = list(config.profiles)
    if DEFAULT_PROFILE not in {p.name for p in profiles}:
        profiles.insert(0, LocationProfile(DEFAULT_PROFILE))
    by_name = {p.name: p for p in profiles}
    if len(by_name) != len(profiles):
        raise RenderError(f"location profile names must be unique, got {sorted(p.name for p in profiles)}")
    http_settings = _settings(sorted(http_level_settings(config).items()))
    server = config.server
    return (template or builtin_template()).render(
        paths=NginxPaths.of(config.state_dir, config.run_dir),
        shared_dict_size=SHARED_DICT_SIZE,
        ssl_passthrough=bool(config.ssl_passthrough),
        listen_ipv6=bool(config.listen_ipv6),
        use_forwarded_headers=bool(config.use_forwarded_headers),
        header_sources=_header_sources(use_forwarded_headers=bool(config.use_forwarded_headers),
                                      use_proxy_protocol=bool(config.use_proxy_protocol),
                                      compute_full_forwarded_for=server.compute_full_forwarded_for,
                                      forwarded_for_header=server.forwarded_for_header),
        use_proxy_protocol=bool(config.use_proxy_protocol),
        blocked=block_lists(config.blocked),
        http_settings=http_settings,
        profiles=[check_profile(p) for p in profiles],
        # The error locations: the ConfigMap's statuses and those of every profile's custom-http-errors.
        error_codes=sorted(set(server.custom_http_errors).union(*(p.custom_http_errors or () for p in profiles))),
        snippet_servers=[(quote(host), by_name[name].server_snippet, _server_tls(by_name[name]))
                         for host, name in config.snippet_servers
                         if name in by_name],
        stream_snippets=[p.stream_snippet for p in profiles if p.stream_snippet],
        stream_servers=list(config.stream_servers), stream_js=str(BUILTIN_DIR / "njs" / "stream.js"),
        gateway_ports=_gateway_ports(config.gateway_ports, taken=set(ports.values())),
        resolvers=" ".join(system_resolvers()) if server.enable_ocsp or any(p.external_auth or p.mirror
                                                                            for p in profiles) else "",
        auth_cache=any(p.external_auth and p.external_auth.cache_key for p in profiles),
        body_limits=body_limits(profiles, config.globals),
        access_log=config.access_log,
        geoip2=config.geoip2,
        modsecurity=rendered_modsecurity(server, profiles),
        server=server,
        main_settings=_settings(main_settings(server)),
        request_metrics=config.request_metrics.module_directives() if config.request_metrics else (),
        nginx_module=nginx_module(),
        metrics_dict_size=METRICS_DICT_SIZE,
        tracing=lua_literal(config.tracing.lua_config() if config.tracing else None),
        span_variables=tracing.JOINED_VARIABLES, spans_dict_size=tracing.SPANS_DICT_SIZE,
        **ports,
    )

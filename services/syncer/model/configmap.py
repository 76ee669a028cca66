"""The controller ConfigMap (--configmap NS/NAME): global nginx settings and controller-wide defaults.

Keys and defaults follow ingress-nginx's. A key with a bad value is reported, and the value it had before
(in this syncer's run) keeps applying, or its default when it had none; the rest of the ConfigMap still
applies. A key ingress-nginx has that pyngress does not take is reported with the reason (UNSUPPORTED);
an unknown key is ignored with a warning.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Literal, Mapping

from services.nginxconf.config import UPSTREAMINFO_FORMAT, AccessLog, ExternalAuth, ServerSettings
from services.nginxconf.render import PROXY_HEADERS, RenderError

from ..annotations import ANNOTATIONS
from ..annotations.base import InvalidValue, Risk
from ..annotations.external_auth import GLOBAL_AUTH_KEYS, parse_global_auth
from ..annotations.ipallowlist import cidr_list
from ..annotations.renderable import check_renders
from ..annotations.validators import (HEADER_NAME, boolean, duration, integer, ip_network, is_true, matching, one_of,
                                      size)
from . import block_lists, configmap_access_log, configmap_server_keys
from .configmap_directives import BROTLI_MODULE, DEFAULT_BROTLI_TYPES, DEFAULT_GZIP_TYPES, GLOBAL_DIRECTIVES, mime_types
from .configmap_modsecurity import MODSECURITY_KEYS
from .configmap_snippets import SNIPPET_KEYS, contained_snippet
from .configmap_server_keys import ANNOTATION_DEFAULTS, annotation_default
from .configmap_tracing import TRACING_KEYS, TracingKeys
from .configmap_geoip2 import GEOIP2_KEYS
from .configmap_unsupported import UNSUPPORTED
from .header_configmaps import configmap_reference, headers_of, object_reference
from .problems import Problem


def _risk(value: str) -> Risk:
    return Risk[one_of(*(r.name.capitalize() for r in Risk))(value).upper()]


@dataclass(frozen=True, kw_only=True)
class ControllerConfig(TracingKeys):
    """The parsed ConfigMap: nginx.conf globals plus the typed values other parts of the model need."""
    globals: dict[str, str] = field(default_factory=lambda: {d: v for d, _, v in GLOBAL_DIRECTIVES.values()})
    ssl_redirect: bool = True
    force_ssl_redirect: bool = False
    hsts: bool = True
    hsts_max_age: int = 31536000
    hsts_include_subdomains: bool = True
    hsts_preload: bool = False
    use_forwarded_headers: bool = False
    use_proxy_protocol: bool = False
    # No listener on [::] beside the IPv4 ones (ingress-nginx's disable-ipv6).
    disable_ipv6: bool = False
    annotations_risk_level: Risk = Risk.HIGH
    strict_validate_path_type: bool = True
    annotation_value_word_blocklist: tuple[str, ...] = ()
    allow_snippet_annotations: bool = False
    block_cidrs: tuple[str, ...] = ()
    block_user_agents: tuple[str, ...] = ()
    block_referers: tuple[str, ...] = ()
    # Whether an Ingress may name a Secret (auth-secret) in another namespace.
    allow_cross_namespace_resources: bool = False
    # Whether an Ingress naming a host that another namespace owns (build.py: the namespace of the host's oldest
    # Ingress) is refused whole; by default its paths are served, as ingress-nginx serves them, and only the
    # host's certificate, redirects and server-level settings are the owner's.
    strict_host_ownership: bool = False
    # global-auth-url and its options: external auth for every Ingress without its own auth-url (and
    # without enable-global-auth: "false"). A bad global-auth-* value denies those Ingresses (503) instead:
    # `global_auth_problem` says why.
    global_auth: ExternalAuth | None = None
    global_auth_problem: str | None = None
    # The access log (configmap_access_log.py).
    disable_access_log: bool = False
    access_log_path: str = AccessLog.path
    access_log_params: str = AccessLog.params
    log_format_upstream: str = UPSTREAMINFO_FORMAT
    log_format_escape_json: bool = False
    log_format_escape_none: bool = False
    access_log_for_default_backend: bool = False
    skip_access_log_urls: tuple[str, ...] = ()
    # no-auth-locations: Ingress paths starting with one of these are served without authentication.
    no_auth_locations: tuple[str, ...] = ("/.well-known/acme-challenge",)
    # GeoIP2 (configmap_geoip2.py): the module and the databases of --maxmind-edition-ids. The autoreload interval is
    # checked and kept for ingress-nginx compatibility; the syncer's watch serves a replaced database instead.
    use_geoip2: bool = False
    geoip2_autoreload_minutes: int = 0
    http_access_log_path: str = ""  # the HTTP access log's own path ("": access-log-path)
    # enable-syslog: both logs also go to syslog-host:syslog-port (the access log only there, as in ingress-nginx).
    enable_syslog: bool = False
    syslog_host: str = ""
    syslog_port: int = 514
    gzip_disable: str = ""  # user agents that get no gzip (with use-gzip)
    ssl_session_ticket_key: bytes | None = None  # decoded; its file is written beside the certificates
    bind_address: tuple[str, ...] = ()  # IPv4 and IPv6 addresses listened on instead of every address
    # The keys of ANNOTATION_DEFAULTS the ConfigMap sets: annotation name → value, for every Ingress without it.
    ingress_defaults: dict[str, str] = field(default_factory=dict)
    # Parts of directives that take more than one key (_with_composite_directives).
    proxy_buffers_number: int = 4
    ssl_session_cache: bool = True
    ssl_session_cache_size: str = "10m"
    use_gzip: bool = False
    gzip_level: int = 1
    gzip_min_length: int = 256
    gzip_types: str = DEFAULT_GZIP_TYPES
    brotli_level: int = 4
    brotli_min_length: int = 20
    brotli_types: str = DEFAULT_BROTLI_TYPES
    # NAMESPACE/NAME of the ConfigMaps of headers (header_configmaps.py), read into `server`.
    add_headers: str | None = None
    proxy_set_headers: str | None = None
    ssl_dh_param: str | None = None  # NAMESPACE/NAME of a Secret with dhparam.pem (dh_param.py)
    # whitelist-source-range, denylist-source-range: for every Ingress without the annotation of its own.
    default_allowlist: str = ""
    default_denylist: str = ""
    load_balance: str = "round_robin"  # load-balance: for every Ingress without the annotation
    allowed_response_headers: tuple[str, ...] = ()  # global-allowed-response-headers: what custom-headers may set
    server: ServerSettings = field(default_factory=ServerSettings)
    # The raw values accepted, by key: what keeps applying when a later version of the ConfigMap has a bad value.
    accepted: dict[str, str] = field(default_factory=dict)

    @property
    def annotation_defaults(self) -> dict[str, tuple[str, tuple[str, ...]]]:
        """Annotations the ConfigMap sets for every Ingress: name → (value, the names any of which overrides it)."""
        defaults: dict[str, tuple[str, tuple[str, ...]]] = {}
        if self.default_allowlist:
            defaults["allowlist-source-range"] = (self.default_allowlist,
                                                  ("allowlist-source-range", "whitelist-source-range"))
        if self.default_denylist:
            defaults["denylist-source-range"] = (self.default_denylist, ("denylist-source-range",))
        if self.load_balance != "round_robin":
            defaults["load-balance"] = (self.load_balance, ("load-balance",))
        for name, value in self.ingress_defaults.items():
            defaults[name] = (value, (name,))
        return defaults

    @property
    def access_log(self) -> AccessLog:
        escape: Literal["default", "json", "none"] = (
            "none" if self.log_format_escape_none else "json" if self.log_format_escape_json else "default")
        if self.server.syslog_server:
            # syslog takes no buffer=, flush= or gzip (nginx sends a datagram per line).
            path, params = f"syslog:server={self.server.syslog_server}", ""
        else:
            path, params = self.http_access_log_path or self.access_log_path, self.access_log_params
        return AccessLog(enabled=not self.disable_access_log, path=path, params=params, format=self.log_format_upstream, escape=escape,
                         default_backend=self.access_log_for_default_backend, skip_urls=self.skip_access_log_urls)


def _words(value: str) -> tuple[str, ...]:
    """A comma-separated list of words; empty items are dropped (ingress-nginx would let an empty word block
    every value)."""
    return tuple(dict.fromkeys(word.strip() for word in value.split(",") if word.strip()))


def _flag(value: str) -> bool:
    return is_true(boolean(value))


def _count(low: int, high: int) -> Callable[[str], int]:
    check = integer(low, high)
    return lambda value: int(check(value))




def _worker_processes(value: str) -> str:
    return value if value == "auto" else integer(1, 1024)(value)


_worker_cpu_affinity = matching(r"|auto(?: [01]{1,64})?|[01]{1,64}(?: [01]{1,64}){0,1023}",
                                says='must be empty, "auto", or a CPU bit mask per worker such as "0001 0010"')
_header_name = matching(HEADER_NAME, says="must be a header name such as X-Forwarded-For")


def _comma_list(item: Callable[[str], str]) -> Callable[[str], tuple[str, ...]]:
    """Comma-separated items, each checked by `item`."""
    return lambda value: tuple(item(word) for word in _words(value))


_header_names = _comma_list(matching(HEADER_NAME, says="must be header names separated by commas, such as "
                                                       "X-Powered-By,Server"))
_url_paths = _comma_list(matching(r"/[A-Za-z0-9._~!$&'()*+,;=:@%/-]{0,1023}",
                                  says="must be URL paths separated by commas, such as /healthz,/metrics"))


def _path_prefixes(value: str) -> tuple[str, ...]:
    """Prefixes an Ingress path is compared with (no-auth-locations), read as ingress-nginx reads them: split at
    commas, trimmed, empty items skipped. They are never written into nginx.conf."""
    prefixes = tuple(item.strip() for item in value.split(",") if item.strip())
    if any(not prefix.isprintable() for prefix in prefixes):
        raise InvalidValue("must be path prefixes separated by commas, such as /.well-known/acme-challenge,/public")
    return prefixes


def _brotli(value: str) -> bool:
    wanted = _flag(value)
    if wanted and not Path(BROTLI_MODULE).is_file():
        raise InvalidValue("Debian's nginx brotli module is not installed on this node (apt-get install "
                           "libnginx-mod-http-brotli-filter)")
    return wanted


def _status_codes(value: str) -> tuple[int, ...]:
    """Comma-separated HTTP error statuses ("404,503")."""
    codes = _comma_list(integer(400, 599))(value)
    if not codes:
        raise InvalidValue("must be error statuses separated by commas, such as 404,503")
    return tuple(sorted({int(code) for code in codes}))


def _networks(value: str) -> tuple[str, ...]:
    networks = _words(value)
    if not networks:
        raise InvalidValue("must name at least one network, such as 10.0.0.0/8 or 0.0.0.0/0")
    return tuple(str(ip_network(network)) for network in networks)


def _redirect_code(value: str) -> int:
    return int(one_of("301", "302", "307", "308")(value))


def _error_log_level(value: str) -> str:
    return one_of("debug", "info", "notice", "warn", "error", "crit", "alert", "emerg")(value)


# ConfigMap key → (ControllerConfig field, parser to its type).
FIELDS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "ssl-redirect": ("ssl_redirect", _flag),
    "force-ssl-redirect": ("force_ssl_redirect", _flag),
    "hsts": ("hsts", _flag),
    "hsts-max-age": ("hsts_max_age", lambda v: int(integer(0, 10**10)(v))),
    "hsts-include-subdomains": ("hsts_include_subdomains", _flag),
    "hsts-preload": ("hsts_preload", _flag),
    "use-forwarded-headers": ("use_forwarded_headers", _flag),
    "use-proxy-protocol": ("use_proxy_protocol", _flag),
    "disable-ipv6": ("disable_ipv6", _flag),
    "annotations-risk-level": ("annotations_risk_level", _risk),
    "strict-validate-path-type": ("strict_validate_path_type", _flag),
    "annotation-value-word-blocklist": ("annotation_value_word_blocklist", _words),
    "allow-snippet-annotations": ("allow_snippet_annotations", _flag),
    "block-cidrs": ("block_cidrs", block_lists.networks),
    "block-user-agents": ("block_user_agents", block_lists.header_patterns),
    "block-referers": ("block_referers", block_lists.header_patterns),
    "allow-cross-namespace-resources": ("allow_cross_namespace_resources", _flag),
    "strict-host-ownership": ("strict_host_ownership", _flag),
    "disable-access-log": ("disable_access_log", _flag),
    "access-log-path": ("access_log_path", configmap_access_log.log_path),
    "access-log-params": ("access_log_params", configmap_access_log.log_params),
    "log-format-upstream": ("log_format_upstream", configmap_access_log.log_format),
    "log-format-escape-json": ("log_format_escape_json", _flag),
    "log-format-escape-none": ("log_format_escape_none", _flag),
    "enable-access-log-for-default-backend": ("access_log_for_default_backend", _flag),
    "skip-access-log-urls": ("skip_access_log_urls", _url_paths),
    "no-auth-locations": ("no_auth_locations", _path_prefixes),
    "proxy-buffers-number": ("proxy_buffers_number", _count(1, 1024)),
    "ssl-session-cache": ("ssl_session_cache", _flag),
    # nginx refuses a shared zone smaller than 8 pages.
    "ssl-session-cache-size": ("ssl_session_cache_size", size(1024**3, 64 * 1024)),
    "use-gzip": ("use_gzip", _flag),
    "gzip-level": ("gzip_level", _count(1, 9)),
    "gzip-min-length": ("gzip_min_length", _count(0, 2**31 - 1)),
    "gzip-types": ("gzip_types", mime_types),
    "brotli-level": ("brotli_level", _count(1, 11)),
    "brotli-min-length": ("brotli_min_length", _count(0, 2**31 - 1)),
    "brotli-types": ("brotli_types", mime_types),
    "add-headers": ("add_headers", configmap_reference),
    "ssl-dh-param": ("ssl_dh_param", object_reference),
    "whitelist-source-range": ("default_allowlist", cidr_list),
    "load-balance": ("load_balance", one_of("round_robin", "ewma")),
    "global-allowed-response-headers": ("allowed_response_headers", _header_names),
    "denylist-source-range": ("default_denylist", cidr_list),
    "proxy-set-headers": ("proxy_set_headers", configmap_reference),
    **GEOIP2_KEYS,
    **TRACING_KEYS,
    "http-access-log-path": ("http_access_log_path", configmap_access_log.log_path),
    "enable-syslog": ("enable_syslog", _flag),
    "syslog-host": ("syslog_host", configmap_server_keys.syslog_host),
    "syslog-port": ("syslog_port", _count(1, 65535)),
    "gzip-disable": ("gzip_disable", configmap_server_keys.gzip_disable),
    "ssl-session-ticket-key": ("ssl_session_ticket_key", configmap_server_keys.ssl_session_ticket_key),
    "bind-address": ("bind_address", configmap_server_keys.bind_addresses),
}

# ConfigMap key → (ServerSettings field, parser to its type).
SERVER_FIELDS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "worker-processes": ("worker_processes", _worker_processes),
    "max-worker-connections": ("worker_connections", lambda v: int(integer(0, 1 << 20)(v)) or 16384),
    "max-worker-open-files": ("worker_rlimit_nofile", _count(0, 1 << 24)),
    "worker-shutdown-timeout": ("worker_shutdown_timeout", duration),
    "worker-cpu-affinity": ("worker_cpu_affinity", _worker_cpu_affinity),
    "error-log-level": ("error_log_level", _error_log_level),
    "upstream-keepalive-connections": ("keepalive_connections", _count(0, 1 << 20)),
    "upstream-keepalive-timeout": ("keepalive_timeout", duration),
    "upstream-keepalive-requests": ("keepalive_requests", _count(1, 10**9)),
    "upstream-keepalive-time": ("keepalive_time", duration),
    "use-http2": ("http2", _flag),
    "enable-brotli": ("brotli", _brotli),
    "generate-request-id": ("generate_request_id", _flag),
    "hide-headers": ("hide_headers", _header_names),
    "http-redirect-code": ("redirect_code", _redirect_code),
    "custom-http-errors": ("custom_http_errors", _status_codes),
    "no-tls-redirect-locations": ("no_tls_redirect_locations", _url_paths),
    "forwarded-for-header": ("forwarded_for_header", _header_name),
    "compute-full-forwarded-for": ("compute_full_forwarded_for", _flag),
    "enable-real-ip": ("enable_real_ip", _flag),
    "proxy-real-ip-cidr": ("real_ip_from", _networks),
    "log-format-stream": ("stream_log_format", configmap_access_log.stream_log_format),
    "stream-access-log-path": ("stream_access_log_path", configmap_access_log.log_path),
    "proxy-stream-timeout": ("proxy_stream_timeout", duration),
    "proxy-stream-responses": ("proxy_stream_responses", _count(0, 1 << 20)),
    "proxy-protocol-header-timeout": ("proxy_protocol_header_timeout", duration),
    "error-log-path": ("error_log_path", configmap_access_log.error_log_path),
    "debug-connections": ("debug_connections", configmap_server_keys.debug_connections),
    "enable-multi-accept": ("multi_accept", _flag),
    "enable-aio-write": ("aio_write", _flag),
    "allow-backend-server-header": ("allow_backend_server_header", _flag),
    "proxy-add-original-uri-header": ("add_original_uri_header", _flag),
    "retry-non-idempotent": ("retry_non_idempotent", _flag),
    "ssl-reject-handshake": ("ssl_reject_handshake", _flag),
    "limit-conn-zone-variable": ("limit_conn_zone_variable", configmap_server_keys.limit_conn_zone_variable),
    "disable-ipv6-dns": ("disable_ipv6_dns", _flag),
    "enable-ocsp": ("enable_ocsp", _flag),
    **{key: (target, contained_snippet) for key, target in SNIPPET_KEYS.items()},
    **MODSECURITY_KEYS,
}



def parse_controller_config(data: Mapping[str, Any], source: str, previous: Mapping[str, str] | None = None
                            ) -> tuple[ControllerConfig, list[Problem]]:
    """`data` is the ConfigMap's `data`; `source` names it in problems ("ConfigMap ns/name"); `previous` the
    values accepted from its last version (ControllerConfig.accepted), which keep applying over bad ones."""
    problems: list[Problem] = []
    globals_ = ControllerConfig().globals
    typed: dict[str, Any] = {}
    server: dict[str, Any] = {}
    ingress_defaults: dict[str, str] = {}
    accepted: dict[str, str] = {}
    previous = previous or {}
    global_auth = parse_global_auth(data)
    problems += [Problem.error(source, p) for p in global_auth.errors]
    problems += [Problem.warning(source, w) for w in global_auth.warnings]
    typed.update(global_auth=global_auth.auth, global_auth_problem=global_auth.problem)
    for key in sorted(data):
        raw = data[key]
        if key in GLOBAL_AUTH_KEYS:
            continue
        if key in UNSUPPORTED:
            problems.append(Problem.error(source, f"key {key} is not supported by pyngress ({UNSUPPORTED[key]}); "
                                                  "ignored"))
            continue
        if key in GLOBAL_DIRECTIVES:
            directive, validate, _ = GLOBAL_DIRECTIVES[key]
            target, store = directive, globals_
        elif key in FIELDS:
            target, validate = FIELDS[key]
            store = typed
        elif key in SERVER_FIELDS:
            target, validate = SERVER_FIELDS[key]
            store = server
        elif key in ANNOTATION_DEFAULTS:
            target, store = key, ingress_defaults
            validate = functools.partial(annotation_default, key)
        else:
            problems.append(Problem.warning(source, f"key {key} is not supported by pyngress; ignored"))
            continue
        try:
            store[target] = _checked(raw, target, validate, renders=store is globals_)
            accepted[key] = raw
        except (InvalidValue, RenderError) as err:
            kept = "the default applies"
            if key in previous:
                try:  # it was taken before; only what it depends on (a module on this node) could have changed
                    store[target] = _checked(previous[key], target, validate, renders=store is globals_)
                    accepted[key] = previous[key]
                    kept = f"the previous value {previous[key]!r} keeps applying"
                except (InvalidValue, RenderError):
                    pass
            problems.append(Problem.error(source, f"key {key} value {raw!r}: {err}; {kept}"))
    max_risk = typed.get("annotations_risk_level", ControllerConfig.annotations_risk_level)
    for key in [key for key in ingress_defaults if ANNOTATIONS[key].risk > max_risk]:
        # As a default it would be the Ingresses' own annotation, which annotations-risk-level would refuse.
        problems.append(Problem.error(source, f"key {key}: the {key} annotation is above annotations-risk-level "
                                              f"{max_risk.name.capitalize()}; ignored"))
        del ingress_defaults[key]
        accepted.pop(key)
    config = ControllerConfig(globals=globals_, server=ServerSettings(**server), accepted=accepted,
                              ingress_defaults=ingress_defaults, **typed)
    return _with_composite_directives(config), problems


def _checked(raw: Any, target: str, validate: Callable[[str], Any], *, renders: bool) -> Any:
    if not isinstance(raw, str):
        raise InvalidValue("ConfigMap values must be strings; quote it in the manifest")
    value = validate(raw)
    if renders:
        check_renders(target, value)  # a value render() refuses would stop every configuration
    return value


def _with_composite_directives(config: ControllerConfig) -> ControllerConfig:
    """The directives that take more than one key: proxy_buffers (number and size), ssl_session_cache (on and
    size), gzip's and brotli's."""
    globals_ = config.globals
    globals_["proxy_buffers"] = f"{config.proxy_buffers_number} {globals_['proxy_buffer_size']}"
    globals_["ssl_session_cache"] = f"shared:SSL:{config.ssl_session_cache_size}" if config.ssl_session_cache else "off"
    if config.server.brotli:
        globals_.update(brotli="on", brotli_comp_level=str(config.brotli_level),
                        brotli_min_length=str(config.brotli_min_length), brotli_types=config.brotli_types)
    if config.use_gzip:
        globals_.update(gzip="on", gzip_comp_level=str(config.gzip_level), gzip_http_version="1.1",
                        gzip_min_length=str(config.gzip_min_length), gzip_types=config.gzip_types, gzip_proxied="any",
                        gzip_vary="on")
        if config.gzip_disable:
            globals_["gzip_disable"] = config.gzip_disable
    if config.server.retry_non_idempotent and globals_["proxy_next_upstream"] != "off":
        globals_["proxy_next_upstream"] = " ".join(dict.fromkeys(
            [*globals_["proxy_next_upstream"].split(), "non_idempotent"]))
    server = config.server
    # The TCP and UDP services' log: stream-access-log-path, else access-log-path (never the HTTP log's own path).
    server = replace(server, stream_access_log_path=server.stream_access_log_path or config.access_log_path,
                     syslog_server=configmap_server_keys.syslog_server(config.syslog_host, config.syslog_port)
                     if config.enable_syslog and config.syslog_host else "",
                     bind_ipv4=tuple(host for host in config.bind_address if ":" not in host),
                     bind_ipv6=tuple(host for host in config.bind_address if ":" in host))
    return replace(config, server=server)


def load_controller_config(store: Mapping[str, dict], configmap: str | None, previous: Mapping[str, str] | None = None
                           ) -> tuple[ControllerConfig, list[Problem]]:
    """The controller ConfigMap named by --configmap ("NS/NAME") from `store`; defaults when unset or absent.
    `previous`: as for parse_controller_config."""
    defaults = _with_composite_directives(ControllerConfig())
    if not configmap:
        return defaults, []
    namespace, _, name = configmap.partition("/")
    if not namespace or not name:
        return defaults, [Problem.error(f"--configmap {configmap!r}",
                                                  "must be NAMESPACE/NAME; using the defaults")]
    obj = store.get(f"ConfigMap/{namespace}/{name}")
    if obj is None:
        return defaults, []
    data = obj.get("data") or {}
    if not isinstance(data, dict):
        return defaults, [Problem.error(f"ConfigMap {configmap}",
                                                  "data must be a map of strings; using the defaults")]
    config, problems = parse_controller_config(data, f"ConfigMap {configmap}", previous)
    return _with_header_configmaps(config, store, problems, source=f"ConfigMap {configmap}"), problems


_RESERVED_HEADERS = frozenset(header.lower() for header, _ in PROXY_HEADERS)


def _with_header_configmaps(config: ControllerConfig, store: Mapping[str, dict], problems: list[Problem], *,
                            source: str) -> ControllerConfig:
    """`config` with the headers of the ConfigMaps that add-headers and proxy-set-headers name."""
    found: dict[str, Any] = {}
    for key, field_name, reserved in (("add-headers", "add_headers", frozenset()),
                                      ("proxy-set-headers", "proxy_set_headers", _RESERVED_HEADERS)):
        reference = getattr(config, field_name)
        if reference:
            found[field_name], messages = headers_of(store, reference, source=f"key {key}", reserved=reserved,
                                                      where_kept="in the controller ConfigMap's namespace")
            problems.extend(Problem.error(source, message) for message in messages)
    return replace(config, server=replace(config.server, **found)) if found else config

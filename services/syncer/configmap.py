"""The controller ConfigMap (--configmap NS/NAME): global nginx settings and controller-wide defaults.

Keys and defaults follow ingress-nginx's. A key with a bad value is ignored (its default applies) and
reported; the rest of the ConfigMap still applies. Unknown keys are ignored with a warning.
"""
from __future__ import annotations

import functools
import re
import ssl
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from services.nginxconf.config import UPSTREAMINFO_FORMAT, AccessLog, ExternalAuth

from . import access_log, block_lists
from .annotations.base import InvalidValue, Risk
from .annotations.external_auth import GLOBAL_AUTH_KEYS, parse_global_auth
from .annotations.renderable import check_renders
from .annotations.validators import boolean, duration, integer, is_true, one_of, size
from .problems import Problem
from services.nginxconf.render import RenderError

DEFAULT_SSL_CIPHERS = (
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"
    "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305:"
    "DHE-RSA-AES128-GCM-SHA256:DHE-RSA-AES256-GCM-SHA384"
)
_SSL_PROTOCOLS = ("TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3")
_CIPHERS = re.compile(r"[A-Za-z0-9!+@:._=-]{1,2000}")


def _ssl_protocols(value: str) -> str:
    words = value.split(" ")
    if not all(w in _SSL_PROTOCOLS for w in words):
        raise InvalidValue("must be space-separated protocols from " + " ".join(_SSL_PROTOCOLS))
    return " ".join(dict.fromkeys(words))


def _ssl_ciphers(value: str) -> str:
    if not _CIPHERS.fullmatch(value):
        raise InvalidValue("must be an OpenSSL cipher list such as ECDHE-RSA-AES128-GCM-SHA256:!aNULL")
    if not _openssl_selects_a_cipher(value):
        raise InvalidValue("selects no cipher OpenSSL knows, so nginx would refuse it; name at least one TLS 1.2 "
                           "cipher such as ECDHE-RSA-AES128-GCM-SHA256 (TLS 1.3 suites cannot be set here)")
    return value


@functools.lru_cache(maxsize=64)  # the model is rebuilt on every change; the ConfigMap rarely changes
def _openssl_selects_a_cipher(value: str) -> bool:
    # nginx's ssl_ciphers makes the same SSL_CTX_set_cipher_list call, with the same system libssl, and
    # `nginx -t` fails when it selects nothing (e.g. "!aNULL" alone, or a TLS 1.3 suite name).
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).set_ciphers(value)
    except ssl.SSLError:
        return False
    return True


# ConfigMap key → (nginx directive in NginxConfig.globals, validator, default).
GLOBAL_DIRECTIVES: dict[str, tuple[str, Callable[[str], str], str]] = {
    "proxy-connect-timeout": ("proxy_connect_timeout", duration, "5s"),
    "proxy-read-timeout": ("proxy_read_timeout", duration, "60s"),
    "proxy-send-timeout": ("proxy_send_timeout", duration, "60s"),
    "proxy-body-size": ("client_max_body_size", size(1024**4), "1m"),
    "keep-alive": ("keepalive_timeout", duration, "75s"),
    "keep-alive-requests": ("keepalive_requests", integer(1, 10**9), "1000"),
    "client-header-timeout": ("client_header_timeout", duration, "60s"),
    "client-body-timeout": ("client_body_timeout", duration, "60s"),
    "ssl-protocols": ("ssl_protocols", _ssl_protocols, "TLSv1.2 TLSv1.3"),
    "ssl-ciphers": ("ssl_ciphers", _ssl_ciphers, DEFAULT_SSL_CIPHERS),
    # nginx takes 400-599 here.
    "limit-req-status-code": ("limit_req_status", integer(400, 599), "503"),
    "limit-conn-status-code": ("limit_conn_status", integer(400, 599), "503"),
}


def _risk(value: str) -> Risk:
    return Risk[one_of(*(r.name.capitalize() for r in Risk))(value).upper()]


@dataclass(frozen=True, kw_only=True)
class ControllerConfig:
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
    annotations_risk_level: Risk = Risk.HIGH
    strict_validate_path_type: bool = True
    annotation_value_word_blocklist: tuple[str, ...] = ()
    allow_snippet_annotations: bool = False
    block_cidrs: tuple[str, ...] = ()
    block_user_agents: tuple[str, ...] = ()
    block_referers: tuple[str, ...] = ()
    # Whether an Ingress may name a Secret (auth-secret) in another namespace.
    allow_cross_namespace_resources: bool = False
    # global-auth-url and its options: external auth for every Ingress without its own auth-url (and
    # without enable-global-auth: "false"). A bad global-auth-* value denies those Ingresses (503) instead:
    # `global_auth_problem` says why.
    global_auth: ExternalAuth | None = None
    global_auth_problem: str | None = None
    # The access log (access_log.py).
    disable_access_log: bool = False
    access_log_path: str = AccessLog.path
    access_log_params: str = AccessLog.params
    log_format_upstream: str = UPSTREAMINFO_FORMAT
    log_format_escape_json: bool = False
    log_format_escape_none: bool = False
    access_log_for_default_backend: bool = False

    @property
    def access_log(self) -> AccessLog:
        escape = "none" if self.log_format_escape_none else "json" if self.log_format_escape_json else "default"
        return AccessLog(enabled=not self.disable_access_log, path=self.access_log_path,
                         params=self.access_log_params, format=self.log_format_upstream, escape=escape,
                         default_backend=self.access_log_for_default_backend)


def _words(value: str) -> tuple[str, ...]:
    """A comma-separated list of words; empty items are dropped (ingress-nginx would let an empty word block
    every value)."""
    return tuple(dict.fromkeys(word.strip() for word in value.split(",") if word.strip()))


def _flag(value: str) -> bool:
    return is_true(boolean(value))


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
    "annotations-risk-level": ("annotations_risk_level", _risk),
    "strict-validate-path-type": ("strict_validate_path_type", _flag),
    "annotation-value-word-blocklist": ("annotation_value_word_blocklist", _words),
    "allow-snippet-annotations": ("allow_snippet_annotations", _flag),
    "block-cidrs": ("block_cidrs", block_lists.networks),
    "block-user-agents": ("block_user_agents", block_lists.header_patterns),
    "block-referers": ("block_referers", block_lists.header_patterns),
    "allow-cross-namespace-resources": ("allow_cross_namespace_resources", _flag),
    "disable-access-log": ("disable_access_log", _flag),
    "access-log-path": ("access_log_path", access_log.log_path),
    "access-log-params": ("access_log_params", access_log.log_params),
    "log-format-upstream": ("log_format_upstream", access_log.log_format),
    "log-format-escape-json": ("log_format_escape_json", _flag),
    "log-format-escape-none": ("log_format_escape_none", _flag),
    "enable-access-log-for-default-backend": ("access_log_for_default_backend", _flag),
}


def parse_controller_config(data: Mapping[str, Any], source: str) -> tuple[ControllerConfig, list[Problem]]:
    """`data` is the ConfigMap's `data`; `source` names it in problems ("ConfigMap ns/name")."""
    problems: list[Problem] = []
    globals_ = ControllerConfig().globals
    typed: dict[str, Any] = {}
    global_auth = parse_global_auth(data)
    problems += [Problem.error(source, p) for p in global_auth.errors]
    problems += [Problem.warning(source, w) for w in global_auth.warnings]
    typed.update(global_auth=global_auth.auth, global_auth_problem=global_auth.problem)
    for key in sorted(data):
        raw = data[key]
        if key in GLOBAL_AUTH_KEYS:
            continue
        if key in GLOBAL_DIRECTIVES:
            directive, validate, _ = GLOBAL_DIRECTIVES[key]
            target, store = directive, globals_
        elif key in FIELDS:
            target, validate = FIELDS[key]
            store = typed
        else:
            problems.append(Problem.warning(source, f"key {key} is not supported by pyngress; ignored"))
            continue
        try:
            if not isinstance(raw, str):
                raise InvalidValue("ConfigMap values must be strings; quote it in the manifest")
            value = validate(raw)
            if store is globals_:
                check_renders(target, value)  # a value render() refuses would stop every configuration
            store[target] = value
        except (InvalidValue, RenderError) as err:
            problems.append(Problem.error(source, f"key {key} value {raw!r}: {err}; the default applies"))
    return ControllerConfig(globals=globals_, **typed), problems


def load_controller_config(store: Mapping[str, dict], configmap: str | None) -> tuple[ControllerConfig, list[Problem]]:
    """The controller ConfigMap named by --configmap ("NS/NAME") from `store`; defaults when unset or absent."""
    if not configmap:
        return ControllerConfig(), []
    namespace, _, name = configmap.partition("/")
    if not namespace or not name:
        return ControllerConfig(), [Problem.error(f"--configmap {configmap!r}",
                                                  "must be NAMESPACE/NAME; using the defaults")]
    obj = store.get(f"ConfigMap/{namespace}/{name}")
    if obj is None:
        return ControllerConfig(), []
    data = obj.get("data") or {}
    if not isinstance(data, dict):
        return ControllerConfig(), [Problem.error(f"ConfigMap {configmap}",
                                                  "data must be a map of strings; using the defaults")]
    return parse_controller_config(data, f"ConfigMap {configmap}")

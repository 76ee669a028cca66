"""Ingress annotations (`<prefix>/<name>`, prefix `nginx.ingress.kubernetes.io` by default).

Modelled on ingress-nginx's annotations package: one module per group, each listing its annotations with
their allow-list validator and risk level side by side; `ANNOTATIONS` below is the one table of them all.
A value outside its allow-list rejects the whole Ingress (`InvalidAnnotation`); an unknown annotation under
the prefix is ignored with a warning.

Location profile settings (LocationProfile.settings), the exact keys emitted. Keys without the `pyngress_`
prefix are nginx directives taking the value as is; the others need the template's help:

    proxy_connect_timeout, proxy_send_timeout, proxy_read_timeout   "60s", "500ms", "5m", "1h"
    client_max_body_size, proxy_buffer_size                         "8k", "1m", "0" (body size: no limit)
    proxy_buffering, proxy_request_buffering                        "on" | "off"
    proxy_http_version                                              "1.0" | "1.1"
    pyngress_proxy_pass_scheme     "https": proxy to the backend over TLS (absent: http)
    pyngress_upstream_vhost        "host[:port]": `proxy_set_header Host <value>;`
    pyngress_redirect_code         "300".."308": with pyngress_redirect_url, `return <code> <url>;`
    pyngress_redirect_url          absolute http(s) URL; may contain $request_uri, $uri, $is_args, $args
    pyngress_allow_source_ranges   "10.0.0.0/8,2001:db8::/32": `allow <each>;` then `deny all;`
    pyngress_cors_allow_origin     "*" or "https://a.example.com, https://*.example.com" (", "-separated)
    pyngress_cors_allow_methods    "GET, PUT, POST"
    pyngress_cors_allow_headers    "X-Api-Key, Content-Type"
    pyngress_cors_expose_headers   "X-Request-Id" (only when given)
    pyngress_cors_allow_credentials  "true" | "false"
    pyngress_cors_max_age          seconds, e.g. "1728000"

All pyngress_cors_* keys but expose_headers are present together (defaults filled in) when enable-cors is
true. Values never contain quotes, backslashes, braces, semicolons, whitespace other than single spaces
after commas, or control characters; the template still quotes each one.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

from . import backend_protocol, cors, ipallowlist, proxy, redirect, snippets, ssl, upstream_vhost
from .base import Annotation, IngressAnnotations, InvalidAnnotation, InvalidValue, Risk

ANNOTATIONS: dict[str, Annotation] = {
    a.name: a
    for group in (proxy, backend_protocol, redirect, ssl, cors, ipallowlist, upstream_vhost, snippets)
    for a in group.ANNOTATIONS
}

# Groups whose annotations mean more than one setting each (defaults, precedence, host-level flags).
_APPLY: tuple[Callable[[Mapping[str, str], IngressAnnotations], None], ...] = (
    backend_protocol.apply, redirect.apply, ssl.apply, cors.apply, ipallowlist.apply,
)

__all__ = ["ANNOTATIONS", "Annotation", "IngressAnnotations", "InvalidAnnotation", "Risk", "parse_annotations"]


def parse_annotations(annotations: Mapping[str, Any], prefix: str, max_risk: Risk = Risk.HIGH) -> IngressAnnotations:
    """Validate and interpret the annotations under `prefix`; raise InvalidAnnotation for the first bad one."""
    parsed = IngressAnnotations(prefix=prefix)
    values: dict[str, str] = {}
    start = prefix + "/"
    for full_name in sorted(annotations):
        if not full_name.startswith(start):
            continue
        name, raw = full_name[len(start):], annotations[full_name]
        annotation = ANNOTATIONS.get(name)
        if annotation is None:
            parsed.warnings.append(f"annotation {full_name} is not supported by pyngress; ignored")
            continue
        if not isinstance(raw, str):
            raise InvalidAnnotation(full_name, raw, "annotation values must be strings; quote it in the manifest")
        try:
            values[name] = annotation.validate(raw)
        except InvalidValue as err:
            raise InvalidAnnotation(full_name, raw, str(err)) from None
        if annotation.risk > max_risk:
            raise InvalidAnnotation(full_name, raw, f"its risk level {annotation.risk.name} is above the "
                                    f"ConfigMap's annotations-risk-level {max_risk.name}; remove the annotation "
                                    "or raise annotations-risk-level")
        if annotation.setting:
            parsed.location[annotation.setting] = values[name]
    for apply in _APPLY:
        apply(values, parsed)
    return parsed

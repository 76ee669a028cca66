"""Ingress annotations (`<prefix>/<name>`, prefix `nginx.ingress.kubernetes.io` by default).

Modelled on ingress-nginx's annotations package: one module per group, each listing its annotations with
their allow-list validator and risk level side by side; `ANNOTATIONS` below is the one table of them all.
A value outside its allow-list rejects the whole Ingress (`InvalidAnnotation`). An unknown annotation under
the prefix is ignored with a warning, unless it controls access (access_control.py): then the Ingress is
refused, never served open.

Location profile settings (LocationProfile.settings): sorted (setting, value) pairs, the exact keys below.
Keys without the `pyngress_` prefix are nginx directives: render `<key> <value split on spaces>;` in the
profile's location (`allow` may appear several times; sorting keeps every `allow` before `deny`). Keys with
the prefix are not directives and need the template's own code:

    proxy_connect_timeout, proxy_send_timeout, proxy_read_timeout   "60s", "500ms", "5m", "1h"
    client_max_body_size, proxy_buffer_size                         "8k", "1m", "0" (body size: no limit)
    proxy_buffers       "4 <proxy_buffer_size>", always with proxy_buffer_size
    proxy_buffering, proxy_request_buffering                        "on" | "off"
    proxy_http_version                                              "1.0" | "1.1"
    proxy_set_header    "Host app.internal:8080"   (upstream-vhost)
    return              "301 https://new.example.com/path"   (permanent/temporal redirect: code, then URL)
    allow               "10.0.0.0/8", one pair per network   (allowlist-source-range) ...
    deny                "all"                                 ... always with the allows
    pyngress_proxy_pass_scheme       "https": proxy to the backend over TLS (absent: http)
    pyngress_cors_allow_origin       "*" or "https://a.example.com,https://*.example.com:8443"
    pyngress_cors_allow_methods      "GET,PUT,POST"
    pyngress_cors_allow_headers      "X-Api-Key,Content-Type"
    pyngress_cors_expose_headers     "X-Request-Id" (only when given)
    pyngress_cors_allow_credentials  "true" | "false"
    pyngress_cors_max_age            seconds, e.g. "1728000"

All pyngress_cors_* keys but expose_headers are present together (defaults filled in) when enable-cors is
true. Values never contain quotes, backslashes, braces, semicolons, '$', control characters or whitespace
other than the single spaces shown above; the template still quotes each argument, and parse_annotations
checks with render.py's own quoting that it can (renderable.py; the CORS values, written as Lua strings, are
also kept short enough for nginx to read).
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

from services.syncer.render import RenderError

from . import access_control, backend_protocol, cors, ipallowlist, proxy, redirect, snippets, ssl, upstream_vhost
from .access_control import is_access_control
from .base import Annotation, IngressAnnotations, InvalidAnnotation, InvalidValue, Risk
from .renderable import check_renders

ANNOTATIONS: dict[str, Annotation] = {
    a.name: a
    for group in (proxy, backend_protocol, redirect, ssl, cors, ipallowlist, upstream_vhost, snippets)
    for a in group.ANNOTATIONS
}

# Groups whose annotations mean more than one setting each (defaults, precedence, host-level flags).
_APPLY: tuple[Callable[[Mapping[str, str], IngressAnnotations], None], ...] = (
    proxy.apply, backend_protocol.apply, redirect.apply, ssl.apply, cors.apply, ipallowlist.apply,
    upstream_vhost.apply,
)

__all__ = ["ANNOTATIONS", "Annotation", "IngressAnnotations", "InvalidAnnotation", "Risk", "parse_annotations"]


def parse_annotations(annotations: Mapping[str, Any], prefix: str, max_risk: Risk = Risk.HIGH) -> IngressAnnotations:
    """Validate and interpret the annotations under `prefix`; raise InvalidAnnotation for the first bad one.

    Last, every location setting must pass render.py's quoting, blamed on the annotation it came from.
    """
    parsed = IngressAnnotations(prefix=prefix)
    values: dict[str, str] = {}
    start = prefix + "/"
    for full_name in sorted(annotations):
        if not full_name.startswith(start):
            continue
        name, raw = full_name[len(start):], annotations[full_name]
        annotation = ANNOTATIONS.get(name)
        if annotation is None:
            if is_access_control(name):
                raise InvalidAnnotation(full_name, raw, access_control.REFUSAL)
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
            parsed.add(annotation.setting, values[name], name)
    for apply in _APPLY:
        apply(values, parsed)
    for setting in parsed.location:
        try:
            check_renders(setting.name, setting.value)
        except RenderError as err:
            full_name = start + setting.source
            raise InvalidAnnotation(full_name, annotations[full_name], str(err)) from None
    return parsed

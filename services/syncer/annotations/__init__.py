"""Ingress annotations (`<prefix>/<name>`, prefix `nginx.ingress.kubernetes.io` by default).

Modelled on ingress-nginx's annotations package: one module per group, each listing its annotations with
their allow-list validator and risk level side by side; `ANNOTATIONS` below is the one table of them all.
A value outside its allow-list is set aside as ingress-nginx sets it aside: the annotation is ignored (its
default applies, the Ingress is served) with a warning naming the Ingress, the annotation and the value,
unless the annotation controls access (access_control.py): then the Ingress's paths answer 503, never served
open. The value itself is never rendered. An unknown annotation under the prefix is ignored with a warning,
unless it controls access: then the Ingress is refused, as is a value ingress-nginx takes and pyngress does
not implement (`Unsupported`). Snippets while allow-snippet-annotations is off and
annotations above annotations-risk-level refuse the Ingress, as in ingress-nginx.

What an Ingress's annotations mean is an IngressAnnotations (base.py): its location fields make the
Ingress's LocationProfile (services/nginxconf/config.py: plain nginx directives, and typed fields such as
the backend scheme and the CORS policy), the host-level flags go to the host's routes. Each annotation
declares its scope (location, host or Ingress) beside its validator and risk. Values never contain quotes,
backslashes, braces, semicolons, '$', control characters or whitespace other than single spaces between
a directive's arguments; the template still quotes each argument.
"""
from __future__ import annotations

from types import ModuleType
from typing import Any, Callable, Mapping

from services.nginxconf.render import RenderError

from . import (access_control, access_log, affinity, auth, backend_protocol, balancing, canary, client_cert, cors,
               custom_headers, denylist, error_pages, external_auth, fastcgi, ipallowlist, mirror, modsecurity, opentelemetry,
               proxy, proxy_ssl, ratelimit, redirect, rewrite, satisfy, server_alias, service_upstream, snippets, ssl, upstream_behaviour,
               upstream_vhost, www_redirect)
from .access_control import is_access_control
from .base import Annotation, IngressAnnotations, InvalidAnnotation, InvalidValue, Risk, Unsupported
from .renderable import check_renders, unrenderable_cors_option

# Every group, listed once: its ANNOTATIONS join the table, and its `apply` (for annotations that mean more than
# one plain directive: defaults, precedence, typed settings, host-level flags) runs in this order.
GROUPS: tuple[ModuleType, ...] = (
    proxy, proxy_ssl, upstream_behaviour, backend_protocol, fastcgi, service_upstream, rewrite, canary, affinity, balancing,
    www_redirect, server_alias, redirect, ssl, cors, ipallowlist, denylist, ratelimit, client_cert, upstream_vhost, auth,
    external_auth, satisfy, access_log, snippets, error_pages, mirror, custom_headers, opentelemetry,
    modsecurity)

ANNOTATIONS: dict[str, Annotation] = {a.name: a for group in GROUPS for a in group.ANNOTATIONS}
_APPLY: tuple[Callable[[Mapping[str, str], IngressAnnotations], None], ...] = tuple(
    group.apply for group in GROUPS if hasattr(group, "apply"))

__all__ = ["ANNOTATIONS", "Annotation", "IngressAnnotations", "InvalidAnnotation", "Risk", "parse_annotations"]


def parse_annotations(annotations: Mapping[str, Any], *, prefix: str, max_risk: Risk = Risk.HIGH,
                      allow_snippets: bool = False) -> IngressAnnotations:
    """Validate and interpret the annotations under `prefix`; raise InvalidAnnotation for one that refuses the
    Ingress (see the module's docstring for what refuses, what is ignored and what denies).

    `max_risk` and `allow_snippets` are the ConfigMap's annotations-risk-level and allow-snippet-annotations.

    Last, every location setting must pass nginxconf/render.py's quoting, blamed on the annotation it came from.
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
                raise InvalidAnnotation(full_name, value=raw, reason=access_control.REFUSAL)
            parsed.warnings.append(f"annotation {full_name} is not supported by pyngress; ignored")
            continue
        if not isinstance(raw, str):
            raise InvalidAnnotation(full_name, value=raw,
                                    reason="annotation values must be strings; quote it in the manifest")
        if snippets.is_snippet(name) and not allow_snippets:
            raise InvalidAnnotation(full_name, value=raw, reason=snippets.DISABLED)
        # Before the value is looked at, as ingress-nginx checks the risk of every annotation before parsing any.
        if annotation.risk > max_risk:
            raise InvalidAnnotation(full_name, value=raw,
                                    reason=f"its risk level {annotation.risk.name} is above the ConfigMap's "
                                    f"annotations-risk-level {max_risk.name}; remove the annotation or raise "
                                    "annotations-risk-level")
        try:
            values[name] = annotation.validate(raw)
        except Unsupported as err:
            raise InvalidAnnotation(full_name, value=raw, reason=str(err)) from None
        except InvalidValue as err:
            _set_aside(parsed, InvalidAnnotation(full_name, value=raw, reason=str(err)))
            continue
        if skipped := annotation.skipped(raw):
            parsed.warnings.append(f"annotation {full_name} value {raw!r}: {skipped}")
        if annotation.directive and (argument := annotation.argument(values[name])) is not None:
            parsed.add(annotation.directive, value=argument, source=name)
    for apply in _APPLY:
        try:
            apply(values, parsed)
        except InvalidAnnotation as err:  # a combination that cannot hold (auth-secret without auth-type)
            if not is_access_control(err.name.removeprefix(start)):
                raise
            _set_aside(parsed, err)
    unrenderable: dict[str, RenderError] = {}
    for setting in parsed.directives:
        try:
            check_renders(setting.name, setting.value)
        except RenderError as err:
            unrenderable.setdefault(setting.source, err)
    if unrenderable:  # every setting an annotation made goes with it
        parsed.directives = [d for d in parsed.directives if d.source not in unrenderable]
        for source, refusal in unrenderable.items():
            full_name = start + source
            _set_aside(parsed, InvalidAnnotation(full_name, value=annotations[full_name], reason=str(refusal)))
    if failure := proxy.buffer_problem(parsed.directives):
        source, reason = failure
        raise InvalidAnnotation(start + source, value=annotations[start + source], reason=reason)
    if parsed.cors and (cors_failure := unrenderable_cors_option(parsed.cors)):
        option, error = cors_failure
        source = "cors-" + option.replace("_", "-")
        full_name = start + (source if source in values else "enable-cors")
        raise InvalidAnnotation(full_name, value=annotations[full_name], reason=str(error))
    return parsed


def _set_aside(parsed: IngressAnnotations, problem: InvalidAnnotation) -> None:
    """An invalid value, as ingress-nginx treats it: an access-control annotation denies the Ingress's paths
    (503), any other is ignored and its default applies. Either way the value is never rendered."""
    if is_access_control(problem.name.removeprefix(parsed.prefix + "/")):
        parsed.deny(f"{problem}; its paths answer 503 until it is fixed")
    else:
        parsed.warnings.append(f"{problem}; ignored, its default applies")

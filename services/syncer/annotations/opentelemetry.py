"""enable-opentelemetry, opentelemetry-trust-incoming-span, opentelemetry-operation-name: an Ingress's own tracing
(the ConfigMap's keys of the same names apply to the others; services/nginxconf/tracing.py). Pushed with its routes
to nginx's Lua (tracing.lua), so turning tracing on or off for one Ingress reloads nothing. As in ingress-nginx, the
other two are read only with enable-opentelemetry: "true" on the same Ingress."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from .base import Annotation, IngressAnnotations, Risk
from .validators import boolean, is_true, matching


@dataclass(frozen=True, kw_only=True)
class RouteTracing:
    """What the routes of an Ingress with the enable-opentelemetry annotation say (tracing.lua, route_config)."""
    enabled: bool
    trust_incoming_span: bool | None = None  # None: the ConfigMap's opentelemetry-trust-incoming-span
    operation_name: str | None = None  # None: the ConfigMap's opentelemetry-operation-name, else the Ingress path


ANNOTATIONS = (
    Annotation("enable-opentelemetry", validate=boolean, risk=Risk.LOW, default="false", reloads=False,
               doc="Trace this Ingress's requests (\"true\") or not (\"false\"), whatever the ConfigMap's "
                   "enable-opentelemetry says; the spans go to the ConfigMap's otlp-collector-host.",
               differs="Takes effect once the ConfigMap names otlp-collector-host; W3C Trace Context only (no B3), "
                       "and spans carry the stable HTTP semantic-convention attribute names (http.request.method, "
                       "url.path, ...) instead of the module's older ones."),
    Annotation("opentelemetry-trust-incoming-span", validate=boolean, risk=Risk.LOW, default="true", reloads=False,
               doc="Continue the trace of a client's traceparent header (\"false\": start a new trace). Read only "
                   "with enable-opentelemetry: \"true\"."),
    Annotation("opentelemetry-operation-name", risk=Risk.MEDIUM, reloads=False,
               validate=matching(r"[A-Za-z0-9_-]{0,256}", says="must be letters, digits, '_' and '-'"),
               doc="The span name of this Ingress's requests (default: the Ingress path). Read only with "
                   "enable-opentelemetry: \"true\"."),
)
_ONLY_WITH_ENABLE = ("opentelemetry-trust-incoming-span", "opentelemetry-operation-name")


def apply(values: Mapping[str, str], parsed: IngressAnnotations) -> None:
    enabled = "enable-opentelemetry" in values and is_true(values["enable-opentelemetry"])
    if not enabled:
        for name in _ONLY_WITH_ENABLE:
            if name in values:
                parsed.warn(name, "has no effect without enable-opentelemetry: \"true\" on the same Ingress; ignored")
        if "enable-opentelemetry" in values:
            parsed.tracing = RouteTracing(enabled=False)
        return
    trust = values.get("opentelemetry-trust-incoming-span")
    parsed.tracing = RouteTracing(enabled=True, trust_incoming_span=None if trust is None else is_true(trust),
                                  operation_name=values.get("opentelemetry-operation-name") or None)

"""The controller ConfigMap's OpenTelemetry keys, with ingress-nginx's names, defaults and meaning
(services/nginxconf/tracing.py: what nginx and the tracer process do with them).

`TracingKeys` holds them as fields of ControllerConfig (its base class), so that the ConfigMap's one table of keys
(FIELDS) and the generated docs take them as any other key; `TracingKeys.tracing` gives them to the renderer.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

from services.nginxconf.tracing import OTLP_HTTP_PORT, SAMPLERS, TracingSettings

from ..annotations.base import InvalidValue
from ..annotations.validators import boolean, integer, is_true, matching, one_of
from .configmap_server_keys import syslog_host

_DEFAULTS = TracingSettings()
# Literal text and nginx variables ($name), as ingress-nginx's example "HTTP $request_method $service_name $uri"; the
# value only ever reaches Lua as a quoted string.
_OPERATION_NAME = r"[A-Za-z0-9 _./:$-]{1,256}"
_SERVICE_NAME = r"[A-Za-z0-9 _./:-]{1,256}"
_RATIO = re.compile(r"(?:0|1)(?:\.[0-9]{1,12})?|\.[0-9]{1,12}")


@dataclass(frozen=True, kw_only=True)
class TracingKeys:
    """The ConfigMap's tracing keys, as ControllerConfig fields."""
    otel_enabled: bool = _DEFAULTS.enabled
    otel_trust_incoming_span: bool = _DEFAULTS.trust_incoming_span
    otel_operation_name: str = _DEFAULTS.operation_name
    otel_service_name: str = _DEFAULTS.service_name
    otel_collector_host: str = _DEFAULTS.collector_host
    otel_collector_port: int = _DEFAULTS.collector_port
    otel_max_queue_size: int = _DEFAULTS.max_queue_size
    otel_schedule_delay_millis: int = _DEFAULTS.schedule_delay_millis
    otel_max_export_batch_size: int = _DEFAULTS.max_export_batch_size
    otel_sampler: str = _DEFAULTS.sampler
    otel_sampler_ratio: float = _DEFAULTS.sampler_ratio
    otel_sampler_parent_based: bool = _DEFAULTS.sampler_parent_based
    # opentelemetry-config: the path of the OpenTelemetry module's own file in ingress-nginx (which the controller
    # wrote from the keys above). pyngress has no such module: the value is accepted and has no effect.
    otel_module_config: str = "/etc/nginx/opentelemetry.toml"

    @property
    def tracing(self) -> TracingSettings | None:
        """What nginx and the tracer do; None when the ConfigMap neither enables tracing nor names a collector."""
        settings = TracingSettings(
            enabled=self.otel_enabled, trust_incoming_span=self.otel_trust_incoming_span,
            operation_name=self.otel_operation_name, service_name=self.otel_service_name,
            collector_host=self.otel_collector_host, collector_port=self.otel_collector_port,
            max_queue_size=self.otel_max_queue_size, schedule_delay_millis=self.otel_schedule_delay_millis,
            max_export_batch_size=self.otel_max_export_batch_size, sampler=self.otel_sampler,
            sampler_ratio=self.otel_sampler_ratio, sampler_parent_based=self.otel_sampler_parent_based)
        return settings if settings.configured else None


def _flag(value: str) -> bool:
    return is_true(boolean(value))


def _count(low: int, high: int) -> Callable[[str], int]:
    check = integer(low, high)
    return lambda value: int(check(value))


def _ratio(value: str) -> float:
    if not _RATIO.fullmatch(value.strip()) or float(value) > 1:
        raise InvalidValue("must be a number from 0 to 1, such as 0.01")
    return float(value)


def _module_config(value: str) -> str:
    if not value.startswith("/"):
        raise InvalidValue("must be an absolute path (it has no effect in pyngress)")
    return value


# ConfigMap key → (ControllerConfig field, parser to its type).
TRACING_KEYS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "enable-opentelemetry": ("otel_enabled", _flag),
    "opentelemetry-trust-incoming-span": ("otel_trust_incoming_span", _flag),
    "opentelemetry-operation-name": ("otel_operation_name", matching(
        _OPERATION_NAME, says="must be letters, digits, spaces, '_./:-' and nginx variables ($request_method), at most "
                         "256 characters")),
    "otel-service-name": ("otel_service_name", matching(
        _SERVICE_NAME, says="must be letters, digits, spaces and '_./:-', at most 256 characters")),
    "otlp-collector-host": ("otel_collector_host", syslog_host),
    "otlp-collector-port": ("otel_collector_port", _count(1, 65535)),
    "otel-max-queuesize": ("otel_max_queue_size", _count(1, 1 << 20)),
    "otel-schedule-delay-millis": ("otel_schedule_delay_millis", _count(1, 3_600_000)),
    "otel-max-export-batch-size": ("otel_max_export_batch_size", _count(1, 1 << 20)),
    "otel-sampler": ("otel_sampler", one_of(*SAMPLERS)),
    "otel-sampler-ratio": ("otel_sampler_ratio", _ratio),
    "otel-sampler-parent-based": ("otel_sampler_parent_based", _flag),
    "opentelemetry-config": ("otel_module_config", _module_config),
}

# What each key does, for docs/configmap.md.
TRACING_MEANING: dict[str, str] = {
    "enable-opentelemetry": "Trace every Ingress without its own enable-opentelemetry annotation: a span per request, "
                            "exported over OTLP by the tracer process (nginx has no tracing module here: the spans "
                            "are made in its Lua).",
    "opentelemetry-trust-incoming-span": "Continue the trace of a client's W3C traceparent header; false: every "
                                         "request starts a new trace.",
    "opentelemetry-operation-name": "The span name, with nginx variables (\"HTTP $request_method $uri\"); empty: the "
                                    "Ingress path, as ingress-nginx's module names spans.",
    "otel-service-name": "The spans' service.name.",
    "otlp-collector-host": "The OTLP collector's address. Set without enable-opentelemetry, Ingresses turn tracing on "
                           "with their annotation (no reload).",
    "otlp-collector-port": f"The collector's port: {OTLP_HTTP_PORT} speaks OTLP over HTTP/protobuf, any other OTLP over "
                           "gRPC.",
    "otel-max-queuesize": "Spans waiting in the tracer for their export; more are dropped and counted "
                          "(pyngress_tracing_spans_total{outcome=\"dropped_queue_full\"}).",
    "otel-schedule-delay-millis": "The longest a span waits for its batch to be exported.",
    "otel-max-export-batch-size": "Spans per export (at most otel-max-queuesize).",
    "otel-sampler": "AlwaysOn, AlwaysOff or TraceIdRatioBased (the OpenTelemetry SDKs' rule on the trace id).",
    "otel-sampler-ratio": "The share of traces TraceIdRatioBased samples, 0 to 1.",
    "otel-sampler-parent-based": "Follow a trusted parent's sampled flag instead of the sampler.",
    "opentelemetry-config": "The path of ingress-nginx's OpenTelemetry module file, which it wrote from the keys "
                            "above.",
}
# How those keys differ from ingress-nginx's (docs/configmap.md, `pyngress lint`).
TRACING_DIFFERS: dict[str, str] = {
    "otlp-collector-port": f"ingress-nginx's module spoke gRPC on any port: a collector on {OTLP_HTTP_PORT} is spoken "
                           "to over HTTP/protobuf here, as OTLP assigns that port; others keep gRPC.",
    "opentelemetry-config": "Accepted and has no effect: the spans are made in nginx's Lua, with no module file to "
                            "name.",
}

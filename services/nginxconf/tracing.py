"""OpenTelemetry tracing without an nginx tracing module: what nginx's Lua records of a traced request, shared by the
renderer (which hands `TracingSettings.lua_config()` to templates/lua/pyngress/tracing.lua) and the tracer process
(services/tracer/), which exports the spans over OTLP with the OpenTelemetry SDK's exporter.

In nginx: the router (rewrite phase) continues the client's W3C `traceparent` when the route trusts incoming spans,
else starts a new trace; it draws the span's ids (request_id.lua's random bytes), decides sampling, and sends the
backend a `traceparent` naming the request's span. The log phase of a sampled request appends one span to a
per-worker buffer; every SPANS_PER_BATCH spans, and once a second, the buffer goes to the pyngress_spans shared
dictionary as one JSON batch. No message per request leaves nginx. Both stores are bounded (WORKER_SPANS in a
worker, SPANS_DICT_SIZE in all): what does not fit is dropped and counted, never waited for.

The tracer pops the batches (GET /configuration/spans on the configuration socket):
    {"exporter": <TracingSettings.exporter_config()> | null, "dropped": <spans dropped in nginx since the last GET>,
     "more": <bool: batches left>, "batches": [[<span>, ...], ...]}
A span is a JSON array, in `SPAN_FIELDS` order. "fields" is `FIELDS_SEPARATOR`-separated values of nginx variables
that cannot hold it (`JOINED_VARIABLES`), read in one variable read; the client's request URI and User-Agent come
apart, being the client's own bytes.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

# The OTLP/HTTP port (opentelemetry-collector's default for HTTP/protobuf); any other port is spoken to over gRPC,
# the only protocol ingress-nginx's OpenTelemetry module had, so that its ConfigMaps keep pointing at the right place.
OTLP_HTTP_PORT = 4318
SPANS_DICT_SIZE = "16m"
# The ids (trace, span, parent or 16 zeros) are 64 hex digits at the start of $pyngress_trace; the span's name follows.
TRACE_VARIABLE = "pyngress_trace"
SPAN_FIELDS = ("trace", "fields", "request_uri", "user_agent", "start", "end")
FIELDS_SEPARATOR = "\t"
# What the log phase reads in one variable ($pyngress_span_fields): none of them can hold a tab.
JOINED_VARIABLES = ("status", "request_method", "scheme", "host", "pyngress_server_port", "server_protocol",
                    "remote_addr", "realip_remote_addr", "remote_port", "upstream_addr", "upstream_response_time",
                    "bytes_sent", "request_length", "pyngress_metric")

SAMPLERS = ("AlwaysOn", "AlwaysOff", "TraceIdRatioBased")
# What becomes of a sampled span, as the tracer counts it (its status record; pyngress_tracing_spans_total).
SPAN_OUTCOMES = ("exported", "failed", "dropped_in_nginx", "dropped_queue_full", "malformed")
_VARIABLE = re.compile(r"\$([a-z_][a-z0-9_]*)")


@dataclass(frozen=True, kw_only=True)
class TracingSettings:
    """The ConfigMap's tracing keys; defaults are ingress-nginx's."""
    enabled: bool = False  # enable-opentelemetry: every Ingress without its annotation is traced
    trust_incoming_span: bool = True  # opentelemetry-trust-incoming-span
    operation_name: str = ""  # opentelemetry-operation-name, with $variables; "": the Ingress path (as ingress-nginx)
    service_name: str = "nginx"  # otel-service-name: the spans' service.name
    collector_host: str = ""  # otlp-collector-host
    collector_port: int = 4317  # otlp-collector-port
    max_queue_size: int = 2048  # otel-max-queuesize: spans waiting for the exporter in the tracer
    schedule_delay_millis: int = 5000  # otel-schedule-delay-millis: the longest a span waits for its batch
    max_export_batch_size: int = 512  # otel-max-export-batch-size
    sampler: str = "AlwaysOff"  # otel-sampler
    sampler_ratio: float = 0.01  # otel-sampler-ratio (TraceIdRatioBased)
    sampler_parent_based: bool = False  # otel-sampler-parent-based: a trusted parent's decision is followed

    @property
    def configured(self) -> bool:
        """Whether nginx records spans at all: tracing on for every Ingress, or a collector that Ingresses may turn
        tracing on for (the enable-opentelemetry annotation, then applied without a reload)."""
        return self.enabled or bool(self.collector_host)

    @property
    def protocol(self) -> str:
        return "http/protobuf" if self.collector_port == OTLP_HTTP_PORT else "grpc"

    def ratio_bound(self) -> str | None:
        """TraceIdRatioBased's threshold, as the OpenTelemetry SDKs compute it (a trace is sampled when the low 64 bits
        of its id are below round(ratio * 2**64)), in 16 lowercase hex digits: tracing.lua compares the last 16 digits
        of the trace id with it as strings. None: every trace (ratio 1) or none (ratio 0)."""
        bound = round(self.sampler_ratio * 2**64)
        return f"{bound:016x}" if 0 < bound < 2**64 else None

    def root_sampler(self) -> str:
        """"on", "off" or "ratio": what decides for a request without a (trusted) parent."""
        if self.sampler == "AlwaysOn":
            return "on"
        if self.sampler == "AlwaysOff":
            return "off"
        bound = round(self.sampler_ratio * 2**64)
        return "off" if bound <= 0 else "on" if bound >= 2**64 else "ratio"

    def exporter_config(self) -> dict[str, Any]:
        """What the tracer process needs (it reads it from nginx, so that it follows the applied nginx.conf)."""
        return {"host": self.collector_host, "port": self.collector_port, "protocol": self.protocol,
                "service_name": self.service_name, "max_queue_size": self.max_queue_size,
                "schedule_delay_millis": self.schedule_delay_millis,
                "max_export_batch_size": min(self.max_export_batch_size, self.max_queue_size)}

    def lua_config(self) -> dict[str, Any]:
        """tracing.lua's settings."""
        return {"enabled": self.enabled, "trust": self.trust_incoming_span,
                "operation": operation_parts(self.operation_name) if self.operation_name else None,
                "sampler": self.root_sampler(), "ratio_bound": self.ratio_bound() or "",
                "parent_based": self.sampler_parent_based, "exporter": self.exporter_config()}


def operation_parts(template: str) -> list[str]:
    """An operation name with nginx variables ("HTTP $request_method $uri") as tracing.lua evaluates it: literal
    text at odd places (1-based), variable names between them."""
    parts: list[str] = []
    at = 0
    for match in _VARIABLE.finditer(template):
        parts += [template[at:match.start()], match.group(1)]
        at = match.end()
    return parts + [template[at:]]

"""nginx's span records (services/nginxconf/tracing.py, SPAN_FIELDS) as OpenTelemetry SDK spans, with the
OpenTelemetry HTTP server semantic conventions' attributes. No I/O."""
from __future__ import annotations

from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

from services.nginxconf.request_metrics import KNOWN_METHODS, OTHER_METHOD
from services.nginxconf.tracing import FIELDS_SEPARATOR, JOINED_VARIABLES

SCOPE = InstrumentationScope("pyngress")
_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
_NO_PARENT = "0" * 16
_METRIC_LABELS = ("host", "namespace", "ingress", "service", "path", "canary")


class BadRecord(ValueError):
    """A record that is not what tracing.lua writes."""


def _hex(text: str, what: str) -> int:
    try:
        value = int(text, 16)
    except ValueError:
        raise BadRecord(f"{what} {text!r} is not hex") from None
    if not value:
        raise BadRecord(f"{what} is zero")
    return value


def _integer(text: str) -> int | None:
    return int(text) if text.isascii() and text.isdigit() else None


def span_of(record: Any, resource: Resource) -> ReadableSpan:
    """One span of a batch; BadRecord when it is not tracing.lua's."""
    if not isinstance(record, list) or len(record) != 6:
        raise BadRecord("a span record is a list of 6 values")
    trace, joined, request_uri, user_agent, start, end = record
    if not all(isinstance(text, str) for text in (trace, joined, request_uri, user_agent)) or len(trace) < 64 \
            or not all(isinstance(time, (int, float)) for time in (start, end)):
        raise BadRecord("a span record has the wrong types")
    trace_id, span_id, parent_id = _hex(trace[:32], "trace id"), _hex(trace[32:48], "span id"), trace[48:64]
    values = dict(zip(JOINED_VARIABLES, joined.split(FIELDS_SEPARATOR, len(JOINED_VARIABLES) - 1)))
    if len(values) != len(JOINED_VARIABLES):
        raise BadRecord(f"a span record's fields are {len(JOINED_VARIABLES)} tab-separated values")
    parent = None if parent_id == _NO_PARENT else SpanContext(trace_id, _hex(parent_id, "parent span id"),
                                                              is_remote=True, trace_flags=_SAMPLED)
    status = _integer(values["status"])
    return ReadableSpan(
        name=trace[64:], context=SpanContext(trace_id, span_id, is_remote=False, trace_flags=_SAMPLED),
        parent=parent, resource=resource, attributes=attributes(values, request_uri, user_agent),
        kind=SpanKind.SERVER, instrumentation_scope=SCOPE,
        # The semantic conventions: a server span is an error for a 5xx, not for a 4xx (the client's).
        status=Status(StatusCode.ERROR) if status is not None and status >= 500 else Status(StatusCode.UNSET),
        # nginx times requests in milliseconds: whole milliseconds, not the float's last digits.
        start_time=round(start * 1000) * 1_000_000, end_time=round(max(end, start) * 1000) * 1_000_000)


def attributes(values: dict[str, str], request_uri: str, user_agent: str) -> dict[str, str | int]:
    """The OpenTelemetry HTTP server span attributes (semantic conventions 1.2x, stable HTTP) of a request."""
    method = values["request_method"]
    path, _, query = request_uri.partition("?")
    attrs: dict[str, str | int] = {
        "http.request.method": method if method in KNOWN_METHODS else OTHER_METHOD,
        "url.scheme": values["scheme"], "url.path": path, "server.address": values["host"],
        "client.address": values["remote_addr"], "network.peer.address": values["realip_remote_addr"],
        "network.protocol.name": "http",
    }
    if method not in KNOWN_METHODS:
        attrs["http.request.method_original"] = method
    if query:
        attrs["url.query"] = query
    if user_agent:
        attrs["user_agent.original"] = user_agent
    version = values["server_protocol"].removeprefix("HTTP/")
    if version:
        attrs["network.protocol.version"] = "2" if version == "2.0" else version
    for name, variable in (("http.response.status_code", "status"), ("server.port", "pyngress_server_port"),
                           ("network.peer.port", "remote_port"), ("http.request.size", "request_length"),
                           ("http.response.size", "bytes_sent")):
        number = _integer(values[variable])
        if number is not None:
            attrs[name] = number
    if values["upstream_addr"] not in ("", "-"):
        attrs["pyngress.upstream.address"] = values["upstream_addr"]  # "a:80, b:80" when a retry went elsewhere
        # nginx's $upstream_response_time: seconds with milliseconds, one per endpoint tried ("0.002, 0.010").
        attrs["pyngress.upstream.response_time"] = values["upstream_response_time"]
    labels = dict(zip(_METRIC_LABELS, values["pyngress_metric"].split("\t")))
    if labels.get("path"):
        attrs["http.route"] = labels["path"]  # the Ingress path (a prefix or an exact path)
    if labels.get("ingress"):
        attrs["pyngress.ingress"] = f"{labels['namespace']}/{labels['ingress']}"
    if labels.get("service"):
        attrs["pyngress.service"] = labels["service"]
    if labels.get("canary"):
        attrs["pyngress.canary"] = labels["canary"]
    return attrs

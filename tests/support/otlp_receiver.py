"""A test OTLP collector: OTLP over HTTP/protobuf (POST /v1/traces) or over gRPC (the TraceService), decoded with
the OpenTelemetry protobuf definitions (opentelemetry-proto's ExportTraceServiceRequest), keeping every span it
received."""
from __future__ import annotations

import random
import threading
from concurrent import futures
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (ExportTraceServiceRequest,
                                                                      ExportTraceServiceResponse)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from services.nginxconf.tracing import OTLP_HTTP_PORT

OTLP_GRPC_PORT = 4317


@dataclass(frozen=True)
class ReceivedSpan:
    trace_id: str  # lowercase hex, as in traceparent
    span_id: str
    parent_span_id: str  # "" for a root span
    name: str
    kind: str  # "SERVER", ...
    attributes: dict[str, Any]
    resource: dict[str, Any]
    scope: str
    start_ns: int
    end_ns: int
    error: bool  # status ERROR


def _value(value: AnyValue) -> Any:
    return getattr(value, value.WhichOneof("value")) if value.WhichOneof("value") else None


def spans_of(request: ExportTraceServiceRequest) -> list[ReceivedSpan]:
    spans = []
    for resource_spans in request.resource_spans:
        resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                spans.append(ReceivedSpan(
                    trace_id=span.trace_id.hex(), span_id=span.span_id.hex(), parent_span_id=span.parent_span_id.hex(),
                    name=span.name, kind=Span.SpanKind.Name(span.kind).removeprefix("SPAN_KIND_"),
                    attributes={a.key: _value(a.value) for a in span.attributes}, resource=resource,
                    scope=scope_spans.scope.name, start_ns=span.start_time_unix_nano, end_ns=span.end_time_unix_nano,
                    error=span.status.code == span.status.STATUS_CODE_ERROR))
    return spans


class OtlpReceiver:
    """Listens on OTLP/HTTP's port (or with `grpc_protocol`, OTLP/gRPC's) on a loopback address of its own (so that tests
    running at once do not meet); `spans` is everything received, `requests` how many exports arrived."""

    def __init__(self, *, grpc_protocol: bool = False) -> None:
        self.host = f"127.0.{random.randint(100, 199)}.{random.randint(2, 250)}"
        self.port = OTLP_GRPC_PORT if grpc_protocol else OTLP_HTTP_PORT
        self.spans: list[ReceivedSpan] = []
        self.requests = 0
        self._lock = threading.Lock()
        self._grpc = self._grpc_server() if grpc_protocol else None
        self._http = None if grpc_protocol else self._http_server()

    def _grpc_server(self) -> grpc.Server:
        receiver = self

        class Service(trace_service_pb2_grpc.TraceServiceServicer):
            def Export(self, request: ExportTraceServiceRequest, context: object) -> ExportTraceServiceResponse:  # noqa: N802
                receiver._keep(spans_of(request))
                return ExportTraceServiceResponse()

        server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Service(), server)
        server.add_insecure_port(f"{self.host}:{self.port}")
        return server

    def _http_server(self) -> ThreadingHTTPServer:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 - the base class's name
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.path != "/v1/traces" or self.headers.get("Content-Type") != "application/x-protobuf":
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                receiver._keep(spans_of(ExportTraceServiceRequest.FromString(body)))
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
                pass

        return ThreadingHTTPServer((self.host, self.port), Handler)

    def _keep(self, spans: list[ReceivedSpan]) -> None:
        with self._lock:
            self.spans += spans
            self.requests += 1

    def start(self) -> OtlpReceiver:
        if self._grpc is not None:
            self._grpc.start()
        if self._http is not None:
            threading.Thread(target=self._http.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._grpc is not None:
            self._grpc.stop(grace=None)
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()

    def received(self) -> list[ReceivedSpan]:
        with self._lock:
            return list(self.spans)

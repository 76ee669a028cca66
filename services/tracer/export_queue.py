"""Spans on their way from nginx to the collector: a bounded queue and the thread that exports it over OTLP with the
OpenTelemetry SDK's exporter, batched as the SDK's BatchSpanProcessor batches (otel-max-queuesize,
otel-max-export-batch-size, otel-schedule-delay-millis). A collector that is down or slow only fills the queue: what
does not fit is dropped and counted, nothing waits for it but the export thread.

nginx's records are turned into SDK spans in the export thread, batch by batch, so that taking them from nginx stays
cheap whatever the collector does.
"""
from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from services.common import logs
from services.nginxconf.tracing import SPAN_OUTCOMES

from .nginx_spans import BadRecord, span_of

log = logging.getLogger("tracer")

# How long one export may take (the SDK exporters' own default), retries included.
EXPORT_TIMEOUT_SECONDS = 10.0


@dataclass
class Counts:
    """Spans by what became of them, since the tracer started (pyngress_tracing_spans_total on /metrics)."""
    exported: int = 0
    failed: int = 0  # the collector refused the export, or could not be reached
    dropped_in_nginx: int = 0  # nginx's buffers were full (the tracer was down or too slow)
    dropped_queue_full: int = 0  # otel-max-queuesize spans were waiting already
    malformed: int = 0  # not a record tracing.lua writes
    queued: int = 0  # waiting now

    def as_dict(self) -> dict[str, int]:
        return {outcome: getattr(self, outcome) for outcome in (*SPAN_OUTCOMES, "queued")}


def exporter_for(config: dict[str, Any]) -> SpanExporter:
    """The SDK's OTLP exporter the tracer settings name (services/nginxconf/tracing.py, exporter_config)."""
    host = f"[{config['host']}]" if ":" in config["host"] else config["host"]
    if config["protocol"] == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
        return GrpcExporter(endpoint=f"{host}:{config['port']}", insecure=True, timeout=EXPORT_TIMEOUT_SECONDS)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
    return HttpExporter(endpoint=f"http://{host}:{config['port']}/v1/traces", timeout=EXPORT_TIMEOUT_SECONDS)


@dataclass
class ExportQueue:
    """The queue and its export thread; `configure` follows the settings of the applied nginx.conf."""
    counts: Counts = field(default_factory=Counts)
    # The exporter for the tracer settings (another one in tests that keep the spans in memory).
    exporter_of: Callable[[dict[str, Any]], SpanExporter] = exporter_for
    _records: deque[list] = field(default_factory=deque)
    _config: dict[str, Any] = field(default_factory=dict)
    _exporter: SpanExporter | None = None
    _resource: Resource = field(default_factory=Resource.get_empty)
    _ready: threading.Condition = field(default_factory=threading.Condition)
    _thread: threading.Thread | None = None

    def configure(self, config: dict[str, Any]) -> None:
        """Export with `config` from the next batch on (the exporter is made again only when it changes)."""
        if config == self._config:
            return
        with self._ready:
            old, self._exporter = self._exporter, None
            self._config = config
            self._resource = Resource.create({"service.name": config["service_name"]})
            if config["host"]:
                self._exporter = self.exporter_of(config)
            else:
                log.warning("tracing is on but the ConfigMap names no otlp-collector-host: spans are not exported")
            if len(self._records) > config["max_queue_size"]:
                self._drop(len(self._records) - config["max_queue_size"])
        if old is not None:
            old.shutdown()
        log.info("exporting spans", extra=logs.kv(collector=f"{config['host']}:{config['port']}",
                                                  protocol=config["protocol"], service=config["service_name"]))
        if self._thread is None:
            self._thread = threading.Thread(target=self._export_forever, name="otlp-export", daemon=True)
            self._thread.start()

    def _drop(self, count: int) -> None:
        for _ in range(count):
            self._records.popleft()
        self.counts.dropped_queue_full += count

    def add(self, records: list) -> None:
        """Queue nginx's records; those beyond otel-max-queuesize are dropped (counted), as the SDK drops them."""
        with self._ready:
            room = self._config["max_queue_size"] - len(self._records)
            self._records.extend(records[:max(room, 0)])
            if len(records) > room:
                self.counts.dropped_queue_full += len(records) - max(room, 0)
            self.counts.queued = len(self._records)
            if len(self._records) >= self._config["max_export_batch_size"]:
                self._ready.notify()

    def _next_batch(self) -> tuple[list, SpanExporter | None, Resource]:
        """Waits for a full batch, or for otel-schedule-delay-millis; returns it with what exports it."""
        with self._ready:
            deadline = time.monotonic() + self._config["schedule_delay_millis"] / 1000
            while len(self._records) < self._config["max_export_batch_size"]:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._ready.wait(left)
            size = min(len(self._records), self._config["max_export_batch_size"])
            batch = [self._records.popleft() for _ in range(size)]
            self.counts.queued = len(self._records)
            return batch, self._exporter, self._resource

    def _export_forever(self) -> None:
        while True:
            batch, exporter, resource = self._next_batch()
            if not batch:
                continue
            spans: list[ReadableSpan] = []
            for record in batch:
                try:
                    spans.append(span_of(record, resource))
                except BadRecord as err:
                    self.counts.malformed += 1
                    log.warning("span record from nginx dropped", extra=logs.kv(error=err))
            if not spans:
                continue
            try:
                result = exporter.export(spans) if exporter is not None else SpanExportResult.FAILURE
            except Exception as err:  # noqa: BLE001 - an exporter's failure must not end the thread
                log.warning("span export failed", extra=logs.kv(error=err))
                result = SpanExportResult.FAILURE
            if result is SpanExportResult.SUCCESS:
                self.counts.exported += len(spans)
            else:
                self.counts.failed += len(spans)

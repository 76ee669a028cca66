"""The tracer's queue: bounded by otel-max-queuesize (what does not fit is counted, never waited for), exported in
batches of otel-max-export-batch-size through the OpenTelemetry SDK's exporter interface, every span counted by what
became of it. The exporter here is the SDK's in-memory one."""
from __future__ import annotations

import time

from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from services.tracer.export_queue import ExportQueue
from tests.unit.tracer.test_nginx_spans import record

CONFIG = {"host": "collector.example.com", "port": 4318, "protocol": "http/protobuf", "service_name": "edge",
          "max_queue_size": 10, "schedule_delay_millis": 50, "max_export_batch_size": 4}


class RefusingExporter(SpanExporter):
    """A collector that answers every export with an error."""

    def export(self, spans: object) -> SpanExportResult:
        return SpanExportResult.FAILURE


def settled(queue: ExportQueue, total: int) -> dict[str, int]:
    """The counts once every span is accounted for (the export thread runs beside the test)."""
    deadline = time.monotonic() + 10
    while sum(v for k, v in queue.counts.as_dict().items() if k != "queued") < total:
        assert time.monotonic() < deadline, queue.counts
        time.sleep(0.01)
    return queue.counts.as_dict()


def test_spans_beyond_the_queue_are_dropped_and_the_rest_exported_in_batches():
    memory = InMemorySpanExporter()
    queue = ExportQueue(exporter_of=lambda config: memory)
    queue.configure(CONFIG)
    queue.add([record() for _ in range(25)])
    counts = settled(queue, 25)
    assert (counts["exported"], counts["dropped_queue_full"], counts["queued"]) == (10, 15, 0)
    spans = memory.get_finished_spans()
    assert len(spans) == 10 and {s.resource.attributes["service.name"] for s in spans} == {"edge"}


def test_a_refused_export_is_counted_as_failed_and_a_bad_record_as_malformed():
    queue = ExportQueue(exporter_of=lambda config: RefusingExporter())
    queue.configure(CONFIG)
    queue.add([record(), ["not", "a", "span"], record()])
    counts = settled(queue, 3)
    assert (counts["failed"], counts["malformed"], counts["exported"]) == (2, 1, 0)


def test_without_a_collector_nothing_is_exported_and_everything_counted():
    queue = ExportQueue(exporter_of=lambda config: InMemorySpanExporter())
    queue.configure({**CONFIG, "host": ""})
    queue.add([record() for _ in range(3)])
    assert settled(queue, 3)["failed"] == 3

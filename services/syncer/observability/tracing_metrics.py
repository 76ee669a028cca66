"""The tracer process's span counts on /metrics (from its status record, at most a few seconds old): a collector
that is down or slow costs the data plane nothing, and these say what it cost the traces."""
from __future__ import annotations

from services.common import component_state
from services.nginxconf.tracing import SPAN_OUTCOMES

from . import exposition


def tracer_lines(records: list[dict]) -> list[str]:
    """pyngress_tracing_spans_total by outcome, and the spans waiting for their export; none while nothing is
    traced."""
    for record in records:
        if record.get("component") == "tracer" and record.get("tracing") \
                and component_state.pid_alive(record.get("pid")):
            spans = record.get("spans") or {}
            return (exposition.family("pyngress_tracing_spans_total", "Sampled spans by what became of them "
                                      "(exported, failed: the collector refused them or could not be reached, "
                                      "dropped_in_nginx and dropped_queue_full: a bounded buffer was full)",
                                      "counter", [({"outcome": outcome}, spans.get(outcome, 0))
                                                  for outcome in SPAN_OUTCOMES])
                    + exposition.family("pyngress_tracing_queued_spans", "Spans waiting in the tracer for their "
                                        "export", "gauge", [({}, spans.get("queued", 0))]))
    return []

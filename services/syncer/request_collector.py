"""ingress-nginx's per-request metrics, from the batches nginx's Lua records (nginxconf/request_metrics.py).

The syncer pops the batches from nginx's configuration socket before each scrape and every few seconds (so
that they never pile up in nginx), adds them to its running totals and writes them in the exposition format.
Totals live here, not in nginx: they survive nginx reloads and a restarted master. The series of an Ingress
that no longer exists are dropped, as ingress-nginx drops them.
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from services.common import logs
from services.nginxconf.request_metrics import KEY_LABELS, PREFIX, REQUESTS, RequestMetricsLayout
from services.syncer import exposition

log = logging.getLogger("syncer")

# The deprecated summary older ingress-nginx releases exported (removed in v1.12), which older dashboards still
# chart: upstream connect time per Ingress. Its quantiles are estimated from the connect-time buckets.
UPSTREAM_LATENCY = "ingress_upstream_latency_seconds"
_UPSTREAM_LATENCY_LABELS = ("ingress", "namespace", "service", "canary")
_QUANTILES = (0.5, 0.9, 0.99)
_CONNECT = "connect_duration_seconds"


@dataclass
class RequestTotals:
    """Running totals per label set (label values in `labels_names` order)."""
    layout: RequestMetricsLayout
    report_status_classes: bool = False
    totals: dict[tuple[str, ...], list[float]] = field(default_factory=dict)
    dropped: int = 0  # label sets of batches that did not have the layout's width

    @property
    def label_names(self) -> tuple[str, ...]:
        return KEY_LABELS if self.layout.per_host else KEY_LABELS[1:]

    def add_batches(self, text: bytes) -> None:
        """Add nginx's answer to GET /configuration/metrics: a JSON array of batches."""
        try:
            batches = json.loads(text)
        except ValueError as err:
            log.warning("request metrics from nginx are not JSON; dropped", extra=logs.kv(error=err))
            return
        width = self.layout.width
        for batch in batches if isinstance(batches, list) else []:
            for key, numbers in batch.items() if isinstance(batch, dict) else ():
                values = key.split("\t", len(KEY_LABELS) - 1)
                if len(values) != len(KEY_LABELS) or not isinstance(numbers, list) or len(numbers) != width:
                    self.dropped += 1
                    continue
                self._add(values, numbers)

    def _add(self, values: list[str], numbers: list[float]) -> None:
        if self.report_status_classes and values[6]:
            values[6] = values[6][0] + "xx"
        labels = tuple(values) if self.layout.per_host else tuple(values[1:])
        totals = self.totals.get(labels)
        if totals is None:
            self.totals[labels] = [float(n) for n in numbers]
            return
        for i, n in enumerate(numbers):
            totals[i] += n

    def keep_ingresses(self, present: set[str]) -> None:
        """Drop the series of Ingresses ("namespace/name") that are gone; unclaimed requests stay."""
        at = self.label_names.index("namespace")
        for labels in [labels for labels in self.totals if labels[at + 1]]:
            if f"{labels[at]}/{labels[at + 1]}" not in present:
                del self.totals[labels]

    def lines(self, const_labels: Mapping[str, str]) -> list[str]:
        names = self.label_names
        series = [({**const_labels, **dict(zip(names, labels))}, totals) for labels, totals in self.totals.items()]
        excluded = set(self.layout.excluded)
        lines: list[str] = []
        if REQUESTS not in excluded:
            lines += exposition.family(PREFIX + REQUESTS, "The total number of client requests", "counter",
                                       ((labels, totals[0]) for labels, totals in series))
        offset = 1
        for spec, bounds in self.layout.histograms:
            name = PREFIX + spec.name
            lines += exposition.family(name, spec.help, "histogram", ())
            for labels, totals in series:
                counts = totals[offset:offset + len(bounds) + 1]
                if sum(counts):
                    lines += exposition.histogram_samples(name, labels, bounds, counts, totals[offset + len(bounds) + 1])
            if spec.name == _CONNECT:
                lines += _upstream_latency(series, const_labels, bounds, offset)
            offset += len(bounds) + 2
        return lines


def _upstream_latency(series: Iterable[tuple[dict[str, str], list[float]]], const_labels: Mapping[str, str],
                      bounds: tuple[float, ...], offset: int) -> list[str]:
    by_ingress: dict[tuple[str, ...], tuple[list[float], float]] = {}
    for labels, totals in series:
        key = tuple(labels[name] for name in _UPSTREAM_LATENCY_LABELS)
        counts, total = by_ingress.get(key, ([0.0] * (len(bounds) + 1), 0.0))
        for i in range(len(bounds) + 1):
            counts[i] += totals[offset + i]
        by_ingress[key] = (counts, total + totals[offset + len(bounds) + 1])
    name = PREFIX + UPSTREAM_LATENCY
    lines = exposition.family(name, "DEPRECATED Upstream service latency per Ingress (quantiles estimated from "
                                    "the connect_duration_seconds buckets)", "summary", ())
    for key, (counts, total) in by_ingress.items():
        if not sum(counts):
            continue
        labels = {**const_labels, **dict(zip(_UPSTREAM_LATENCY_LABELS, key))}
        for quantile in _QUANTILES:
            value = estimate_quantile(quantile, bounds, counts)
            lines.append(f"{name}{exposition.labels_text({**labels, 'quantile': str(quantile)})} "
                         f"{exposition.number(value)}")
        lines.append(f"{name}_sum{exposition.labels_text(labels)} {exposition.number(total)}")
        lines.append(f"{name}_count{exposition.labels_text(labels)} {exposition.number(sum(counts))}")
    return lines


def estimate_quantile(quantile: float, bounds: tuple[float, ...], counts: list[float]) -> float:
    """The quantile of bucketed observations, interpolated linearly inside its bucket as PromQL's
    histogram_quantile does (the last bound when it falls above it)."""
    rank = quantile * sum(counts)
    seen, lower = 0.0, 0.0
    for bound, count in zip(bounds, counts):
        if count and seen + count >= rank:
            return lower + (bound - lower) * (rank - seen) / count
        seen += count
        lower = bound
    return bounds[-1]

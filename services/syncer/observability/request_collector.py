"""ingress-nginx's per-request metrics, from the batches nginx's Lua records (nginxconf/request_metrics.py).

The syncer pops the batches from nginx's configuration socket before each scrape and every few seconds (so
that they never pile up in nginx), adds them to its running totals and writes them in the exposition format.
Totals live here, not in nginx: they survive nginx reloads and a restarted master. The series of an Ingress
that no longer exists are dropped, as ingress-nginx drops them.

Every label value is bounded: host, namespace, ingress, service, path and canary come from the routes table
(the model), the method is one of KNOWN_METHODS or OTHER_METHOD (monitor.lua folds the others), and the status is
nginx's three digits. A key that breaks these is dropped, so a batch from anything but monitor.lua cannot add
series. With --metrics-per-undefined-host the host is the client's: at most UNDEFINED_HOSTS_KEPT of them get a
series, later ones are counted under OTHER_HOST.

At 10,000 Ingresses with traffic the exposition is about 300 MB: `chunks()` writes it a few hundred series at
a time, from a snapshot, so that the syncer's event loop (/healthz, the syncer's work) runs between chunks.
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any, Container, Iterable, Iterator, Mapping

from services.common import logs
from services.nginxconf.request_metrics import KEY_LABELS, KNOWN_METHODS, OTHER_METHOD, PREFIX, REQUESTS, \
    RequestMetricsLayout

from . import exposition

log = logging.getLogger("syncer")

# The deprecated summary older ingress-nginx releases exported (removed in v1.12), which older dashboards still
# chart: upstream connect time per Ingress. Its quantiles are estimated from the connect-time buckets.
UPSTREAM_LATENCY = "ingress_upstream_latency_seconds"
_UPSTREAM_LATENCY_LABELS = ("ingress", "namespace", "service", "canary")
_QUANTILES = (0.5, 0.9, 0.99)
_CONNECT = "connect_duration_seconds"

# Places in a batch key (KEY_LABELS order).
_HOST, _NAMESPACE, _INGRESS, _STATUS, _METHOD = 0, 1, 2, 6, 7
UNDEFINED_HOSTS_KEPT = 1000
OTHER_HOST = "_other"
# Series written per chunk: a chunk of one histogram family is about 3 ms of the event loop.
CHUNK_SERIES = 256


def _is_status(text: str) -> bool:
    return len(text) == 3 and text.isascii() and text.isdigit()


@dataclass
class RequestTotals:
    """Running totals per label set (label values in `labels_names` order)."""
    layout: RequestMetricsLayout
    report_status_classes: bool = False
    # A label set's list is replaced, never changed in place: a shallow copy of the dict is a consistent snapshot.
    totals: dict[tuple[str, ...], list[float]] = field(default_factory=dict)
    dropped: int = 0  # label sets of batches that did not have the layout's width or bounded values
    undefined_hosts: set[str] = field(default_factory=set)  # with --metrics-per-undefined-host
    # The Ingresses ("namespace/name") whose requests are counted (None: all): a batch may still carry one that is
    # gone, and its series would never go again.
    present: Container[str] | None = None
    # Ingress → its label sets, so that the series of one that goes are found without a pass over all of them.
    _series_of: dict[str, set[tuple[str, ...]]] = field(default_factory=dict)
    # Each series' labels as the exposition writes them (the constant labels first), made at its first scrape.
    _texts: dict[tuple[str, ...], str] = field(default_factory=dict)
    _texts_prefix: str = ""

    @property
    def label_names(self) -> tuple[str, ...]:
        return KEY_LABELS if self.layout.per_host else KEY_LABELS[1:]

    @staticmethod
    def parse(text: bytes) -> Any:
        """nginx's answer to GET /configuration/metrics (a JSON array of batches); None when it is not JSON."""
        try:
            return json.loads(text)
        except ValueError as err:
            log.warning("request metrics from nginx are not JSON; dropped", extra=logs.kv(error=err))
            return None

    def add_batches(self, text: bytes | Any) -> None:
        """Add nginx's answer to GET /configuration/metrics, as it came or parsed (`parse`)."""
        batches = self.parse(text) if isinstance(text, bytes) else text
        width = self.layout.width
        for batch in batches if isinstance(batches, list) else []:
            for key, numbers in batch.items() if isinstance(batch, dict) else ():
                values = key.split("\t", len(KEY_LABELS) - 1)
                if len(values) != len(KEY_LABELS) or not isinstance(numbers, list) or len(numbers) != width \
                        or not _is_status(values[_STATUS]) or values[_METHOD] not in KNOWN_METHODS \
                        and values[_METHOD] != OTHER_METHOD:
                    self.dropped += 1
                    continue
                self._add(values, numbers)

    def _add(self, values: list[str], numbers: list[float]) -> None:
        if self.report_status_classes:
            values[_STATUS] = values[_STATUS][0] + "xx"
        if self.layout.per_undefined_host and not values[_INGRESS]:
            values[_HOST] = self._undefined_host(values[_HOST])
        labels = tuple(values) if self.layout.per_host else tuple(values[1:])
        totals = self.totals.get(labels)
        if totals is None:
            ingress = f"{values[_NAMESPACE]}/{values[_INGRESS]}" if values[_INGRESS] else ""
            if ingress and self.present is not None and ingress not in self.present:
                return
            self._series_of.setdefault(ingress, set()).add(labels)
            self.totals[labels] = [float(n) for n in numbers]
        else:
            self.totals[labels] = [total + n for total, n in zip(totals, numbers)]

    def _undefined_host(self, host: str) -> str:
        """`host` while fewer than UNDEFINED_HOSTS_KEPT hosts have a series of their own, else OTHER_HOST (a
        client chooses the Host header: each would be a series for as long as the process runs)."""
        if host in self.undefined_hosts:
            return host
        if len(self.undefined_hosts) >= UNDEFINED_HOSTS_KEPT:
            return OTHER_HOST
        self.undefined_hosts.add(host)
        return host

    def drop_ingresses(self, gone: Iterable[str]) -> None:
        """Drop the series of these Ingresses ("namespace/name"); unclaimed requests stay."""
        for ingress in gone:
            for labels in self._series_of.pop(ingress, ()) if ingress else ():
                self.totals.pop(labels, None)
                self._texts.pop(labels, None)

    def chunks(self, const_labels: Mapping[str, str]) -> Iterator[str]:
        """The exposition text of the request metrics in pieces of at most CHUNK_SERIES series, each ending with a
        newline; an empty piece is a pause in work that writes nothing. The totals are those of the first piece."""
        # Parallel lists, not a tuple per series: fewer objects for the garbage collector, whose full passes are
        # most of what a chunk holds the loop up at this size.
        label_values, totals_of = list(self.totals), list(self.totals.values())
        names = self.label_names
        prefix = exposition.labels_text(const_labels)[1:-1]
        if prefix != self._texts_prefix:
            self._texts, self._texts_prefix = {}, prefix
        made = self._texts
        texts: list[str] = []  # each series' labels, without the braces
        for start in range(0, len(label_values), CHUNK_SERIES):
            for values in label_values[start:start + CHUNK_SERIES]:
                text = made.get(values)
                if text is None:
                    text = exposition.labels_text(dict(zip(names, values)))[1:-1]
                    text = made[values] = f"{prefix},{text}" if prefix else text
                texts.append(text)
            yield ""
        series = _Series(texts, label_values, totals_of)
        excluded = set(self.layout.excluded)
        if REQUESTS not in excluded:
            name = PREFIX + REQUESTS
            yield _join(exposition.family(name, "The total number of client requests", "counter", ()))
            for texts, _, totals_of in series.chunks():
                yield _join(f"{name}{{{text}}} {exposition.count(totals[0])}" for text, totals in zip(texts, totals_of))
        offset = 1
        for spec, bounds in self.layout.histograms:
            name = PREFIX + spec.name
            yield _join(exposition.family(name, spec.help, "histogram", ()))
            for texts, _, totals_of in series.chunks():
                yield _join(line for text, totals in zip(texts, totals_of)
                            for line in _histogram_lines(name, text, bounds, totals, offset))
            if spec.name == _CONNECT:
                yield from _upstream_latency(series, names, const_labels, bounds, offset)
            offset += len(bounds) + 2


@dataclass(frozen=True)
class _Series:
    """A snapshot of the totals: each series' labels text, label values and totals, at the same index."""
    texts: list[str]
    label_values: list[tuple[str, ...]]
    totals: list[list[float]]

    def chunks(self) -> Iterator[tuple[list[str], list[tuple[str, ...]], list[list[float]]]]:
        for start in range(0, len(self.texts), CHUNK_SERIES):
            end = start + CHUNK_SERIES
            yield self.texts[start:end], self.label_values[start:end], self.totals[start:end]


def _join(lines: Iterable[str]) -> str:
    text = "\n".join(lines)
    return text + "\n" if text else ""


def _histogram_lines(name: str, labels_text: str, bounds: tuple[float, ...], totals: list[float],
                     offset: int) -> list[str]:
    """One series' _bucket, _sum and _count lines of one histogram (exposition.histogram_samples, with the labels
    written once: the same text in a tenth of the time); none when it has no observation."""
    counts = totals[offset:offset + len(bounds) + 1]
    if not any(counts):
        return []
    count = exposition.count
    cumulative = list(accumulate(counts))
    bucket = f'{name}_bucket{{{labels_text},le="'
    lines = [f'{bucket}{le}"}} {count(total)}' for le, total in zip(_le_texts(bounds), cumulative)]
    lines.append(f"{name}_sum{{{labels_text}}} {exposition.number(totals[offset + len(bounds) + 1])}")
    lines.append(f"{name}_count{{{labels_text}}} {count(cumulative[-1])}")
    return lines


_LE_TEXTS: dict[tuple[float, ...], tuple[str, ...]] = {}


def _le_texts(bounds: tuple[float, ...]) -> tuple[str, ...]:
    """The `le` label values of a histogram's buckets, +Inf last."""
    texts = _LE_TEXTS.get(bounds)
    if texts is None:
        texts = _LE_TEXTS[bounds] = tuple(exposition.number(bound) for bound in (*bounds, float("inf")))
    return texts


def _upstream_latency(series: _Series, names: tuple[str, ...], const_labels: Mapping[str, str],
                      bounds: tuple[float, ...], offset: int) -> Iterator[str]:
    places = [names.index(name) for name in _UPSTREAM_LATENCY_LABELS]
    by_ingress: dict[tuple[str, ...], tuple[list[float], float]] = {}
    for _, label_values, totals_of in series.chunks():
        for values, totals in zip(label_values, totals_of):
            key = tuple(values[place] for place in places)
            counts, total = by_ingress.get(key, ([0.0] * (len(bounds) + 1), 0.0))
            for i in range(len(bounds) + 1):
                counts[i] += totals[offset + i]
            by_ingress[key] = (counts, total + totals[offset + len(bounds) + 1])
        yield ""
    name = PREFIX + UPSTREAM_LATENCY
    yield _join(exposition.family(name, "DEPRECATED Upstream service latency per Ingress (quantiles estimated from "
                                        "the connect_duration_seconds buckets)", "summary", ()))
    rows = list(by_ingress.items())
    for start in range(0, len(rows), CHUNK_SERIES):
        lines = []
        for key, (counts, total) in rows[start:start + CHUNK_SERIES]:
            if not sum(counts):
                continue
            labels = exposition.labels_text({**const_labels, **dict(zip(_UPSTREAM_LATENCY_LABELS, key))})
            lines += [f'{name}{labels[:-1]},quantile="{quantile}"}} '
                      f'{exposition.number(estimate_quantile(quantile, bounds, counts))}' for quantile in _QUANTILES]
            lines.append(f"{name}_sum{labels} {exposition.number(total)}")
            lines.append(f"{name}_count{labels} {exposition.count(sum(counts))}")
        yield _join(lines)


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

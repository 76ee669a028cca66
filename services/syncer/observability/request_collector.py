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

import functools
import json
import logging
from dataclasses import dataclass, field
from operator import add, itemgetter
from typing import Any, Container, Iterable, Iterator, Mapping

from services.common import logs
from services.nginxconf.request_metrics import KEY_LABELS, KNOWN_METHODS, OTHER_METHOD, PREFIX, REQUESTS, \
    RequestMetricsLayout

from . import exposition
from .series_format import SeriesFormat, labels_bytes

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


def _numbers(values: list) -> bool:
    """Whether these are all numbers (a sum is the cheapest check: it fails on anything else)."""
    try:
        sum(values)
    except TypeError:
        return False
    return True


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
    _texts: dict[tuple[str, ...], bytes] = field(default_factory=dict)
    # The same for the upstream latency summary's series (per Ingress), kept for the Ingresses of the last scrape.
    _summary_texts: dict[tuple[str, ...], bytes] = field(default_factory=dict)
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
                        and values[_METHOD] != OTHER_METHOD or not _numbers(numbers):
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
            self.totals[labels] = list(numbers)  # ints stay ints: the exposition writes them fastest
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

    def chunks(self, const_labels: Mapping[str, str]) -> Iterator[bytes]:
        """The exposition text of the request metrics in pieces of at most CHUNK_SERIES series, each ending with a
        newline; an empty piece is a pause in work that writes nothing. The totals are those of the first piece."""
        # Parallel lists, not a tuple per series: fewer objects for the garbage collector, whose full passes are
        # most of what a chunk holds the loop up at this size.
        label_values, totals_of = list(self.totals), list(self.totals.values())
        names = self.label_names
        prefix = exposition.labels_text(const_labels)[1:-1]
        if prefix != self._texts_prefix:
            self._texts, self._summary_texts, self._texts_prefix = {}, {}, prefix
        made = self._texts
        texts: list[bytes] = []  # each series' labels, without the braces (labels_bytes)
        for start in range(0, len(label_values), CHUNK_SERIES):
            for values in label_values[start:start + CHUNK_SERIES]:
                text = made.get(values)
                if text is None:
                    labels = exposition.labels_text(dict(zip(names, values)))[1:-1]
                    text = made[values] = labels_bytes(f"{prefix},{labels}" if prefix else labels)
                texts.append(text)
            yield b""
        series = _Series(texts, label_values, totals_of)
        excluded = set(self.layout.excluded)
        if REQUESTS not in excluded:
            name = PREFIX + REQUESTS
            yield _join(exposition.family(name, "The total number of client requests", "counter", ()))
            line = _formats(name, None).counter_line
            for texts, _, totals_of in series.chunks():
                yield b"".join([line(text, totals[0]) for text, totals in zip(texts, totals_of)])
        offset = 1
        for spec, bounds in self.layout.histograms:
            name = PREFIX + spec.name
            yield _join(exposition.family(name, spec.help, "histogram", ()))
            lines, end = _formats(name, bounds).histogram_lines, offset + len(bounds) + 1
            for texts, _, totals_of in series.chunks():
                yield b"".join([lines(text, totals[offset:end], totals[end]) for text, totals in zip(texts, totals_of)])
            if spec.name == _CONNECT:
                yield from _upstream_latency(series, names, self._summary_texts, const_labels, bounds, offset)
            offset += len(bounds) + 2


@dataclass(frozen=True)
class _Series:
    """A snapshot of the totals: each series' labels text, label values and totals, at the same index."""
    texts: list[bytes]
    label_values: list[tuple[str, ...]]
    totals: list[list[float]]

    def chunks(self) -> Iterator[tuple[list[bytes], list[tuple[str, ...]], list[list[float]]]]:
        for start in range(0, len(self.texts), CHUNK_SERIES):
            end = start + CHUNK_SERIES
            yield self.texts[start:end], self.label_values[start:end], self.totals[start:end]


def _join(lines: Iterable[str]) -> bytes:
    text = "\n".join(lines)
    return (text + "\n").encode() if text else b""


@functools.cache
def _formats(name: str, bounds: tuple[float, ...] | None) -> SeriesFormat:
    """A counter's format (no bounds) or a histogram's."""
    return SeriesFormat.counter(name) if bounds is None else SeriesFormat.histogram(name, bounds)


def _upstream_latency(series: _Series, names: tuple[str, ...], made: dict[tuple[str, ...], bytes],
                      const_labels: Mapping[str, str], bounds: tuple[float, ...], offset: int) -> Iterator[bytes]:
    """The summary's lines; `made` holds the labels texts of its series (those of Ingresses gone are dropped)."""
    key_of = itemgetter(*(names.index(name) for name in _UPSTREAM_LATENCY_LABELS))
    end = offset + len(bounds) + 1
    by_ingress: dict[tuple[str, ...], tuple[list[float], float]] = {}
    for _, label_values, totals_of in series.chunks():
        for values, totals in zip(label_values, totals_of):
            key = key_of(values)
            seen = by_ingress.get(key)
            by_ingress[key] = (totals[offset:end], totals[end]) if seen is None else \
                (list(map(add, seen[0], totals[offset:end])), seen[1] + totals[end])
        yield b""
    name = PREFIX + UPSTREAM_LATENCY
    yield _join(exposition.family(name, "DEPRECATED Upstream service latency per Ingress (quantiles estimated from "
                                        "the connect_duration_seconds buckets)", "summary", ()))
    lines = _summary_format(name).summary_lines
    for gone in made.keys() - by_ingress.keys():
        del made[gone]
    rows = list(by_ingress.items())
    for start in range(0, len(rows), CHUNK_SERIES):
        parts = []
        for key, (counts, total) in rows[start:start + CHUNK_SERIES]:
            count = sum(counts)
            if count:
                labels = made.get(key)
                if labels is None:
                    text = exposition.labels_text({**const_labels, **dict(zip(_UPSTREAM_LATENCY_LABELS, key))})
                    labels = made[key] = labels_bytes(text[1:-1])
                quantiles = [estimate_quantile(quantile, bounds, counts) for quantile in _QUANTILES]
                parts.append(lines(labels, quantiles, total, count))
        yield b"".join(parts)


@functools.cache
def _summary_format(name: str) -> SeriesFormat:
    return SeriesFormat.summary(name, _QUANTILES)


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

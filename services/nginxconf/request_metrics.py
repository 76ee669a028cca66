"""What nginx records about each request for Prometheus, shared by the renderer (which hands it to
pyngress's nginx module) and the syncer's collector (which turns what nginx recorded into
ingress-nginx's metrics).

pyngress's nginx module (nginx-module/, in C) adds each request to a per-worker table keyed by its labels in the log
phase; once a second monitor.lua hands each worker's table to a shared dictionary as one JSON batch; the syncer pops
the batches (GET /configuration/metrics on the configuration socket) and keeps the running totals. No per-request
message leaves nginx.

A batch is {"<labels>": [<numbers>], ...}. <labels> is tab-separated: host, namespace, ingress, service, path,
canary, status and method. The host is the routes table's name for it (the Ingress's host, its wildcard
"*.example.com" or "_" for a rule without a host), so that clients choosing Host headers cannot add series;
only with --metrics-per-undefined-host is it the request's own. The method is one of `KNOWN_METHODS` or
`OTHER_METHOD`: nginx takes any upper-case token as a method, and each distinct one would be a new series
(the module folds them as it counts, so a made-up method never leaves the worker). The numbers are the request count, then for
each histogram of `RequestMetricsLayout.histograms` in order: one count per bucket (value <= bound, not
cumulative), one for values above the last bound, and the sum of the values.

Names, help texts, label names and default buckets are ingress-nginx's (internal/ingress/metric/collectors/
socket.go and pkg/flags/flags.go, v1.15).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from services.common.settings import MetricsSettings

# prometheus.DefBuckets, LinearBuckets(10, 10, 10) and ExponentialBuckets(10, 10, 7), as ingress-nginx's flags.
DEFAULT_TIME_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
DEFAULT_LENGTH_BUCKETS = (10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 100.0)
DEFAULT_SIZE_BUCKETS = (10.0, 100.0, 1e3, 1e4, 1e5, 1e6, 1e7)

PREFIX = "nginx_ingress_controller_"
REQUESTS = "requests"
KEY_LABELS = ("host", "namespace", "ingress", "service", "path", "canary", "status", "method")

# The methods counted under their own name: RFC 9110's, PATCH (RFC 5789) and the WebDAV family's of the IANA
# HTTP Method Registry (RFC 4918, DeltaV's RFC 3253, ORDERPATCH 3648, ACL 3744, MKCALENDAR 4791, SEARCH 5323,
# BIND 5842, redirect references 4437), which WebDAV, CalDAV and CardDAV servers behind an Ingress answer.
KNOWN_METHODS = frozenset((
    "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH",
    "PROPFIND", "PROPPATCH", "MKCOL", "COPY", "MOVE", "LOCK", "UNLOCK",
    "VERSION-CONTROL", "REPORT", "CHECKOUT", "CHECKIN", "UNCHECKOUT", "MKWORKSPACE", "UPDATE", "LABEL", "MERGE",
    "BASELINE-CONTROL", "MKACTIVITY", "ORDERPATCH", "ACL", "MKCALENDAR", "SEARCH", "BIND", "REBIND", "UNBIND",
    "MKREDIRECTREF", "UPDATEREDIRECTREF"))
# The most frequent of them, most frequent first.
USUAL_METHODS = ("GET", "POST", "HEAD", "PUT", "DELETE", "OPTIONS", "PATCH")
# Every other method (OpenTelemetry's semantic conventions name it so for http.request.method).
OTHER_METHOD = "_OTHER"


@dataclass(frozen=True)
class HistogramSpec:
    name: str          # without the nginx_ingress_controller_ prefix
    help: str
    variable: str      # the nginx variable observed, in seconds or bytes
    bucket_kind: str   # "time", "length" or "size": which bucket flag sets its bounds


# ingress-nginx's request histograms, in the order their numbers appear in a batch.
HISTOGRAMS = (
    HistogramSpec("request_duration_seconds", "The request processing time in milliseconds", "request_time", "time"),
    HistogramSpec("response_duration_seconds", "The time spent on receiving the response from the upstream server",
                  "upstream_response_time", "time"),
    HistogramSpec("connect_duration_seconds", "The time spent on establishing a connection with the upstream server",
                  "upstream_connect_time", "time"),
    HistogramSpec("header_duration_seconds", "The time spent on receiving first header from the upstream server",
                  "upstream_header_time", "time"),
    HistogramSpec("request_size", "The request length (including request line, header, and request body)",
                  "request_length", "length"),
    HistogramSpec("response_size", "The response length (including request line, header, and request body)",
                  "bytes_sent", "length"),
    HistogramSpec("bytes_sent", "DEPRECATED The number of bytes sent to a client", "bytes_sent", "size"),
)
METRIC_NAMES = (REQUESTS,) + tuple(h.name for h in HISTOGRAMS)


@dataclass(frozen=True, kw_only=True)
class RequestMetricsLayout:
    """Which request metrics nginx records and how (from the --metrics-* flags). Part of nginx.conf: a change
    reloads nginx, and the collector drops batches of another layout."""
    per_host: bool = True
    per_undefined_host: bool = False
    time_buckets: tuple[float, ...] = DEFAULT_TIME_BUCKETS
    length_buckets: tuple[float, ...] = DEFAULT_LENGTH_BUCKETS
    size_buckets: tuple[float, ...] = DEFAULT_SIZE_BUCKETS
    # Metric names (without the prefix) that are neither recorded nor exported (--exclude-socket-metrics).
    excluded: tuple[str, ...] = field(default=())

    @property
    def histograms(self) -> tuple[tuple[HistogramSpec, tuple[float, ...]], ...]:
        """The recorded histograms with their bounds, in batch order."""
        bounds = {"time": self.time_buckets, "length": self.length_buckets, "size": self.size_buckets}
        return tuple((spec, bounds[spec.bucket_kind]) for spec in HISTOGRAMS if spec.name not in self.excluded)

    @property
    def width(self) -> int:
        """How many numbers each labels key of a batch carries."""
        return 1 + sum(len(bounds) + 2 for _, bounds in self.histograms)

    def module_directives(self) -> tuple[str, ...]:
        """The directives of pyngress's nginx module (nginx-module/) that count requests in this layout, for the
        `http` block; `pyngress_request_metrics on` in a server then counts its requests."""
        undefined = "own" if self.per_undefined_host else "skip" if self.per_host else "together"
        # The module compares a request's method with each in turn: the usual ones first.
        methods = (*USUAL_METHODS, *sorted(KNOWN_METHODS.difference(USUAL_METHODS)))
        return ("pyngress_metrics_labels $pyngress_metric;",
                f"pyngress_metrics_undefined_hosts {undefined};",
                f"pyngress_metrics_methods {OTHER_METHOD} {' '.join(methods)};",
                *(f"pyngress_metrics_histogram {spec.variable} {' '.join(repr(bound) for bound in bounds)};"
                  for spec, bounds in self.histograms))


def layout_of(settings: MetricsSettings) -> RequestMetricsLayout | None:
    """The layout the --metrics-* flags ask for; None with --enable-metrics=false."""
    if not settings.enabled:
        return None
    excluded = tuple(name.removeprefix(PREFIX) for name in settings.exclude_socket_metrics.split(",") if name)

    def bounds(text: str) -> tuple[float, ...]:
        return tuple(float(word) for word in text.split(","))

    return RequestMetricsLayout(per_host=settings.per_host, per_undefined_host=settings.per_undefined_host,
                                time_buckets=bounds(settings.time_buckets),
                                length_buckets=bounds(settings.length_buckets),
                                size_buckets=bounds(settings.size_buckets), excluded=excluded)

"""The read-only live dashboard on the healthz port (`/dashboard`, its data at `/dashboard/data`).

What it shows comes from what the syncer already holds: the applied model (routes, endpoints, certificates,
rejected objects), the reload statistics, the request totals collected from nginx (request_collector.py)
and the components' status records. Recent request rates, error rates and latency percentiles are the
difference between two snapshots of the totals about half a minute apart. No Secret material leaves here:
certificates are described by host, Secret name, issuer and expiry only.
"""
from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from services.common import component_state
from services.syncer.model.types import Model

from .controller_metrics import certificate_facts
from .metrics import SyncerMetrics
from .request_collector import RequestTotals, estimate_quantile

PAGE = Path(__file__).with_name("dashboard.html")
WINDOW_SECONDS = 30.0   # recent figures span about this long
KEEP_SECONDS = 120.0    # snapshots older than this are dropped


@dataclass
class BackendTotals:
    """One backend's running totals: requests, 5xx answers, and request-duration bucket counts."""
    requests: float = 0.0
    errors: float = 0.0
    buckets: list[float] = field(default_factory=list)


def _route_backends(model: Model) -> dict[tuple[str, str, str, str, str], str]:
    """(host, namespace, ingress, service, path) of each route → its backend, as the metric labels name them."""
    found = {}
    for host, host_routes in model.routes.items():
        paths = [*host_routes.exact.items(), *host_routes.prefix.items()]
        if host_routes.default is not None:
            paths.append(("/", host_routes.default))
        for path, route in paths:
            if route.backend and route.ingress:
                namespace, _, ingress = route.ingress.partition("/")
                found[(host, namespace, ingress, route.service, path)] = route.backend
    return found


def backend_totals(model: Model, requests: RequestTotals) -> dict[str, BackendTotals]:
    """The request totals added up per backend (a canary's requests count for the canary's backend)."""
    routes = _route_backends(model)
    names = requests.label_names
    histograms = requests.layout.histograms
    width = len(histograms[0][1]) + 1 if histograms and histograms[0][0].name == "request_duration_seconds" else 0
    per_backend: dict[str, BackendTotals] = {}
    for values, numbers in requests.totals.items():
        labels = dict(zip(names, values))
        backend = labels["canary"] or _backend_of(routes, labels)
        if not backend:
            continue
        totals = per_backend.setdefault(backend, BackendTotals(buckets=[0.0] * width))
        totals.requests += numbers[0]
        if labels["status"].startswith("5"):
            totals.errors += numbers[0]
        for i in range(width):
            totals.buckets[i] += numbers[1 + i]
    return per_backend


def _backend_of(routes: dict[tuple[str, str, str, str, str], str], labels: dict[str, str]) -> str | None:
    key = (labels["namespace"], labels["ingress"], labels["service"], labels["path"])
    if "host" in labels:
        return routes.get((labels["host"], *key))
    return next((backend for route, backend in routes.items() if route[1:] == key), None)


@dataclass
class Recent:
    """Snapshots of the per-backend totals, to tell what happened over the last half minute."""
    snapshots: deque[tuple[float, dict[str, BackendTotals]]] = field(default_factory=deque)

    def add(self, now: float, totals: dict[str, BackendTotals]) -> None:
        self.snapshots.append((now, totals))
        while self.snapshots and now - self.snapshots[0][0] > KEEP_SECONDS:
            self.snapshots.popleft()

    def baseline(self, now: float) -> tuple[float, dict[str, BackendTotals]]:
        """The newest snapshot at least WINDOW_SECONDS old, else the oldest there is."""
        older = [snapshot for snapshot in self.snapshots if now - snapshot[0] >= WINDOW_SECONDS]
        return older[-1] if older else self.snapshots[0]


def backend_figures(now_totals: BackendTotals, then: BackendTotals | None, seconds: float,
                    bounds: tuple[float, ...]) -> dict[str, Any]:
    then = then or BackendTotals(buckets=[0.0] * len(now_totals.buckets))
    requests = now_totals.requests - then.requests
    errors = now_totals.errors - then.errors
    buckets = [a - b for a, b in zip(now_totals.buckets, then.buckets)]
    figures: dict[str, Any] = {"requests": now_totals.requests,
                               "rate": round(requests / seconds, 2) if seconds > 0 else None,
                               "error_rate": round(errors / requests, 4) if requests else None,
                               "p50": None, "p99": None}
    if bounds and sum(buckets):
        figures["p50"] = round(estimate_quantile(0.5, bounds, buckets), 4)
        figures["p99"] = round(estimate_quantile(0.99, bounds, buckets), 4)
    return figures


def _routes(model: Model) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for host, host_routes in sorted(model.routes.items()):
        if host_routes.redirect_host:
            rows.append({"host": host, "path": "", "kind": "redirect", "ingress": "", "backend": None,
                         "profile": "", "canary": None, "redirect": host_routes.redirect_host})
            continue
        paths = [(path, "exact", route) for path, route in sorted(host_routes.exact.items())]
        paths += [(path, "regex" if host_routes.regex else "prefix", route)
                  for path, route in sorted(host_routes.prefix.items())]
        if host_routes.default is not None:
            paths.append(("*", "default", host_routes.default))
        rows += [{"host": host, "path": path, "kind": kind, "ingress": route.ingress, "backend": route.backend,
                  "profile": route.profile, "canary": route.canary.backend if route.canary else None,
                  "tls": host_routes.tls} for path, kind, route in paths]
    return rows


def _certificates(model: Model, now: float) -> list[dict[str, Any]]:
    rows = []
    certs = model.certificates.get("certs", {})
    for host, ref in sorted(model.tls_secrets.items()):
        pem = certs.get(ref, {}).get("cert")
        facts = certificate_facts(pem) if pem else None
        rows.append({"host": host, "secret": ref, "issuer": facts.issuer_common_name if facts else None,
                     "expires": facts.expires if facts else None,
                     "days_left": round((facts.expires - now) / 86400, 1) if facts else None})
    return rows


def _components(records: list[dict[str, Any]], now: float) -> tuple[list[dict[str, Any]], dict[str, int]]:
    components, restarts = [], {}
    for record in records:
        if record.get("component") == "crashmon":
            restarts = {str(k): int(v) for k, v in (record.get("exits") or {}).items()}
        alive = component_state.pid_alive(record["pid"]) if record.get("pid") else False
        components.append({"name": record.get("component"), "state": record.get("state", "running") if alive
                           else "not running", "pid": record.get("pid"),
                           "updated_seconds_ago": round(now - float(record.get("updated", now)), 1)})
    return components, restarts


async def dashboard_data(metrics: SyncerMetrics, recent: Recent) -> dict[str, Any]:
    """Everything the page shows, as JSON-ready values."""
    await metrics.collect_requests()
    now = time.time()
    model = metrics.model
    stats = metrics.stats
    components, restarts = _components(component_state.read_all(metrics.run_dir), now)
    data: dict[str, Any] = {
        "time": now, "controller_class": stats.controller_class,
        "reloads": {"generation": stats.generation, "successful": stats.reloads, "failed": stats.reload_errors,
                    "last_successful": stats.last_reload_ok, "last_time": stats.last_reload_time or None,
                    "last_error": stats.last_error},
        "components": components, "restarts": restarts,
        "routes": [], "backends": [], "certificates": [], "problems": [],
    }
    if model is None:
        return data
    data["routes"] = _routes(model)
    data["certificates"] = _certificates(model, now)
    data["problems"] = [{"error": p.is_error, "text": str(p)} for p in model.problems]
    totals = backend_totals(model, metrics.requests) if metrics.requests is not None else {}
    figures: dict[str, dict[str, Any]] = {}
    if metrics.requests is not None:
        recent.add(now, totals)
        then_time, then = recent.baseline(now)
        histograms = metrics.requests.layout.histograms
        bounds = histograms[0][1] if histograms and histograms[0][0].name == "request_duration_seconds" else ()
        figures = {name: backend_figures(now_totals, then.get(name), now - then_time, bounds)
                   for name, now_totals in totals.items()}
    empty = {"requests": 0, "rate": None, "error_rate": None, "p50": None, "p99": None}
    data["backends"] = [{"name": name, "endpoints": endpoints, **figures.get(name, empty)}
                        for name, endpoints in sorted(model.backends.items())]
    return data

"""The healthz port's /metrics: ingress-nginx's metrics (reloads, requests, nginx's processes, certificates,
orphaned Ingresses, leader election) with their names and labels, so that existing dashboards and alerts
keep working, and pyngress's own.

The syncer owns /metrics because it has what the labels need (the model: which Ingresses exist, their
certificates) and already talks to nginx's configuration socket; the request counts come from nginx in
batches (request_collector.py), never one message per request.
"""
from __future__ import annotations

import asyncio
import functools
import os
import socket
import time
import zlib
from dataclasses import dataclass, field
from importlib import metadata
from collections import Counter
from typing import AsyncIterator, Callable, Iterable, TypeVar

from prometheus_client import CollectorRegistry, Gauge, Histogram, generate_latest

from services.common import component_state
from services.common.settings import Settings
from services.nginxconf import config_api
from services.nginxconf.config_api import NginxUnavailableError
from services.nginxconf.paths import NginxPaths
from services.nginxconf.request_metrics import PREFIX, layout_of
from services.syncer.model.problems import Problem
from services.syncer.model.types import Model

from . import exposition
from .controller_metrics import certificate_lines, orphan_lines
from .nginx_process_metrics import process_lines, process_totals, stub_status_lines
from .request_collector import RequestTotals
from .routed_ingresses import RoutedIngresses
from .tracing_metrics import tracer_lines

# How often request metrics are collected from nginx between scrapes.
COLLECT_SECONDS = 5.0
K = TypeVar("K")


@dataclass
class ReloadStats:
    controller_class: str
    reloads: int = 0           # successful reloads (nginx_ingress_controller_success)
    reload_errors: int = 0     # failed reloads (nginx_ingress_controller_errors)
    last_reload_ok: bool = True
    last_reload_time: float = 0.0
    config_hash: str = ""
    generation: int = 0        # bumped on every applied nginx.conf
    last_error: str = ""
    problems: list[str] = field(default_factory=list)


class SyncerMetrics:
    """Everything on the healthz port's /metrics: ingress-nginx's metrics with their names and labels, and
    pyngress's own (prometheus_client's registry)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.stats = ReloadStats(settings.ingress.controller_class)
        self.run_dir = settings.paths.run_dir
        self.paths = NginxPaths.of(settings.paths.state_dir, settings.paths.run_dir)
        # ingress-nginx's constant labels, from the pod's downward-API variables it reads too.
        self.const_labels = {"controller_class": settings.ingress.controller_class,
                             "controller_namespace": os.environ.get("POD_NAMESPACE", ""),
                             "controller_pod": os.environ.get("POD_NAME") or socket.gethostname()}
        layout = layout_of(settings.metrics)
        self.routed = RoutedIngresses()
        # Request series of Ingresses no route names are not kept (as ingress-nginx drops them).
        self.requests = RequestTotals(layout, report_status_classes=settings.metrics.report_status_classes,
                                      present=self.routed.ingresses) if layout else None
        self._collect_lock = asyncio.Lock()
        self.model: Model | None = None
        # Lease name → whether this process holds it now (set by the status task while it campaigns).
        self.leadership: dict[str, Callable[[], bool]] = {}
        self.registry = CollectorRegistry()
        self.sync_seconds = Histogram(
            "pyngress_sync_duration_seconds", "Time to turn a store change into nginx state, by what it took",
            ["kind"], registry=self.registry, buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30))
        self.objects = Gauge("pyngress_store_objects", "Objects in the syncer's store", registry=self.registry)
        self.rejected = Gauge("pyngress_rejected_objects", "Objects rejected while building the model",
                              registry=self.registry)
        # Per Ingress: what was refused or ignored of it (a host or alias another Ingress keeps, an annotation
        # pyngress ignores...), beside the warning line in the logs and the status record.
        self.ingress_problems = Gauge("pyngress_ingress_problems", "Problems found with an Ingress in the last "
                                      "model, by severity (error: refused; warning: partly ignored)",
                                      ["namespace", "ingress", "severity"], registry=self.registry)
        self.generation = Gauge("pyngress_config_generation", "Generation of the applied nginx.conf",
                                registry=self.registry)
        self.template_ok = Gauge("pyngress_template_ok", "1 when the newest version of the nginx template (built "
                                 "in, or --template) is the one in use; 0 while it is refused", registry=self.registry)
        self._problem_counts: dict[tuple[str, str, str], int] = {}  # as ingress_problems holds them
        self._problem_lines: dict[str, int] = {}  # each problem's text: how many the applied model has
        self._errors = 0  # as rejected holds it
        self.problems_counted = 0  # problems added or removed by change_problems (its work, counted)
        self.endpoint_pushes = Gauge("pyngress_dynamic_pushes", "Pushes of routes/backends/certificates to nginx",
                                     registry=self.registry)

    def applied(self, model: Model) -> None:
        """The model now serving (its certificates are read at the next scrape)."""
        self.model = model

    def note_routes(self, model: Model) -> None:
        """A model about to be applied: its Ingresses and orphans, from the hosts and backends it changed (every
        model the applier takes, so that no change is missed). Series of Ingresses now gone go."""
        self.routed.note(model)
        gone = self.routed.take_gone()
        if gone and self.requests is not None:
            self.requests.drop_ingresses(gone)

    async def collect_requests(self) -> None:
        """Add the request metrics nginx recorded since the last collection (nothing when nginx is down)."""
        if self.requests is None:
            return
        async with self._collect_lock:  # a batch is handed out once: never two collections at a time
            try:
                text = await config_api.get(self.paths, "/configuration/metrics")
                # Parsed beside the event loop: the batches of 10,000 Ingresses with traffic are megabytes of JSON.
                self.requests.add_batches(await asyncio.to_thread(RequestTotals.parse, text))
            except NginxUnavailableError:
                pass

    async def collect_forever(self) -> None:
        """Collect between scrapes too, so that batches never pile up in nginx's shared memory."""
        while True:
            await asyncio.sleep(COLLECT_SECONDS)
            await self.collect_requests()

    async def exposition(self) -> AsyncIterator[bytes]:
        """/metrics in pieces. The request metrics are most of it (about 300 MB at 10,000 Ingresses with traffic):
        they are written a few hundred series at a time, and the event loop runs /healthz and the syncer's work
        between two pieces."""
        await self.collect_requests()
        try:
            stub_status = (await config_api.get(self.paths, "/nginx_status")).decode()
        except NginxUnavailableError:
            stub_status = ""
        process = await asyncio.to_thread(process_totals, self.paths.pid_file)
        labels = self.const_labels
        lines = self._reload_lines()
        lines += exposition.family(PREFIX + "build_info",
                                   "A metric with a constant '1' labeled with information about the build.", "gauge",
                                   [({**labels, "release": _release(), "build": "pyngress",
                                      "repository": "pyngress"}, 1)])
        lines += exposition.family(PREFIX + "leader_election_status",
                                   "Gauge reporting status of the leader election, 0 indicates follower, 1 indicates "
                                   "leader. 'name' is the string used to identify the lease", "gauge",
                                   [({**labels, "name": name}, int(leading())) for name, leading in
                                    sorted(self.leadership.items())])
        if self.model is not None:
            # Beside the event loop: 10,000 certificates are 20,000 lines, and the first scrape parses each of them.
            lines += await asyncio.to_thread(certificate_lines, self.model, self.stats.controller_class)
            lines += orphan_lines(self.routed.current_orphans(), self.routed.orphans_ever, labels)
        lines += stub_status_lines(stub_status, labels) + process_lines(process, labels)
        records = await asyncio.to_thread(component_state.read_all, self.run_dir)
        lines += _process_exit_lines(records) + _passthrough_lines(records) + tracer_lines(records)
        yield ("\n".join(lines) + "\n").encode()
        for chunk in self.requests.chunks(labels) if self.requests is not None else ():
            if chunk:
                yield chunk
            await asyncio.sleep(0)  # the loop's turn
        yield generate_latest(self.registry)

    def set_problems(self, problems: Iterable[Problem]) -> list[str]:
        """The problems of the model just built, all of them: see change_problems."""
        return self.change_problems(problems, afresh=True)

    def change_problems(self, added: Iterable[Problem], removed: Iterable[Problem] = (), *,
                        afresh: bool = False) -> list[str]:
        """The problems of the model just built: the last one's with `added` and without `removed` (afresh: `added`
        alone). Counted by line, errors (pyngress_rejected_objects) and per Ingress (pyngress_ingress_problems, those
        of Ingresses now clean go away); only the counts that changed are written. Returns the lines that were not
        there before, sorted. A sync costs the problems that changed: each sync formatted and counted every problem
        (10,000 at 10,000 rejected Ingresses), and wrote every label set of the gauge before that."""
        lines: Counter[str] = Counter()
        ingresses: Counter[tuple[str, str, str]] = Counter()
        errors = 0
        if afresh:
            lines.subtract(self._problem_lines)
            ingresses.subtract(self._problem_counts)
            errors -= self._errors
        for sign, problems in ((-1, removed), (1, added)):
            for problem in problems:
                self.problems_counted += 1
                lines[str(problem)] += sign
                errors += sign if problem.is_error else 0
                if (key := _ingress_key(problem)) is not None:
                    ingresses[key] += sign
        new = []
        for line, change in lines.items():
            if change and not _changed_count(self._problem_lines, line, change):
                new.append(line)  # none before
        for key, change in ingresses.items():
            if change:
                count = _changed_count(self._problem_counts, key, change) + change
                if count:
                    self.ingress_problems.labels(*key).set(count)
                else:
                    self.ingress_problems.remove(*key)
        self._errors += errors
        self.rejected.set(self._errors)
        return sorted(new)

    def _reload_lines(self) -> list[str]:
        s, labels = self.stats, self.const_labels
        # The config hash as a number, as ingress-nginx exposes it (it uses a 64-bit hash of the config).
        config_hash = zlib.crc32(s.config_hash.encode()) if s.config_hash else 0
        rows = (
            ("success", "Cumulative number of Ingress controller reload operations", "counter", s.reloads),
            ("errors", "Cumulative number of Ingress controller errors during reload operations", "counter",
             s.reload_errors),
            ("config_last_reload_successful", "Whether the last configuration reload attempt was successful",
             "gauge", int(s.last_reload_ok)),
            ("config_last_reload_successful_timestamp_seconds", "Timestamp of the last successful configuration "
             "reload.", "gauge", s.last_reload_time),
            ("config_hash", "Running configuration hash actually running", "gauge", config_hash),
        )
        lines: list[str] = []
        for name, help_text, kind, value in rows:
            lines += exposition.family(PREFIX + name, help_text, kind, [(labels, value)])
        return lines

    def status_json(self) -> dict:
        s = self.stats
        return {"generation": s.generation, "reloads": s.reloads, "reload_errors": s.reload_errors,
                "last_reload_successful": s.last_reload_ok, "config_hash": s.config_hash,
                "last_error": s.last_error, "problems": s.problems[:50], "time": time.time()}


def _ingress_key(problem: Problem) -> tuple[str, str, str] | None:
    """The labels of pyngress_ingress_problems that count `problem` (None: not an Ingress's)."""
    kind, _, ref = problem.object.partition(" ")
    namespace, _, name = ref.partition("/")
    return (namespace, name, problem.severity.value) if kind == "Ingress" and name else None


def _changed_count(counts: dict[K, int], key: K, change: int) -> int:
    """Add `change` to `counts[key]` (gone at 0); the count before."""
    before = counts.get(key, 0)
    if before + change:
        counts[key] = before + change
    else:
        counts.pop(key, None)
    return before


@functools.cache
def _release() -> str:
    try:
        return metadata.version("pyngress")
    except metadata.PackageNotFoundError:
        return "unknown"


def _process_exit_lines(records: list[dict]) -> list[str]:
    """Restart counts recorded by crashmon (supervisord's event listener)."""
    for record in records:
        if record.get("component") == "crashmon":
            return exposition.family("pyngress_process_exits_total", "Unexpected exits of supervised processes",
                                     "counter", [({"program": name}, count)
                                                 for name, count in sorted(record.get("exits", {}).items())])
    return []


# The passthrough proxy's connection counters (services/proxy/server.py Counters), by what became of them.
_PASSTHROUGH_OUTCOMES = ("passthrough", "terminated", "to_nginx", "malformed", "hello_timeouts", "shed_pending",
                         "no_endpoints", "backend_tls_refused", "unreachable", "idle_closed")


def _passthrough_lines(records: list[dict]) -> list[str]:
    """Connections of each running passthrough proxy process (from its status record, at most a few seconds
    old): open now, and in all by outcome."""
    proxies = [r for r in records
               if str(r.get("component", "")).startswith("proxy-") and component_state.pid_alive(r.get("pid"))]
    if not proxies:
        return []
    return (exposition.family("pyngress_passthrough_active_connections", "Connections spliced now, per proxy process",
                              "gauge", [({"process": r["component"]}, r.get("active", 0)) for r in proxies])
            + exposition.family("pyngress_passthrough_connections_total",
                                "Connections accepted by the passthrough proxy, by where they went or why they were "
                                "closed", "counter",
                                [({"process": r["component"], "outcome": outcome}, r.get(outcome, 0))
                                 for r in proxies for outcome in _PASSTHROUGH_OUTCOMES]))


"""The syncer's metrics, with ingress-nginx's reload metric names so existing dashboards keep working.

prometheus_client renames counters to `*_total`; ingress-nginx's Go client does not, and its users'
alerts say `nginx_ingress_controller_success`. Those few metrics are therefore written by hand in the
exposition format, beside the registry's own.
"""
from __future__ import annotations

import json
import time
import zlib
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Gauge, Histogram, generate_latest

from services.common import status


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
    def __init__(self, controller_class: str, run_dir: str) -> None:
        self.stats = ReloadStats(controller_class)
        self.run_dir = run_dir
        self.registry = CollectorRegistry()
        self.sync_seconds = Histogram(
            "pyngress_sync_duration_seconds", "Time to turn a store change into nginx state, by what it took",
            ["kind"], registry=self.registry, buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30))
        self.objects = Gauge("pyngress_store_objects", "Objects in the syncer's store", registry=self.registry)
        self.rejected = Gauge("pyngress_rejected_objects", "Objects rejected while building the model",
                              registry=self.registry)
        self.generation = Gauge("pyngress_config_generation", "Generation of the applied nginx.conf",
                                registry=self.registry)
        self.endpoint_pushes = Gauge("pyngress_dynamic_pushes", "Pushes of routes/backends/certificates to nginx",
                                     registry=self.registry)

    def exposition(self) -> bytes:
        s = self.stats
        labels = f'controller_class="{s.controller_class}"'
        # The config hash as a number, as ingress-nginx exposes it (it uses a 64-bit hash of the config).
        config_hash = zlib.crc32(s.config_hash.encode()) if s.config_hash else 0
        lines = [
            "# HELP nginx_ingress_controller_success Cumulative number of Ingress controller reload operations",
            "# TYPE nginx_ingress_controller_success counter",
            f"nginx_ingress_controller_success{{{labels}}} {s.reloads}",
            "# HELP nginx_ingress_controller_errors Cumulative number of Ingress controller errors during reload operations",
            "# TYPE nginx_ingress_controller_errors counter",
            f"nginx_ingress_controller_errors{{{labels}}} {s.reload_errors}",
            "# HELP nginx_ingress_controller_config_last_reload_successful Whether the last configuration reload attempt was successful",
            "# TYPE nginx_ingress_controller_config_last_reload_successful gauge",
            f"nginx_ingress_controller_config_last_reload_successful{{{labels}}} {int(s.last_reload_ok)}",
            "# HELP nginx_ingress_controller_config_last_reload_successful_timestamp_seconds Timestamp of the last successful configuration reload.",
            "# TYPE nginx_ingress_controller_config_last_reload_successful_timestamp_seconds gauge",
            f"nginx_ingress_controller_config_last_reload_successful_timestamp_seconds{{{labels}}} {s.last_reload_time}",
            "# HELP nginx_ingress_controller_config_hash Running configuration hash actually running",
            "# TYPE nginx_ingress_controller_config_hash gauge",
            f"nginx_ingress_controller_config_hash{{{labels}}} {config_hash}",
        ]
        lines += _process_exit_lines(self.run_dir)
        return ("\n".join(lines) + "\n").encode() + generate_latest(self.registry)

    def status_json(self) -> dict:
        s = self.stats
        return {"generation": s.generation, "reloads": s.reloads, "reload_errors": s.reload_errors,
                "last_reload_successful": s.last_reload_ok, "config_hash": s.config_hash,
                "last_error": s.last_error, "problems": s.problems[:50], "time": time.time()}


def _process_exit_lines(run_dir: str) -> list[str]:
    """Restart counts recorded by crashmon (supervisord's event listener)."""
    for record in status.read_all(run_dir):
        if record.get("component") == "crashmon":
            exits = record.get("exits", {})
            lines = ["# HELP pyngress_process_exits_total Unexpected exits of supervised processes",
                     "# TYPE pyngress_process_exits_total counter"]
            lines += [f'pyngress_process_exits_total{{program={json.dumps(name)}}} {count}'
                      for name, count in sorted(exits.items())]
            return lines
    return []

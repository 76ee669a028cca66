"""The CNI server's Prometheus metrics, in a registry of its own (not the process-global default)."""
from __future__ import annotations

from prometheus_client import CollectorRegistry, Gauge, Histogram, generate_latest

# ADD takes tens of milliseconds when all goes well; the tail reaches the kubelet's 2-minute timeout.
_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)


class CniMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.request_duration = Histogram(
            "pyngress_cni_request_duration_seconds",
            "Time from receiving a CNI request to answering it, by CNI command and result (success or the CNI "
            "error code).", ["command", "result"], buckets=_BUCKETS, registry=self.registry)
        self.requests_in_flight = Gauge(
            "pyngress_cni_requests_in_flight", "CNI requests received and not yet answered.",
            registry=self.registry)
        self.workers_registered = Gauge(
            "pyngress_cni_workers_registered", "cniworker processes currently registered with the broker.",
            registry=self.registry)

    def render(self) -> bytes:
        return generate_latest(self.registry)

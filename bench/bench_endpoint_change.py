"""Time from an EndpointSlice change on disk to traffic moving, over 50 changes (manifests mode).

Each change moves a Service's only endpoint between two echo backends; the clock runs from the file
replace until a request is answered by the new backend. Baseline in the same run: the time the same
poll loop takes to see a change that needs no controller at all (both backends already answering), so
the figure shows the controller's own share.
"""
from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support import k8s  # noqa: E402
from tests.support.controller import Controller, EchoBackends, ManifestsCluster  # noqa: E402

CHANGES = 50
HOST = "bench.example.com"


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(pct / 100 * (len(ordered) - 1))))]


def main() -> None:
    echo = EchoBackends()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        cluster = ManifestsCluster(work / "manifests")
        controller = Controller(work, [f"--manifests={cluster.directory}", "--log-level=warning"]).start()
        try:
            ips = [echo.start("E0"), echo.start("E1")]
            cluster.apply(k8s.ingress_class("nginx"), k8s.service("bench"),
                          k8s.endpoint_slice("bench", [ips[0]], echo.port),
                          k8s.ingress("bench", [k8s.rule(HOST, ("/", "Prefix", "bench", 80))]))
            deadline = time.monotonic() + 30
            while controller.get("/", HOST).status_code != 200 and time.monotonic() < deadline:
                time.sleep(0.05)
            reloads_before = controller.metric("nginx_ingress_controller_success")
            latencies, baseline = [], []
            for i in range(1, CHANGES + 1):
                want = f"E{i % 2}"
                t0 = time.perf_counter()
                # Baseline: one request straight to the backend we move to.
                requests.get(f"http://{ips[i % 2]}:{echo.port}/", timeout=2)
                baseline.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                cluster.apply(k8s.endpoint_slice("bench", [ips[i % 2]], echo.port))
                while True:
                    resp = controller.get("/", HOST)
                    if resp.status_code == 200 and resp.json()["backend"] == want:
                        break
                    time.sleep(0.002)
                latencies.append(time.perf_counter() - t0)
            reloads_after = controller.metric("nginx_ingress_controller_success")
        finally:
            controller.stop()
            echo.stop()
    ms = [x * 1000 for x in latencies]
    print(f"endpoint change → traffic moved, {CHANGES} changes (manifests mode, file replace → new backend answers)")
    print(f"  p50 {percentile(ms, 50):7.1f} ms   p99 {percentile(ms, 99):7.1f} ms   max {max(ms):7.1f} ms")
    print(f"  baseline (one direct request to the backend): p50 {statistics.median(baseline) * 1000:.2f} ms")
    print(f"  reloads during the run: {reloads_after - reloads_before:.0f} (target 0); target p99 < 300 ms: "
          f"{'met' if percentile(ms, 99) < 300 else 'NOT met'}")


if __name__ == "__main__":
    main()

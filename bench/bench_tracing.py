"""What OpenTelemetry tracing costs: requests per second and p99 latency through one plain Ingress with tracing at
ratio 1.0 and 0.01 (TraceIdRatioBased) against the same Ingress without tracing, same run.

Three controllers (manifests mode, no access log) serve the same Ingress to the same backend (an nginx answering
200 "ok"); they differ only in their ConfigMap. The traced two export to a collector that reads each OTLP/HTTP
export and answers it without decoding (its CPU is not pyngress's). Load: wrk, 2 threads, 32 connections,
keep-alive, in rounds that alternate between them; medians, and the median of same-round ratios against the
untraced one. Also the CPU time per request of nginx and of the tracer process (from /proc, over each round), and
what became of the spans (the tracer's counts on /metrics): on this 2-core machine the tracer at ratio 1.0 competes
with nginx and wrk for the cores, and drops what its bounded queue cannot hold rather than slow nginx.
Run: .venv/bin/python bench/bench_tracing.py [--rounds N] [--seconds S]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_dataplane import HOST, plain_ingress_cluster, start_ok_backend, stop_nginx, wrk  # noqa: E402
from services.nginxconf.paths import NginxPaths  # noqa: E402
from services.nginxconf.tracing import OTLP_HTTP_PORT, SPAN_OUTCOMES  # noqa: E402
from services.syncer.observability.nginx_process_metrics import process_totals  # noqa: E402
from tests.support import k8s  # noqa: E402
from tests.support.controller import Controller  # noqa: E402
from tests.support.net import free_port, wait_for  # noqa: E402

COLLECTOR_HOST = "127.0.88.8"
VARIANTS = {"untraced": {}, "ratio 1.0": {"otel-sampler-ratio": "1.0"}, "ratio 0.01": {"otel-sampler-ratio": "0.01"}}


class DiscardingCollector(BaseHTTPRequestHandler):
    """OTLP/HTTP that reads each export and answers it (an empty ExportTraceServiceResponse is no bytes)."""
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:  # noqa: N802 - the base class's name
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        pass


def configmap(name: str, sampling: dict[str, str]) -> dict:
    data = {"disable-access-log": "true"}
    if sampling:
        data.update({"enable-opentelemetry": "true", "otlp-collector-host": COLLECTOR_HOST,
                     "otlp-collector-port": str(OTLP_HTTP_PORT), "otel-sampler": "TraceIdRatioBased", **sampling})
    return k8s.config_map(name, data, namespace="ingress")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=int, default=5)
    args = parser.parse_args()
    collector = ThreadingHTTPServer((COLLECTOR_HOST, OTLP_HTTP_PORT), DiscardingCollector)
    threading.Thread(target=collector.serve_forever, daemon=True).start()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        os.chmod(work, 0o755)
        backend_port = free_port()
        backend = start_ok_backend(work / "backend", backend_port)
        cluster = plain_ingress_cluster(work / "manifests", backend_port)
        controllers: dict[str, Controller] = {}
        try:
            for i, (name, sampling) in enumerate(VARIANTS.items()):
                cluster.apply(configmap(f"variant{i}", sampling))
                (work / f"variant{i}").mkdir()
                controllers[name] = Controller(work / f"variant{i}", [
                    f"--manifests={cluster.directory}", "--log-level=warning", f"--configmap=ingress/variant{i}"]).start()
            for name, controller in controllers.items():
                wait_for(lambda: controller.get("/", HOST).status_code == 200, 30, what="the Ingress served")
                if VARIANTS[name]:
                    wait_for(lambda: b"pyngress_spans" in controller.nginx_conf(), 30, what="tracing applied")
                wrk(f"http://127.0.0.1:{controller.http_port}/", 1)  # warm: Lua code cache, upstream keepalive
            runs: dict[str, list[tuple[float, float]]] = {name: [] for name in controllers}
            nginx_cpu: dict[str, list[float]] = {name: [] for name in controllers}  # µs per request
            tracer_cpu: dict[str, list[float]] = {name: [] for name in controllers}
            for _ in range(args.rounds):
                for name, controller in controllers.items():
                    pid_file = NginxPaths.of(controller.state_dir, controller.run_dir).pid_file
                    tracer = controller.pid("tracer")
                    before, tracer_before = process_totals(pid_file).cpu_seconds, cpu_seconds(tracer)
                    runs[name].append(wrk(f"http://127.0.0.1:{controller.http_port}/", args.seconds))
                    requests = runs[name][-1][0] * args.seconds
                    nginx_cpu[name].append((process_totals(pid_file).cpu_seconds - before) / requests * 1e6)
                    tracer_cpu[name].append((cpu_seconds(tracer) - tracer_before) / requests * 1e6)
                    time.sleep(1)  # the tracer catches up before the next variant's round
            time.sleep(3)
            outcomes = {name: {o: controller.metric("pyngress_tracing_spans_total", outcome=o) for o in SPAN_OUTCOMES}
                        for name, controller in controllers.items() if VARIANTS[name]}
        finally:
            for controller in controllers.values():
                controller.stop()
            stop_nginx(backend)
            collector.shutdown()
    print(f"one plain Ingress, wrk -t2 -c32, {args.rounds} rounds of {args.seconds} s; OTLP/HTTP to a local collector")
    print(f"{'':12} {'req/s (median)':>15} {'p99 (median)':>13} {'req/s vs off':>13} {'p99 vs off':>11} "
          f"{'nginx CPU us/req':>17} {'tracer CPU us/req':>18}")
    for name in VARIANTS:
        rate = statistics.median(o[0] / b[0] for o, b in zip(runs[name], runs["untraced"]))
        p99 = statistics.median(o[1] / b[1] for o, b in zip(runs[name], runs["untraced"]))
        print(f"{name:12} {statistics.median(r for r, _ in runs[name]):>15.0f} "
              f"{statistics.median(p for _, p in runs[name]) * 1000:>11.2f}ms {rate:>12.3f}x {p99:>10.3f}x "
              f"{statistics.median(nginx_cpu[name]):>17.2f} {statistics.median(tracer_cpu[name]):>18.2f}")
    for name, counts in outcomes.items():
        print(f"spans at {name}: " + ", ".join(f"{o} {int(n)}" for o, n in counts.items()))


if __name__ == "__main__":
    main()

"""What per-request metrics and the access log cost: requests per second and p99 latency through one plain
Ingress with --enable-metrics on and off, and with the access log (ingress-nginx's default, to stdout through
supervisord) on and off, same run.

Three controllers (manifests mode) serve the same Ingress to the same backend (an nginx answering 200 "ok"):
"metrics" (the defaults but the access log: metrics on), "bare" (--enable-metrics=false, no access log) and
"logged" (the defaults: metrics and access log on). Load: wrk, 2 threads, 32 connections, keep-alive, in rounds
that alternate between them; medians, and the median of same-round ratios against "bare". Throughput on this
shared machine moves with whatever else runs; nginx's CPU time per request (its master and workers, from
/proc, over each round) moves far less, and is the figure to compare.
Run: .venv/bin/python bench/bench_metrics_cost.py [--rounds N] [--seconds S]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_dataplane import HOST, plain_ingress_cluster, start_ok_backend, stop_nginx, wrk  # noqa: E402
from services.nginxconf.paths import NginxPaths  # noqa: E402
from services.syncer.observability.nginx_process_metrics import process_totals  # noqa: E402
from tests.support.controller import Controller  # noqa: E402
from tests.support.net import free_port, wait_for  # noqa: E402

VARIANTS = {"metrics": ["--configmap=ingress/quiet"], "bare": ["--configmap=ingress/quiet", "--enable-metrics=false"],
            "logged": []}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        os.chmod(work, 0o755)
        backend_port = free_port()
        backend = start_ok_backend(work / "backend", backend_port)
        cluster = plain_ingress_cluster(work / "manifests", backend_port)
        controllers = {}
        try:
            for name, flags in VARIANTS.items():
                (work / name).mkdir()
                controllers[name] = Controller(work / name, [f"--manifests={cluster.directory}",
                                                             "--log-level=warning", *flags]).start()
            for controller in controllers.values():
                wait_for(lambda: controller.get("/", HOST).status_code == 200, 30, what="the Ingress served")
                wrk(f"http://127.0.0.1:{controller.http_port}/", 1)  # warm: Lua code cache, upstream keepalive connections
            runs: dict[str, list[tuple[float, float]]] = {name: [] for name in controllers}
            cpu: dict[str, list[float]] = {name: [] for name in controllers}  # µs of nginx CPU per request
            for _ in range(args.rounds):
                for name, controller in controllers.items():
                    pid_file = NginxPaths.of(controller.state_dir, controller.run_dir).pid_file
                    before = process_totals(pid_file).cpu_seconds
                    runs[name].append(wrk(f"http://127.0.0.1:{controller.http_port}/", args.seconds))
                    used = process_totals(pid_file).cpu_seconds - before
                    cpu[name].append(used / (runs[name][-1][0] * args.seconds) * 1e6)
                time.sleep(0.5)
        finally:
            for controller in controllers.values():
                controller.stop()
            stop_nginx(backend)
    print(f"one plain Ingress, wrk -t2 -c32, {args.rounds} rounds of {args.seconds} s")
    print(f"{'':28} {'req/s (median)':>15} {'p99 (median)':>13} {'req/s vs bare':>14} {'p99 vs bare':>12} "
          f"{'CPU us/req':>11} {'CPU vs bare':>12}")
    labels = {"bare": "no metrics, no access log", "metrics": "metrics, no access log",
              "logged": "metrics and access log"}
    for name in ("bare", "metrics", "logged"):
        rate = statistics.median(o[0] / b[0] for o, b in zip(runs[name], runs["bare"]))
        p99 = statistics.median(o[1] / b[1] for o, b in zip(runs[name], runs["bare"]))
        cost = statistics.median(o / b for o, b in zip(cpu[name], cpu["bare"]))
        print(f"{labels[name]:28} {statistics.median(r for r, _ in runs[name]):>15.0f} "
              f"{statistics.median(p for _, p in runs[name]) * 1000:>11.2f}ms {rate:>13.3f}x {p99:>11.3f}x "
              f"{statistics.median(cpu[name]):>11.2f} {cost:>11.3f}x")
    print("target: metrics cost <= 5% (req/s >= 0.95x bare, CPU per request <= 1.05x bare)")


if __name__ == "__main__":
    main()

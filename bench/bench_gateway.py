"""Gateway API: an HTTPRoute with weights and header matches beside a plain Ingress (same nginx, same run), and
route created → served with 1,000 and 10,000 HTTPRoutes in place.

Data plane: the model (services/syncer/model) builds the tables of a plain Ingress host (plain.bench) and an
HTTPRoute host (gw.bench: a rule on "/" with two header matches, X-Version and X-Tenant, to two backends weighted
90/10; a rule without conditions after it), both to the same plain nginx answering `return 200`; they are pushed
to pyngress's nginx (2 workers). wrk (keep-alive, -t1 -c64, --latency, with both headers, which the Ingress ignores)
alternates between the hosts in rounds: medians with the spread, p99, and the ratios as the median of same-round
ratios (the machine is shared: only same-run ratios mean anything).

Route created → served: a controller in manifests mode with one Gateway and N HTTPRoutes (each its own host, 100 per
file), all served; then 20 new HTTPRoutes, one file each, written one after another; the clock of each runs from
its file's rename into place to the first 200 for its host (polled every 5 ms). In the same controller, 20 new
Ingresses the same way: the baseline.
Run: .venv/bin/python bench/bench_gateway.py [--rounds 5] [--seconds 4] [--sizes 1000,10000] [--skip-dataplane]
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_ingress_scale import wait_served  # noqa: E402
from bench.bench_ratelimit import spread, start_backend  # noqa: E402
from tests.integration.nginx.conftest import Nginx  # noqa: E402
from tests.support import gateway_objects as gw  # noqa: E402
from tests.support import k8s  # noqa: E402
from tests.support.controller import Controller, EchoBackends, ManifestsCluster  # noqa: E402
from tests.support.model_cluster import Cluster  # noqa: E402
from tests.support.net import wait_for  # noqa: E402

HEADERS = {"X-Version": "2", "X-Tenant": "bench"}
PER_FILE = 100
NEW = 20
PARENT = {"name": "bench", "namespace": "default"}


def bench_route(name: str, host: str, service: str, *, weighted: str | None = None) -> dict:
    """An HTTPRoute for `host`: "/" with the two header matches to `service` (90) and `weighted` (10), then "/"."""
    backends = [gw.backend_ref(service, weight=90), gw.backend_ref(weighted, weight=10)] if weighted else \
        [gw.backend_ref(service)]
    return gw.http_route(name, parents=[PARENT], hostnames=[host], rules=[
        gw.rule(*backends, matches=[gw.path_match("/", headers=HEADERS)]),
        gw.rule(gw.backend_ref(service), matches=[gw.path_match("/")])])


def wrk(port: int, host: str, seconds: int) -> tuple[float, float]:
    """Requests/s and p99 in ms."""
    command = ["wrk", "-t1", "-c64", f"-d{seconds}s", "--latency", "-H", f"Host: {host}"]
    for name, value in HEADERS.items():
        command += ["-H", f"{name}: {value}"]
    out = subprocess.run([*command, f"http://127.0.0.1:{port}/"], capture_output=True, text=True, check=True).stdout
    if "Non-2xx" in out:
        raise RuntimeError(f"{host} answered errors under load:\n{out}")
    rate = float(re.search(r"Requests/sec:\s+([0-9.]+)", out).group(1))
    value, unit = re.search(r"\s99%\s+([0-9.]+)(us|ms|s)", out).groups()
    return rate, float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]


def data_plane(rounds: int, seconds: int) -> dict[str, list[tuple[float, float]]]:
    if not shutil.which("wrk"):
        sys.exit("wrk is not installed (apt-get install wrk)")
    base = Path(tempfile.mkdtemp(prefix="bench-gateway-", dir="/tmp"))
    os.chmod(base, 0o711)
    backend, backend_port = start_backend(base)
    (base / "pyngress").mkdir(mode=0o711)
    nginx = Nginx(base / "pyngress")
    cluster = Cluster()
    cluster.ingress_class()
    cluster.add(gw.gateway_class())
    cluster.add(gw.gateway("bench", listeners=[gw.listener("http", namespaces={"from": "All"})]))
    for service in ("app", "app-b"):
        cluster.service(service)
        cluster.endpoint_slice(service, addresses=("127.0.0.1",), port=backend_port)
    cluster.ingress("plain", host="plain.bench", paths=(("/", "Prefix", "app", 80),))
    cluster.add(bench_route("weighted", "gw.bench", "app", weighted="app-b"))
    model = cluster.build()
    assert model.routes["plain.bench"].prefix and model.routes["gw.bench"].gateway, model.problems
    try:
        nginx.start()
        assert nginx.apply(nginx.config(list(model.config.profiles)))
        nginx.push(model.routes, model.backends)
        for host in ("plain.bench", "gw.bench"):
            wait_for(lambda: nginx.get("/", host=host).status == 200, 10, what=f"{host} served")
        results: dict[str, list[tuple[float, float]]] = {"plain.bench": [], "gw.bench": []}
        for _ in range(rounds):
            for host in results:
                results[host].append(wrk(nginx.http_port, host, seconds))
                time.sleep(0.5)
        return results
    finally:
        nginx.close()
        backend.send_signal(signal.SIGQUIT)
        backend.wait(timeout=10)
        shutil.rmtree(base, ignore_errors=True)


def place(cluster: ManifestsCluster, name: str, docs: list[dict]) -> None:
    """Write the file hidden (the watcher skips dot files), then rename it into place at once."""
    hidden = cluster.directory / f".{name}"
    hidden.write_text(yaml.safe_dump_all(docs))
    os.replace(hidden, cluster.directory / name)


def first_200(port: int, host: str, started: float, deadline: float) -> float:
    session = requests.Session()
    while time.monotonic() < deadline:
        try:
            if session.get(f"http://127.0.0.1:{port}/", headers={"Host": host}, timeout=5).status_code == 200:
                return time.monotonic() - started
        except requests.RequestException:
            pass
        time.sleep(0.005)
    raise SystemExit(f"{host} not served before the deadline")


def created_to_served(n: int, echo: EchoBackends, ip: str) -> tuple[list[float], list[float], float, float]:
    """Seconds from file in place to served, for 20 new HTTPRoutes and 20 new Ingresses beside N HTTPRoutes; the
    time to serve the N, and the reloads the 40 new objects caused."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        cluster = ManifestsCluster(work / "manifests")
        cluster.apply(k8s.ingress_class("nginx"), gw.gateway_class(),
                      gw.gateway("bench", listeners=[gw.listener("http", namespaces={"from": "All"})]),
                      k8s.service("app"), k8s.endpoint_slice("app", [ip], echo.port))
        controller = Controller(work, [f"--manifests={cluster.directory}", "--log-level=warning"]).start()
        try:
            t0 = time.monotonic()
            for start in range(0, n, PER_FILE):
                place(cluster, f"routes-{start}.yaml", [bench_route(f"r{i}", f"r{i}.gw.bench", "app")
                                                        for i in range(start, min(n, start + PER_FILE))])
            wait_served(controller.http_port, [f"r{n - 1}.gw.bench", "r0.gw.bench"], time.monotonic() + 900)
            full = time.monotonic() - t0
            reloads = controller.metric("nginx_ingress_controller_success")
            routes, ingresses = [], []
            for i in range(NEW):
                host = f"new{i}.gw.bench"
                place(cluster, f"new-route-{i}.yaml", [bench_route(f"new{i}", host, "app")])
                routes.append(first_200(controller.http_port, host, time.monotonic(), time.monotonic() + 120))
                host = f"new{i}.ingress.bench"
                place(cluster, f"new-ingress-{i}.yaml", [k8s.ingress(f"new{i}", [k8s.rule(host, ("/", "Prefix",
                                                                                               "app", 80))])])
                ingresses.append(first_200(controller.http_port, host, time.monotonic(), time.monotonic() + 120))
            reloads = controller.metric("nginx_ingress_controller_success") - reloads
        finally:
            controller.stop()
    return routes, ingresses, full, reloads


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=int, default=4)
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--skip-dataplane", action="store_true")
    args = parser.parse_args()
    if not args.skip_dataplane:
        results = data_plane(args.rounds, args.seconds)
        plain, routed = results["plain.bench"], results["gw.bench"]
        print(f"## HTTPRoute (2 header matches, weights 90/10) vs plain Ingress, wrk -t1 -c64 keep-alive, "
              f"{args.seconds} s, {args.rounds} rounds alternated")
        for label, runs in (("plain Ingress", plain), ("HTTPRoute", routed)):
            print(f"{label:14} {spread([r for r, _ in runs])}, p99 median {statistics.median(p for _, p in runs):.2f} ms"
                  f" ({min(p for _, p in runs):.2f}-{max(p for _, p in runs):.2f})")
        print(f"ratio req/s HTTPRoute/Ingress: {statistics.median(g[0] / p[0] for g, p in zip(routed, plain)):.3f}; "
              f"p99: {statistics.median(g[1] / p[1] for g, p in zip(routed, plain)):.3f}")
    echo = EchoBackends()
    ip = echo.start("GATEWAY")
    try:
        for n in (int(s) for s in args.sizes.split(",")):
            routes, ingresses, full, reloads = created_to_served(n, echo, ip)
            print(f"## {n} HTTPRoutes in place (served {full:.1f} s after their files landed): {NEW} new ones, "
                  f"file in place → served")
            print(f"new HTTPRoute: p50 {percentile(routes, 0.5) * 1000:.0f} ms, p99 {percentile(routes, 0.99) * 1000:.0f}"
                  f" ms; new Ingress (same controller): p50 {percentile(ingresses, 0.5) * 1000:.0f} ms, p99 "
                  f"{percentile(ingresses, 0.99) * 1000:.0f} ms; reloads {reloads:.0f}")
    finally:
        echo.stop()


if __name__ == "__main__":
    main()

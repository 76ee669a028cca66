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

Instructions (--instructions, needs valgrind): the same two hosts in a controller's rendered nginx.conf run as one
process under callgrind (bench_request_cost.py), per request after a warm-up: all user-space instructions, and the
router's (rewrite_by_lua until its jump to the profile's location).
Run: .venv/bin/python bench/bench_gateway.py [--rounds 5] [--seconds 4] [--sizes 1000,10000] [--skip-dataplane]
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_dataplane import start_ok_backend, stop_nginx  # noqa: E402
from bench.bench_ingress_scale import wait_served  # noqa: E402
from bench.bench_ratelimit import alternate_hosts, spread  # noqa: E402
from bench.bench_request_cost import count_instructions, inclusive, total  # noqa: E402
from tests.support import gateway_objects as gw  # noqa: E402
from tests.support import k8s  # noqa: E402
from tests.support.controller import Controller, EchoBackends, ManifestsCluster  # noqa: E402
from tests.support.model_cluster import Cluster  # noqa: E402
from tests.support.net import free_port  # noqa: E402

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
    """Host → (req/s, p99 ms) of each round, through the model's tables for both hosts."""
    cluster = Cluster()
    cluster.ingress_class()
    cluster.add(gw.gateway_class())
    cluster.add(gw.gateway("bench", listeners=[gw.listener("http", namespaces={"from": "All"})]))
    for service in ("app", "app-b"):
        cluster.service(service)
        cluster.endpoint_slice(service)  # alternate_hosts pushes its own endpoints for these backends
    cluster.ingress("plain", host="plain.bench", paths=(("/", "Prefix", "app", 80),))
    cluster.add(bench_route("weighted", "gw.bench", "app", weighted="app-b"))
    model = cluster.build()
    assert model.routes["plain.bench"].prefix and model.routes["gw.bench"].gateway, model.problems
    return alternate_hosts({host: model.routes[host] for host in ("plain.bench", "gw.bench")},
                           {name: 1 for name in model.backends}, profiles=list(model.config.profiles),
                           rounds=rounds, seconds=seconds, measure=wrk)


def instructions(warm: int, count: int) -> dict[str, tuple[float, float]]:
    """Host → instructions per request: nginx's in all, and the router's."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        os.chmod(work, 0o755)
        backend_port = free_port()
        backend = start_ok_backend(work / "backend", backend_port)
        cluster = ManifestsCluster(work / "manifests")
        cluster.apply(k8s.ingress_class("nginx"), gw.gateway_class(),
                      gw.gateway("bench", listeners=[gw.listener("http", namespaces={"from": "All"})]),
                      *(item for service in ("app", "app-b") for item in (
                          k8s.service(service), k8s.endpoint_slice(service, ["127.0.0.1"], backend_port))),
                      k8s.ingress("plain", [k8s.rule("plain.bench", ("/", "Prefix", "app", 80))]),
                      bench_route("weighted", "gw.bench", "app", weighted="app-b"))
        (work / "pyngress").mkdir()
        controller = Controller(work / "pyngress", [f"--manifests={cluster.directory}", "--log-level=warning"])
        try:
            controller.start()
            wait_served(controller.http_port, ["plain.bench", "gw.bench"], time.monotonic() + 60)
            conf = controller.nginx_conf().decode()
            headers = "".join(f"{name}: {value}\r\n" for name, value in HEADERS.items())
            profiles = {host: count_instructions(host, conf, work, warm, count, False, host, headers)
                        for host in ("plain.bench", "gw.bench")}
        finally:
            controller.stop()
            stop_nginx(backend)
        return {host: (total(profile) / count, inclusive(profile).get("ngx_http_lua_rewrite_handler", 0) / count)
                for host, profile in profiles.items()}


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
    parser.add_argument("--instructions", action="store_true", help="only the callgrind counts")
    args = parser.parse_args()
    if args.instructions:
        counted = instructions(warm=4000, count=3000)
        for host, (all_of_nginx, router) in counted.items():
            print(f"{host}: {all_of_nginx:,.0f} instructions per request, of which the router {router:,.0f}")
        (plain, plain_router), (routed, routed_router) = counted["plain.bench"], counted["gw.bench"]
        print(f"HTTPRoute - Ingress: {routed - plain:+,.0f} in all, {routed_router - plain_router:+,.0f} in the router")
        return
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
        for n in (int(s) for s in args.sizes.split(",") if s):
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

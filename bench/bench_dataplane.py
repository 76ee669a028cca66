"""Requests per second and p99 latency through one plain Ingress, beside a static nginx `proxy_pass`
configuration for the same host and backend, same run; and beside the same static nginx sending the headers
ingress-nginx sends every backend (what is left is the cost of routing in Lua and of the metrics).

Backend: an nginx answering 200 "ok" on loopback (one worker). Static baseline: nginx with the same
worker count as pyngress's (`worker_processes auto`), one `server` for the host, `proxy_pass` to an
upstream with `keepalive 32`, HTTP/1.1 upstream with an empty Connection header, no Lua module, no access
log. pyngress: a running controller (manifests mode) with one Ingress for the host, its access log off as the
baseline's (ConfigMap disable-access-log; bench_metrics_cost.py measures what the log and the metrics cost). Load: wrk, 2 threads, 32
connections, keep-alive, in rounds that alternate between the servers (a new order each round) so that load
from elsewhere on the machine spreads over all; medians, and the median of same-round ratios.
--scenario tls: the same over HTTPS (the Ingress has a TLS section and its Secret; the static servers the same
certificate and ingress-nginx's TLS settings, STATIC_TLS; wrk keeps its 32 connections, so this is the cost per
request of TLS records, plus pyngress's per-request work for a TLS host such as the HSTS header; wrk sends no
SNI, so both serve their default certificate, the Ingress's one for the static servers). --scenario routes: one
host with 1,000 Prefix paths (/r0/ ... /r999/; the static servers have a location for each), wrk asks for a path
under the last one.
--scenario h2: the TLS scenario over HTTP/2 (the static servers listen with `http2` too), loaded by h2load
(2 threads, 32 connections, 10 streams each); h2load gives no percentiles, so the latency shown is its mean.
--scenario websocket: the backend is a WebSocket echo server (bench/websocket_echo.py, Python, one process),
the load 2 client processes x 16 upgraded connections each sending a 64-byte text frame and waiting for its echo:
round trips per second and their p99. Both static servers pass the upgrade on (Upgrade and Connection headers).
Each round also measures the CPU time (user + system, from /proc) each server's nginx workers spent per request: on a
machine shared with other work, throughput moves with the load, CPU time per request much less.
Run: .venv/bin/python bench/bench_dataplane.py [--rounds N] [--seconds S]
     [--scenario plain|tls|routes|h2|websocket] [--controller-arg FLAG ...]
"""
from __future__ import annotations

import argparse
import base64
from concurrent.futures import ProcessPoolExecutor
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support import k8s  # noqa: E402
from tests.support.controller import Controller, ManifestsCluster  # noqa: E402
from tests.integration.proxy.harness import Pki  # noqa: E402
from tests.support.net import free_port, wait_for  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import websocket_echo  # noqa: E402

HOST = "bench.dataplane.test"
NO_ACCESS_LOG = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "quiet", "namespace": "ingress"},
                 "data": {"disable-access-log": "true"}}
_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0}
ROUTES = 1000
DESCRIPTIONS = {"plain": "one plain Ingress", "tls": "one TLS Ingress (HTTPS, keep-alive)",
                "routes": f"one host with {ROUTES} Prefix paths (the last one asked)",
                "h2": "one TLS Ingress over HTTP/2 (h2load -t2 -c32 -m10)",
                "websocket": "one Ingress to a WebSocket echo backend (2 x 16 connections, 64-byte round trips)"}
WEBSOCKET_CLIENTS, WEBSOCKET_CONNECTIONS = 2, 16
H2_REQUESTS = 30000  # per h2load run: under 1,000 per connection, nginx's keepalive_requests


def start_nginx(directory: Path, *, workers: str, body: str) -> subprocess.Popen:
    directory.mkdir(parents=True, exist_ok=True)
    os.chmod(directory, 0o755)
    temp = "".join(f"{kind}_temp_path {directory}/{kind};\n" for kind in ("client_body", "proxy", "fastcgi",
                                                                            "uwsgi", "scgi"))
    conf = directory / "nginx.conf"
    conf.write_text(f"daemon off; worker_processes {workers}; pid {directory}/nginx.pid; "
                    f"error_log {directory}/error.log error;\n"
                    f"events {{ worker_connections 16384; multi_accept on; }}\n"
                    f"http {{ access_log off; {temp} {body} }}\n")
    # A session of its own, as the controller has (tests/support/controller.py): with the kernel's autogroup
    # scheduling (sched_autogroup_enabled) each session gets an equal share of the CPUs, so a server left in the
    # benchmark's session would share one with wrk while pyngress had one to itself.
    return subprocess.Popen(["nginx", "-p", str(directory), "-c", str(conf)], start_new_session=True)


def start_ok_backend(directory: Path, port: int) -> subprocess.Popen:
    """The benchmarks' backend: one nginx worker answering 200 "ok"."""
    return start_nginx(directory, workers="1", body=(
        f'server {{ listen 127.0.0.1:{port} backlog=4096; keepalive_requests 100000; '
        f'location / {{ return 200 "ok"; }} }}'))


def scenario_cluster(directory: Path, backend_port: int, scenario: "Scenario") -> ManifestsCluster:
    """A manifests directory with the scenario's Ingress for HOST to the backend, and the quiet ConfigMap."""
    cluster = ManifestsCluster(directory)
    cluster.apply(*scenario.manifests(backend_port))
    return cluster


def plain_ingress_cluster(directory: Path, backend_port: int) -> ManifestsCluster:
    """A manifests directory with one plain Ingress for HOST to the backend, and the quiet ConfigMap."""
    return scenario_cluster(directory, backend_port, Scenario("plain", directory))


# The static baseline's headers: the Host, and an empty Connection header for upstream keepalive.
PLAIN_HEADERS = {"Host": "$host", "Connection": '""'}
# The least that passes a WebSocket upgrade on.
UPGRADE_HEADERS = {"Host": "$host", "Upgrade": "$http_upgrade", "Connection": "$bench_connection"}
# What ingress-nginx (and pyngress) sends every backend (its nginx.tmpl, v1.15.1, for a location without
# annotations): the request id (the client's, else a new one), X-Real-IP, the X-Forwarded-* headers with
# X-Forwarded-Scheme, X-Scheme, the client's own X-Forwarded-For and -Host as X-Original-Forwarded-*, the websocket
# upgrade and an empty Proxy header. What pyngress costs beyond a static nginx sending these is its routing in Lua
# and its metrics.
FORWARDED_HEADERS = {"Host": "$host", "X-Request-ID": "$bench_request_id", "X-Real-IP": "$remote_addr",
                     "X-Forwarded-For": "$remote_addr", "X-Forwarded-Host": "$host",
                     "X-Forwarded-Port": "$server_port", "X-Forwarded-Proto": "$scheme",
                     "X-Forwarded-Scheme": "$scheme", "X-Scheme": "$scheme",
                     "X-Original-Forwarded-For": "$http_x_forwarded_for",
                     "X-Original-Forwarded-Host": "$http_x_forwarded_host",
                     "Upgrade": "$http_upgrade", "Connection": "$bench_connection", "Proxy": '""'}


# ingress-nginx's TLS defaults (its ConfigMap's ssl-protocols, ssl-ciphers, ssl-buffer-size, ssl-session-cache and
# ssl-session-tickets), which pyngress renders too. The protocols matter: nginx 1.22 offers no TLSv1.3 by default,
# and a baseline left on TLSv1.2 runs about 3,300 fewer instructions per request than one offering TLSv1.3, as
# pyngress must (OpenSSL 3.0's TLSv1.3 records cost more, in wrk too). The rest costs nothing measurable per
# request.
STATIC_TLS = ("ssl_protocols TLSv1.2 TLSv1.3; ssl_prefer_server_ciphers on; ssl_ciphers "
              "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"
              "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305:"
              "DHE-RSA-AES128-GCM-SHA256:DHE-RSA-AES256-GCM-SHA384; ssl_buffer_size 4k; "
              "ssl_session_cache shared:SSL:10m; ssl_session_timeout 10m; ssl_session_tickets off")


def static_proxy(port: int, backend_port: int, headers: dict[str, str], scenario: "Scenario") -> str:
    """A static nginx `http` body: one server for HOST proxying the scenario's paths to the backend (keepalive 32),
    sending `headers`, over TLS (STATIC_TLS) when the scenario has a certificate."""
    listen = f"listen 127.0.0.1:{port} backlog=4096"
    if scenario.certificate:
        crt, key = scenario.certificate
        listen += (f" ssl{' http2' if scenario.http2 else ''}; ssl_certificate {crt}; ssl_certificate_key {key}; "
                   f"{STATIC_TLS}")
    return (f'map $http_x_request_id $bench_request_id {{ default $http_x_request_id; "" $request_id; }} '
            f'map $http_upgrade $bench_connection {{ default upgrade; "" ""; }} '
            f"upstream backend {{ server 127.0.0.1:{backend_port}; keepalive 32; }} "
            f"server {{ {listen}; server_name {HOST}; proxy_http_version 1.1; "
            + "".join(f"proxy_set_header {name} {value}; " for name, value in headers.items())
            + "".join(f"location {path} {{ proxy_pass http://backend; }} " for path in scenario.paths)
            + "}")


class Scenario:
    """What the Ingress and the static servers route: `plain` (one Ingress, "/"), `tls` (the same over HTTPS, a
    certificate for HOST from a Secret), `routes` (one host with ROUTES Prefix paths; wrk asks for the last),
    `h2` (`tls` over HTTP/2, h2load), `websocket` (`plain` to a WebSocket echo backend)."""

    def __init__(self, name: str, work: Path) -> None:
        self.name = name
        self.certificate: tuple[Path, Path] | None = None
        self.paths = [f"/r{i}/" for i in range(ROUTES)] if name == "routes" else ["/"]
        self.request_path = f"/r{ROUTES - 1}/x" if name == "routes" else "/"
        self.http2 = name == "h2"
        self.websocket = name == "websocket"
        self.plain_headers = UPGRADE_HEADERS if self.websocket else PLAIN_HEADERS
        if name in ("tls", "h2"):
            (work / "pki").mkdir()
            self.certificate = Pki(work / "pki").issue("dataplane", [HOST])

    def manifests(self, backend_port: int) -> list[dict]:
        ingress = k8s.ingress("web", [k8s.rule(HOST, *((path, "Prefix", "web", 80) for path in self.paths))])
        objects = [k8s.ingress_class("nginx"), NO_ACCESS_LOG, k8s.service("web"),
                   k8s.endpoint_slice("web", ["127.0.0.1"], backend_port), ingress]
        if self.certificate:
            crt, key = self.certificate
            ingress["spec"]["tls"] = [{"hosts": [HOST], "secretName": "web-tls"}]
            objects.append({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                            "metadata": {"name": "web-tls", "namespace": "default"},
                            "data": {"tls.crt": base64.b64encode(crt.read_bytes()).decode(),
                                     "tls.key": base64.b64encode(key.read_bytes()).decode()}})
        return objects

    def url(self, port: int) -> str:
        return f"{'https' if self.certificate else 'http'}://127.0.0.1:{port}{self.request_path}"


def stop_nginx(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGQUIT)
    process.wait(30)


def workers_cpu_seconds(master: int) -> float:
    """The CPU time (user + system) the worker processes of the nginx master `master` have used so far."""
    total = 0
    for worker in Path(f"/proc/{master}/task/{master}/children").read_text().split():
        fields = Path(f"/proc/{worker}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime (stat's 14th and 15th fields), in clock ticks
    return total / os.sysconf("SC_CLK_TCK")


def wrk(url: str, seconds: float, headers: dict[str, str] | None = None) -> tuple[float, float]:
    """(requests per second, p99 latency in seconds); `headers` replace the Host header of HOST."""
    sent = [arg for name, value in (headers or {"Host": HOST}).items() for arg in ("-H", f"{name}: {value}")]
    out = subprocess.run(["wrk", "-t2", "-c32", f"-d{max(1, round(seconds))}s", "--latency", *sent,
                          url], capture_output=True, text=True, check=True).stdout
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out)[1])
    value, unit = re.search(r"99%\s+([\d.]+)(us|ms|s)", out).groups()
    if "Non-2xx" in out:
        raise SystemExit(f"non-2xx answers during the load:\n{out}")
    return rate, float(value) * _UNITS[unit]


def h2load(url: str, seconds: float) -> tuple[float, float]:
    """(requests per second, mean latency in seconds) over HTTP/2: 2 threads, 32 connections, 10 streams each, a
    number of requests rather than a duration. nginx closes an HTTP/2 connection after keepalive_requests (1000
    here) and h2load's timed mode does not open another, so a timed run measures the time to that cap; each
    connection takes fewer than 1000 of H2_REQUESTS, repeated for about `seconds`."""
    rates, means = [], []
    deadline = time.monotonic() + seconds
    while not rates or time.monotonic() < deadline:
        out = subprocess.run(["h2load", "-t2", "-c32", "-m10", "-n", str(H2_REQUESTS), "-H", f":authority: {HOST}",
                              url], capture_output=True, text=True, check=True).stdout
        if re.search(rf"{H2_REQUESTS} succeeded, 0 failed", out) is None or \
                re.search(r"status codes: \d+ 2xx, 0 3xx, 0 4xx, 0 5xx", out) is None:
            raise SystemExit(f"failed or non-2xx answers during the load:\n{out}")
        rates.append(float(re.search(r"finished in [\d.]+\w+, ([\d.]+) req/s", out)[1]))
        value, unit = re.search(r"time for request:\s+\S+\s+\S+\s+([\d.]+)(us|ms|s)", out).groups()
        means.append(float(value) * _UNITS[unit])
    return statistics.mean(rates), statistics.mean(means)


def websocket_round_trips(pool: ProcessPoolExecutor, port: int, seconds: float) -> tuple[float, float]:
    """(echo round trips per second, their p99 in seconds) through `port`."""
    start = time.perf_counter()
    futures = [pool.submit(websocket_echo.round_trips, port, HOST, seconds, WEBSOCKET_CONNECTIONS)
               for _ in range(WEBSOCKET_CLIENTS)]
    results = [f.result() for f in futures]
    elapsed = time.perf_counter() - start
    latencies = sorted(x for _, each in results for x in each)
    return sum(n for n, _ in results) / elapsed, latencies[int(len(latencies) * 0.99)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--scenario", choices=tuple(DESCRIPTIONS), default="plain",
                        help=f"plain: one Ingress; tls: the same over HTTPS; routes: one host with {ROUTES} paths; "
                        "h2: tls over HTTP/2; websocket: echo round trips")
    parser.add_argument("--controller-arg", action="append", default=[],
                        help="one more flag for the controller, written --controller-arg=--enable-metrics=false (repeatable)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        os.chmod(work, 0o755)
        scenario = Scenario(args.scenario, work)
        backend_port, static_port, headers_port = free_port(), free_port(), free_port()
        if scenario.websocket:
            backend = subprocess.Popen([sys.executable, websocket_echo.__file__, str(backend_port)],
                                       start_new_session=True)
        else:
            backend = start_ok_backend(work / "backend", backend_port)
        static = start_nginx(work / "static", workers="auto",
                             body=static_proxy(static_port, backend_port, scenario.plain_headers, scenario))
        static_headers = start_nginx(work / "static-headers", workers="auto",
                                     body=static_proxy(headers_port, backend_port, FORWARDED_HEADERS, scenario))
        cluster = scenario_cluster(work / "manifests", backend_port, scenario)
        (work / "pyngress").mkdir()
        controller = Controller(work / "pyngress", [f"--manifests={cluster.directory}", "--log-level=warning",
                                                    "--configmap=ingress/quiet", *args.controller_arg])
        pool = ProcessPoolExecutor(WEBSOCKET_CLIENTS) if scenario.websocket else None
        try:
            controller.start()
            pyngress_port = controller.https_port if scenario.certificate else controller.http_port
            ports = {"pyngress": pyngress_port, "static": static_port, "static+headers": headers_port}
            urls = {name: scenario.url(port) for name, port in ports.items()}

            def load(name: str, seconds: float) -> tuple[float, float]:
                if pool is not None:
                    return websocket_round_trips(pool, ports[name], seconds)
                return (h2load if scenario.http2 else wrk)(urls[name], seconds)

            if scenario.websocket:
                wait_for(lambda: all(upgrades(port) for port in ports.values()), 30, what="every server upgrading")
            else:
                wait_for(lambda: all(answers(url) for url in urls.values()), 30, what="every server answering 200")
            for name in urls:
                load(name, 1)  # warm each: Lua code cache, upstream keepalive connections
            runs: dict[str, list[tuple[float, float]]] = {name: [] for name in urls}
            masters = {"pyngress": controller.pid("nginx"), "static": static.pid, "static+headers": static_headers.pid}
            cpu: dict[str, list[float]] = {name: [] for name in urls}  # workers' CPU seconds per request
            order = random.Random(0)  # the same orders in every run of the bench
            for _ in range(args.rounds):
                # A new order each round, so that no server always runs first, or right after the same one.
                for name in order.sample(list(urls), len(urls)):
                    before = workers_cpu_seconds(masters[name])
                    runs[name].append(load(name, args.seconds))
                    cpu[name].append((workers_cpu_seconds(masters[name]) - before) / (runs[name][-1][0] * args.seconds))
                time.sleep(0.5)
        finally:
            if pool is not None:
                pool.shutdown()
            controller.stop()
            stop_nginx(static)
            stop_nginx(static_headers)
            if scenario.websocket:
                backend.kill()
                backend.wait()
            else:
                stop_nginx(backend)
    tool = {"h2": "h2load -t2 -c32 -m10", "websocket": "echo round trips"}.get(args.scenario, "wrk -t2 -c32")
    latency = "mean (median)" if scenario.http2 else "p99 (median)"
    print(f"{DESCRIPTIONS[args.scenario]} vs static nginx proxy_pass, {tool}, {args.rounds} rounds of "
          f"{args.seconds} s")
    print(f"{'':15} {'req/s (median)':>15} {latency:>13}")
    for name, measured in runs.items():
        print(f"{name:15} {statistics.median(r for r, _ in measured):>15.0f} "
              f"{statistics.median(p for _, p in measured) * 1000:>11.2f}ms")
    for baseline in ("static", "static+headers"):
        rate_ratios = [o[0] / b[0] for o, b in zip(runs["pyngress"], runs[baseline])]
        p99_ratios = [o[1] / b[1] for o, b in zip(runs["pyngress"], runs[baseline])]
        print(f"vs {baseline}: req/s ratio (median of rounds) {statistics.median(rate_ratios):.2f}x "
              f"(rounds: {', '.join(f'{r:.2f}' for r in rate_ratios)}); {latency.split()[0]} ratio "
              f"{statistics.median(p99_ratios):.2f}x (rounds: {', '.join(f'{r:.2f}' for r in p99_ratios)})")
    print("nginx workers' CPU per request (median of rounds): " + ", ".join(
        f"{name} {statistics.median(cpu[name]) * 1e6:.1f} us" for name in cpu))
    for baseline in ("static", "static+headers"):
        ratios = [b / o for o, b in zip(cpu["pyngress"], cpu[baseline])]
        print(f"vs {baseline}: CPU per request, {baseline} / pyngress (median of rounds) {statistics.median(ratios):.2f}x "
              f"(rounds: {', '.join(f'{r:.2f}' for r in ratios)})")
    print("targets: req/s >= 0.9x static, p99 <= 1.2x static")


def upgrades(port: int) -> bool:
    """Whether `port` passes a WebSocket upgrade for HOST on to the echo backend."""
    try:
        websocket_echo.round_trips(port, HOST, 0.0, 1)
        return True
    except (OSError, RuntimeError):
        return False


def answers(url: str) -> bool:
    """Whether `url` answers 200 to a request for HOST (certificates not checked)."""
    try:
        out = subprocess.run(["curl", "-sk", "-o", "/dev/null", "-w", "%{http_code}", "-H", f"Host: {HOST}", url],
                             capture_output=True, text=True, timeout=5).stdout
        return out == "200"
    except subprocess.TimeoutExpired:
        return False


if __name__ == "__main__":
    main()

"""The admission webhook's answer time at 10,000 Ingresses, through the real HTTPS server.

`pyngress webhook` runs as supervisord would run it, following a store of N Ingresses (each with its Service)
published here on the run directory's watcher endpoints (the clone pattern, as the watcher publishes it). A
client sends AdmissionReviews over one kept-alive HTTPS connection, as the API server does: new Ingresses on new
hosts, on hosts an existing Ingress serves (other paths), on a taken host and path (denied, naming the owner),
and with an injection-shaped annotation (denied). Beside them, a Gateway of our GatewayClass and N HTTPRoutes (each
its own host, its own Service): new HTTPRoutes on new hosts, on a host another route serves, and with a regular
expression PCRE refuses (denied). It prints the median, p99 and worst answer time of each kind.
Baseline in the same run: the same client against the same server answering a review of a Service (allowed
without a look at the store), which is the cost of TLS, HTTP and JSON alone.

Then a flood: wrk sends reviews as fast as 16 connections allow while another wrk loads a static nginx (one
worker) beside it; nginx's requests per second and p99 are compared with nginx loaded alone, and with the flood
when the webhook runs at nginx's priority instead of its own (nice 10).

    .venv/bin/python bench/bench_webhook_review.py [--ingresses 10000] [--reviews 2000] [--seconds 5]
"""
from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import re
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from services.common.objects import object_key  # noqa: E402
from services.tools.webhook_certificate import make_pair  # noqa: E402
from tests.support import gateway_objects as gw  # noqa: E402
from tests.support import k8s  # noqa: E402
from tests.support.clone import published  # noqa: E402
from tests.support.net import free_port, wait_for  # noqa: E402

SERVER_NAME = "webhook.bench.svc"
PREFIX = "nginx.ingress.kubernetes.io"


def store(n: int) -> dict[str, dict]:
    objects = [k8s.ingress_class("nginx")]
    for i in range(n):
        objects.append(k8s.service(f"svc-{i}"))
        objects.append(k8s.ingress(f"ing-{i}", [k8s.rule(f"h{i}.bench.example", ("/", "Prefix", f"svc-{i}", 80))],
                                   annotations={f"{PREFIX}/proxy-read-timeout": "30"}))
    objects += [gw.gateway_class(), gw.gateway("bench", listeners=[gw.listener()])]
    objects += [http_route(f"route-{i}", f"r{i}.bench.example", f"svc-{i}") for i in range(n)]
    return {object_key(o): o for o in objects}


def http_route(name: str, host: str, service: str, *, path: dict | None = None) -> dict:
    """An HTTPRoute on the Gateway "bench": a rule with two header matches, weighted 90/10, then one for "/"."""
    return gw.http_route(name, parents=[{"name": "bench"}], hostnames=[host], rules=[
        gw.rule(gw.backend_ref(service, weight=90), gw.backend_ref("svc-0", weight=10),
                matches=[path or gw.path_match("/", headers={"X-Version": "2", "X-Tenant": "bench"})]),
        gw.rule(gw.backend_ref(service), matches=[gw.path_match("/")])])


def review(obj: dict, kind: str = "Ingress", group: str = "networking.k8s.io") -> bytes:
    if obj.get("kind") == "HTTPRoute":
        kind, group = "HTTPRoute", gw.GROUP
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": str(uuid.uuid4()), "kind": {"group": group, "version": "v1", "kind": kind}, "operation": "CREATE",
        "name": obj["metadata"]["name"], "namespace": "default", "object": obj, "dryRun": False}}).encode()


def kinds(n: int, count: int) -> dict[str, list[bytes]]:
    step = max(1, n // count)
    return {
        "service (baseline)": [review(k8s.service(f"new-svc-{i}"), "Service", "") for i in range(count)],
        "new host": [review(k8s.ingress(f"new-{i}", [k8s.rule(f"new{i}.bench.example",
                                                              ("/", "Prefix", "svc-0", 80))])) for i in range(count)],
        "shared host, new path": [review(k8s.ingress(f"more-{i}", [k8s.rule(
            f"h{(i * step) % n}.bench.example", (f"/more{i}", "Prefix", f"svc-{(i * step) % n}", 80))]))
            for i in range(count)],
        "taken host and path (denied)": [review(k8s.ingress(f"dup-{i}", [k8s.rule(
            f"h{(i * step) % n}.bench.example", ("/", "Prefix", "svc-0", 80))])) for i in range(count)],
        "injection (denied)": [review(k8s.ingress(f"bad-{i}", [k8s.rule(f"bad{i}.bench.example",
                                                                        ("/", "Prefix", "svc-0", 80))],
                                                  annotations={f"{PREFIX}/auth-url": "http://a/;\n}\nx {"}))
                               for i in range(count)],
        "HTTPRoute, new host": [review(http_route(f"new-route-{i}", f"newr{i}.bench.example", "svc-0"))
                                for i in range(count)],
        "HTTPRoute, shared host": [review(http_route(f"more-route-{i}", f"r{(i * step) % n}.bench.example",
                                                     f"svc-{(i * step) % n}", path=gw.path_match(f"/more{i}")))
                                   for i in range(count)],
        "HTTPRoute, bad regex (denied)": [review(http_route(f"bad-route-{i}", f"badr{i}.bench.example", "svc-0",
                                                            path=gw.path_match("(x", kind="RegularExpression")))
                                          for i in range(count)],
    }


def connect(port: int, ca: Path) -> http.client.HTTPSConnection:
    context = ssl.create_default_context(cafile=str(ca))
    connection = http.client.HTTPSConnection(SERVER_NAME, port, context=context, timeout=30)
    raw = socket.create_connection(("127.0.0.1", port), timeout=30)
    raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as Go's client (the API server's) sets it
    connection.sock = context.wrap_socket(raw, server_hostname=SERVER_NAME)
    return connection


def timed(connection: http.client.HTTPSConnection, bodies: list[bytes]) -> tuple[list[float], set[bool]]:
    times, allowed = [], set()
    for body in bodies:
        started = time.perf_counter()
        connection.request("POST", "/networking/v1/ingresses", body=body, headers={"Content-Type": "application/json"})
        answer = connection.getresponse().read()
        times.append(time.perf_counter() - started)
        allowed.add(json.loads(answer)["response"]["allowed"])
    return times, allowed


NGINX_CONF = """daemon off; worker_processes 1; error_log stderr error; pid {dir}/nginx.pid;
events {{}}
http {{ access_log off; client_body_temp_path {dir}; server {{ listen 127.0.0.1:{port}; return 200 "ok"; }} }}
"""
_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0}


def wrk(url: str, seconds: int, *args: str) -> tuple[float, float]:
    """(requests per second, p99 in seconds)."""
    out = subprocess.run(["wrk", "--latency", f"-d{seconds}s", *args, url], capture_output=True, text=True,
                         check=True).stdout
    value, unit = re.search(r"99%\s+([\d.]+)(us|ms|s)", out).groups()  # type: ignore[union-attr]
    return float(re.search(r"Requests/sec:\s+([\d.]+)", out)[1]), float(value) * _UNITS[unit]  # type: ignore[index]


def flood_effect(workdir: Path, webhook_pid: int, webhook_port: int, seconds: int, rounds: int) -> None:
    nginx_dir = workdir / "nginx"
    nginx_dir.mkdir()
    port = free_port()
    (nginx_dir / "nginx.conf").write_text(NGINX_CONF.format(dir=nginx_dir, port=port))
    nginx = subprocess.Popen(["nginx", "-p", str(nginx_dir), "-c", str(nginx_dir / "nginx.conf")])
    body = review(k8s.ingress("flood", [k8s.rule("flood.bench.example", ("/", "Prefix", "svc-0", 80))]))
    (workdir / "flood.lua").write_text(f'wrk.method = "POST"\nwrk.body = {json.dumps(body.decode())}\n'
                                      'wrk.headers["Content-Type"] = "application/json"\n')
    target = f"http://127.0.0.1:{port}/"
    try:
        wait_for(lambda: subprocess.run(["curl", "-sf", target], capture_output=True).returncode == 0, 10,
                 what="nginx up")
        results: dict[str, list[tuple[float, float, float]]] = {}
        for _ in range(rounds):  # interleaved: the machine's other load falls on every condition alike
            alone = wrk(target, seconds, "-t1", "-c32")
            results.setdefault("alone", []).append((*alone, 0.0))
            for label, niceness in (("with a review flood, webhook at nice 10", 10),
                                    ("with a review flood, webhook at nice 0", 0)):
                os.setpriority(os.PRIO_PROCESS, webhook_pid, niceness)
                flood = subprocess.Popen(["wrk", "--latency", f"-d{seconds + 2}s", "-t1", "-c16", "-s",
                                          str(workdir / "flood.lua"), f"https://127.0.0.1:{webhook_port}/"],
                                         stdout=subprocess.PIPE, text=True)
                time.sleep(1)
                loaded = wrk(target, seconds, "-t1", "-c32")
                flooded = flood.communicate()[0]
                reviews = float(re.search(r"Requests/sec:\s+([\d.]+)", flooded)[1])  # type: ignore[index]
                results.setdefault(label, []).append((*loaded, reviews))
        print(f"\nnginx (1 worker) under wrk -t1 -c32, {seconds} s, median of {rounds}: requests/s      p99   "
              "reviews/s")
        for label, runs in results.items():
            rate, p99, reviews = (statistics.median(r[i] for r in runs) for i in range(3))
            print(f"{label:56} {rate:9.0f} {p99 * 1000:7.2f}ms {reviews:9.0f}")
    finally:
        nginx.terminate()
        nginx.wait(10)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def start_webhook(workdir: Path, run_dir: Path, port: int) -> subprocess.Popen:
    """`pyngress webhook` as supervisord runs it, its log in the work directory."""
    with open(workdir / "webhook.log", "wb") as log:
        return subprocess.Popen([str(Path(sys.executable).parent / "pyngress"), "webhook", f"--run-dir={run_dir}",
                                 f"--validating-webhook=127.0.0.1:{port}",
                                 f"--validating-webhook-certificate={workdir / 'cert'}",
                                 f"--validating-webhook-key={workdir / 'key'}"], stdout=log, stderr=subprocess.STDOUT)


async def run(n: int, count: int, seconds: int, rounds: int, workdir: Path) -> None:
    pair = make_pair("webhook", "bench")
    for name in ("ca", "cert", "key"):
        (workdir / name).write_text(pair[name])
    run_dir = workdir / "run"
    run_dir.mkdir(mode=0o700)
    port = free_port()
    objects = store(n)
    async with published(run_dir) as (publisher, _):
        await publisher.replace_all(objects)
        started = time.monotonic()
        process = start_webhook(workdir, run_dir, port)
        try:
            def listening() -> bool:
                with socket.socket() as probe:
                    return probe.connect_ex(("127.0.0.1", port)) == 0
            await asyncio.to_thread(wait_for, listening, 300, what="the webhook listening")
            print(f"{n} Ingresses and {n} HTTPRoutes: store in and port open after {time.monotonic() - started:.1f} s")
            connection = connect(port, workdir / "ca")
            timed(connection, kinds(n, 20)["new host"])  # warm up: first plans, first regexes
            print(f"{'review':32} {'median':>9} {'p99':>9} {'worst':>9}  allowed")
            for kind, bodies in kinds(n, count).items():
                times, allowed = await asyncio.to_thread(timed, connection, bodies)
                print(f"{kind:32} {statistics.median(times) * 1000:8.2f}ms {percentile(times, 0.99) * 1000:8.2f}ms "
                      f"{max(times) * 1000:8.2f}ms  {sorted(allowed)}")
            connection.close()
            if rounds:
                await asyncio.to_thread(flood_effect, workdir, process.pid, port, seconds, rounds)
        finally:
            process.terminate()
            process.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ingresses", type=int, default=10_000)
    parser.add_argument("--reviews", type=int, default=2_000, help="reviews of each kind")
    parser.add_argument("--seconds", type=int, default=5, help="each load's length")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the flood measurement (0: none)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-webhook-") as directory:
        os.chmod(directory, 0o700)
        asyncio.run(run(args.ingresses, args.reviews, args.seconds, args.rounds, Path(directory)))


if __name__ == "__main__":
    main()

"""TLS at scale: new TLS handshakes per second and a request's p99 with 10,000 certificates picked by SNI, beside
the same nginx serving one certificate, same run.

pyngress: a running controller (manifests mode) with N TLS Ingresses, each its own host and its own Secret (a
certificate naming that host; bench/scale_certificates.py: one CA, one EC P-256 key shared), all routed to one
backend (an nginx answering "ok"). The certificates reach nginx through the Lua certificate path
(ssl_certificate_by_lua, certificates.lua). Baseline: a static nginx with the same worker count, one server
with one of those certificates (the first host's) and `proxy_pass` to the backend, sending the headers
ingress-nginx sends (bench_dataplane.py's static + headers), with pyngress's own TLS settings (ingress-nginx's
defaults: protocols, ciphers, a shared session cache, no session tickets), so that what differs is the certificate
path. `--certificates 1` splits the gap between what serving by SNI in Lua costs and what the number adds.

Load: client processes x threads, each opening a new TLS connection per request (full handshake, no session
resumption, the certificate verified against the CA and the SNI's host name), `GET /` with `Connection: close`.
Against pyngress each connection names a host drawn at random from the N, so almost every handshake needs a
certificate other than the last (and, past a worker's cache of parsed certificates, one parsed again); against
the static nginx every connection names its one host. Rounds alternate between the two (a new order each
round); handshakes per second, and the p99 of a connection's whole request (connect, handshake, GET, answer).
Before the rounds, passes over every host (their rates printed) let each worker parse each certificate once, as
a running controller will have: the rounds measure the steady state. Memory: the RSS of pyngress's nginx workers
before any handshake, after those passes and after the rounds.
Run: .venv/bin/python bench/bench_tls_scale.py [--certificates N] [--rounds R] [--seconds S]
"""
from __future__ import annotations

import argparse
import base64
import os
import random
import socket
import ssl
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_dataplane import (FORWARDED_HEADERS, NO_ACCESS_LOG, start_nginx, start_ok_backend,  # noqa: E402
                             static_proxy, stop_nginx)
from scale_certificates import make as make_certificates  # noqa: E402
from services.nginxconf.render import HTTP_DEFAULTS  # noqa: E402
from tests.support import k8s  # noqa: E402
from tests.support.controller import Controller, ManifestsCluster  # noqa: E402
from tests.support.net import free_port, wait_for  # noqa: E402

PER_FILE = 100
# pyngress's http-level TLS settings, for the static nginx too.
TLS_SETTINGS = "".join(f"{name} {value}; " for name, value in HTTP_DEFAULTS.items() if name.startswith("ssl_"))


def host(i: int) -> str:
    return f"h{i}.tls-scale.test"


def manifests(n: int, backend_port: int, pems: dict) -> list[tuple[str, str]]:
    """N TLS Ingresses (host(i), Secret t{i} holding its certificate) to one Service, as files of PER_FILE."""
    key = base64.b64encode(pems["key"].encode()).decode()
    files = [("base.yaml", yaml.safe_dump_all([k8s.ingress_class("nginx"), NO_ACCESS_LOG, k8s.service("web"),
                                               k8s.endpoint_slice("web", ["127.0.0.1"], backend_port)]))]
    for start in range(0, n, PER_FILE):
        docs = []
        for i in range(start, min(n, start + PER_FILE)):
            ingress = k8s.ingress(f"i{i}", [k8s.rule(host(i), ("/", "Prefix", "web", 80))])
            ingress["spec"]["tls"] = [{"hosts": [host(i)], "secretName": f"t{i}"}]
            crt = base64.b64encode(pems["certs"][host(i)].encode()).decode()
            docs += [ingress, {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                               "metadata": {"name": f"t{i}", "namespace": "default"},
                               "data": {"tls.crt": crt, "tls.key": key}}]
        files.append((f"tls-{start}.yaml", yaml.safe_dump_all(docs)))
    return files


class OneCertificate:
    """What static_proxy needs of a scenario: one certificate, one path, HTTP/1.1."""

    def __init__(self, crt: Path, key: Path) -> None:
        self.certificate = (crt, key)
        self.paths = ["/"]
        self.http2 = False


def _handshake_worker(port: int, ca: str, hosts: list[str], seconds: float, threads: int,
                      seed: int) -> tuple[int, list[float]]:
    """New TLS connections for `seconds`: (count, each one's seconds from connect to the end of the answer)."""
    ctx = ssl.create_default_context(cafile=ca)
    deadline = time.monotonic() + seconds
    latencies: list[list[float]] = [[] for _ in range(threads)]

    def loop(i: int) -> None:
        pick = random.Random(seed * 1000 + i)
        while time.monotonic() < deadline:
            name = pick.choice(hosts)
            start = time.perf_counter()
            with socket.create_connection(("127.0.0.1", port), timeout=30) as raw, \
                    ctx.wrap_socket(raw, server_hostname=name) as tls:
                tls.sendall(f"GET / HTTP/1.1\r\nHost: {name}\r\nConnection: close\r\n\r\n".encode())
                answer = b""
                while chunk := tls.recv(4096):
                    answer += chunk
            if not answer.startswith(b"HTTP/1.1 200"):
                raise RuntimeError(f"{name}: {answer[:100]!r}")
            latencies[i].append(time.perf_counter() - start)

    workers = [threading.Thread(target=loop, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    every = [x for each in latencies for x in each]
    return len(every), every


def _walk_worker(port: int, ca: str, hosts: list[str], threads: int) -> int:
    """One new TLS connection per host of `hosts`, spread over `threads`: the number made."""
    ctx = ssl.create_default_context(cafile=ca)

    def walk(names: list[str]) -> None:
        for name in names:
            with socket.create_connection(("127.0.0.1", port), timeout=30) as raw, \
                    ctx.wrap_socket(raw, server_hostname=name) as tls:
                tls.sendall(f"GET / HTTP/1.1\r\nHost: {name}\r\nConnection: close\r\n\r\n".encode())
                while tls.recv(4096):
                    pass

    workers = [threading.Thread(target=walk, args=(hosts[i::threads],)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return len(hosts)


def walk_all(pool: ProcessPoolExecutor, port: int, ca: str, hosts: list[str], processes: int, threads: int) -> float:
    """A connection per host (each certificate's first handshakes): connections per second."""
    start = time.perf_counter()
    done = sum(f.result() for f in [pool.submit(_walk_worker, port, ca, hosts[p::processes], threads)
                                    for p in range(processes)])
    return done / (time.perf_counter() - start)


def handshakes(pool: ProcessPoolExecutor, port: int, ca: str, hosts: list[str], seconds: float, processes: int,
               threads: int, seed: int) -> tuple[float, float]:
    """(new TLS connections per second, p99 seconds of one's request)."""
    start = time.perf_counter()
    futures = [pool.submit(_handshake_worker, port, ca, hosts, seconds, threads, seed * 100 + p)
               for p in range(processes)]
    results = [f.result() for f in futures]
    elapsed = time.perf_counter() - start
    latencies = sorted(x for _, each in results for x in each)
    return sum(n for n, _ in results) / elapsed, latencies[int(len(latencies) * 0.99)]


def rss_kib(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
    return total


def nginx_workers(master: int) -> list[int]:
    return [int(pid) for pid in Path(f"/proc/{master}/task/{master}/children").read_text().split()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--certificates", type=int, default=10000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--threads", type=int, default=8)
    args = parser.parse_args()
    hosts = [host(i) for i in range(args.certificates)]
    started = time.monotonic()
    pems = make_certificates(hosts)
    print(f"{args.certificates} certificates made in {time.monotonic() - started:.1f} s", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        os.chmod(work, 0o755)
        ca = work / "ca.crt"
        ca.write_text(pems["ca"])
        (work / "one").mkdir()
        crt, key = work / "one" / "tls.crt", work / "one" / "tls.key"
        crt.write_text(pems["certs"][hosts[0]])
        key.write_text(pems["key"])
        os.chmod(work / "one", 0o755)
        os.chmod(key, 0o644)
        backend_port, static_port = free_port(), free_port()
        backend = start_ok_backend(work / "backend", backend_port)
        static = start_nginx(work / "static", workers="auto",
                             # its one server is the default one: the server_name it is given does not matter
                             body=TLS_SETTINGS + static_proxy(static_port, backend_port, FORWARDED_HEADERS,
                                                              OneCertificate(crt, key)))
        cluster = ManifestsCluster(work / "manifests")
        for name, text in manifests(args.certificates, backend_port, pems):
            cluster.write(name, text)
        (work / "pyngress").mkdir()
        controller = Controller(work / "pyngress", [f"--manifests={cluster.directory}", "--log-level=warning",
                                                    "--configmap=ingress/quiet"])
        pool = ProcessPoolExecutor(args.processes)
        try:
            started = time.monotonic()
            controller.start()
            ports = {"pyngress": controller.https_port, "static nginx, one certificate": static_port}
            names = {"pyngress": hosts, "static nginx, one certificate": hosts[:1]}
            wait_for(lambda: _serves(controller.https_port, str(ca), hosts[-1]), 300, what="the last host over TLS")
            print(f"controller up, last host served over TLS {time.monotonic() - started:.1f} s after start",
                  flush=True)
            workers = nginx_workers(controller.pid("nginx"))
            rss_before = rss_kib(workers)
            for name, port in ports.items():  # warm up: the clients' imports, the Lua code cache
                handshakes(pool, port, str(ca), names[name], 1.0, args.processes, args.threads, 0)
            # Each worker parses a certificate at its first handshake for it; the kernel spreads connections over
            # the workers, so each host is asked for about twice per worker.
            cold = [walk_all(pool, controller.https_port, str(ca), hosts, args.processes, args.threads)
                    for _ in range(2 * len(workers))]
            rss_warm = rss_kib(workers)
            print(f"passes over every host (first handshakes per certificate): "
                  f"{', '.join(f'{rate:.0f}' for rate in cold)} connections/s", flush=True)
            runs: dict[str, list[tuple[float, float]]] = {name: [] for name in ports}
            order = random.Random(0)
            for r in range(args.rounds):
                for name in order.sample(list(ports), len(ports)):
                    runs[name].append(handshakes(pool, ports[name], str(ca), names[name], args.seconds,
                                                 args.processes, args.threads, r + 1))
                print(f"round {r + 1}/{args.rounds}: " + "; ".join(
                    f"{name} {runs[name][-1][0]:.0f}/s p99 {runs[name][-1][1] * 1000:.1f} ms" for name in ports),
                    flush=True)
            rss_after = rss_kib(nginx_workers(controller.pid("nginx")))
        finally:
            pool.shutdown()
            controller.stop()
            stop_nginx(static)
            stop_nginx(backend)
    print()
    print(f"{args.certificates} certificates, SNI drawn at random; {args.rounds} rounds of {args.seconds:g} s, "
          f"{args.processes} client processes x {args.threads} threads, a new TLS connection per request; "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    print(f"{'':32}{'handshakes/s (median, min-max)':>32}{'p99 ms (median, min-max)':>28}")
    for name, measured in runs.items():
        rates, p99s = [r for r, _ in measured], [p * 1000 for _, p in measured]
        print(f"{name:32}{statistics.median(rates):>16.0f} ({min(rates):.0f}-{max(rates):.0f})"
              f"{statistics.median(p99s):>18.1f} ({min(p99s):.1f}-{max(p99s):.1f})")
    ours, one = runs["pyngress"], runs["static nginx, one certificate"]
    rate = [a[0] / b[0] for a, b in zip(ours, one)]
    p99 = [a[1] / b[1] for a, b in zip(ours, one)]
    print(f"pyngress / one certificate: handshakes/s {statistics.median(rate):.2f}x (rounds "
          f"{', '.join(f'{x:.2f}' for x in rate)}); p99 {statistics.median(p99):.2f}x (rounds "
          f"{', '.join(f'{x:.2f}' for x in p99)}) (target: >= 0.9x handshakes/s, p99 at most 1/0.9)")
    print(f"pyngress nginx workers' RSS ({len(workers)} workers): {rss_before / 1024:.0f} MiB before any handshake, "
          f"{rss_warm / 1024:.0f} MiB after the passes over every host, {rss_after / 1024:.0f} MiB after the rounds")


def _serves(port: int, ca: str, name: str) -> bool:
    """Whether `port` answers 200 for `name` over TLS with `name`'s own certificate (verified)."""
    try:
        ctx = ssl.create_default_context(cafile=ca)
        with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, \
                ctx.wrap_socket(raw, server_hostname=name) as tls:
            tls.sendall(f"GET / HTTP/1.1\r\nHost: {name}\r\nConnection: close\r\n\r\n".encode())
            return tls.recv(12) == b"HTTP/1.1 200"
    except (OSError, ssl.SSLError):
        return False


if __name__ == "__main__":
    main()

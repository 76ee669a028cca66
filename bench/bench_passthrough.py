"""TLS passthrough: `pyngress proxy` beside nginx's own stream `ssl_preread` passthrough, same run.

Both route the same SNI host to the same TLS backend (an nginx https server) and each runs as one
process (one proxy process; one nginx stream worker). Measured in rounds that rotate between the paths,
so that load from elsewhere on the machine spreads over all of them (medians, with the spread; the
ratios are medians of same-round ratios):
- throughput of 64 MiB downloads (one at a time);
- new TLS connections per second (GET of a 2-byte page, `Connection: close`, from several client
  processes and threads);
- CPU per connection and per GiB: utime+stime deltas from /proc/<pid>/stat of the proxy process and of
  the nginx stream worker over the same phases.
"Direct" (client → backend) is shown for reference. With --controller the proxy is that of a whole running
controller (nginx, watcher, syncer beside it), routed by an ssl-passthrough Ingress. With --twin a second
nginx, configured as the first, is measured as one more path: its ratios to the first are what the machine's
noise alone gives, the resolution of the proxy's ratios. With --python the proxy (and the floor) run on another
interpreter, such as /usr/bin/python3, the Debian Python the image ships, and the proxy on the venv's interpreter is
measured beside it as one more path.
Run: .venv/bin/python bench/bench_passthrough.py [--controller] [--floor] [--twin] [--python PATH]
"""
from __future__ import annotations

import argparse
import os
import random
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.integration.proxy.harness import (Nginx, Pki, ProxyProcess, TablePublisher, cpu_times,  # noqa: E402
                                             free_port, http_temp_paths, wait_listening)
from tests.support import k8s  # noqa: E402
from tests.support.controller import Controller, ManifestsCluster  # noqa: E402
from tests.support.net import wait_for  # noqa: E402

HOST = "bench.proxy.test"
BIG = 64 * 1024 * 1024
MIB = 1024 * 1024


def download(port: int, ca: str) -> float:
    """One 64 MiB download over a new TLS connection; returns MiB/s."""
    ctx = ssl.create_default_context(cafile=ca)
    with socket.create_connection(("127.0.0.1", port), timeout=60) as raw, \
            ctx.wrap_socket(raw, server_hostname=HOST) as tls:
        start = time.perf_counter()
        tls.sendall(f"GET /big HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n\r\n".encode())
        buf = bytearray(MIB)
        received = 0
        while n := tls.recv_into(buf):
            received += n
        elapsed = time.perf_counter() - start
    if received < BIG:
        raise RuntimeError(f"download through port {port} stopped after {received} bytes")
    return received / MIB / elapsed


def _connection_worker(port: int, ca: str, seconds: float, threads: int) -> int:
    ctx = ssl.create_default_context(cafile=ca)
    request = f"GET / HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n\r\n".encode()
    counts = [0] * threads
    deadline = time.monotonic() + seconds

    def loop(i: int) -> None:
        while time.monotonic() < deadline:
            with socket.create_connection(("127.0.0.1", port), timeout=60) as raw, \
                    ctx.wrap_socket(raw, server_hostname=HOST) as tls:
                tls.sendall(request)
                while tls.recv(4096):
                    pass
            counts[i] += 1

    workers = [threading.Thread(target=loop, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return sum(counts)


def connection_rate(pool: ProcessPoolExecutor, port: int, ca: str, seconds: float, processes: int,
                    threads: int) -> tuple[float, int]:
    start = time.perf_counter()
    futures = [pool.submit(_connection_worker, port, ca, seconds, threads) for _ in range(processes)]
    total = sum(f.result() for f in futures)
    return total / (time.perf_counter() - start), total


class LoneProxy:
    """One `pyngress proxy` process, its table published by the bench."""

    def __init__(self, work: Path, backend_port: int, python: str | None = None, name: str = "run") -> None:
        self.work, self.backend_port, self.python, self.name = work, backend_port, python, name

    def start(self) -> tuple[int, int]:
        """(port, pid) of the proxy once it serves the route."""
        run_dir = self.work / self.name
        run_dir.mkdir(mode=0o700)
        self.table = TablePublisher(run_dir)
        seq = self.table.replace_all({f"host/{HOST}": [f"127.0.0.1:{self.backend_port}"],
                                      "config": {"use_proxy_protocol": False}})
        port = free_port()
        self.proxy = ProxyProcess(port, run_dir, log_path=self.work / f"proxy-{self.name}.log", python=self.python)
        self.proxy.wait_serving(seq)
        return port, self.proxy.proc.pid

    def stop(self) -> None:
        self.proxy.stop()
        self.table.close()


class WholeController:
    """`pyngress up` (manifests mode) with one proxy process and an ssl-passthrough Ingress for HOST: the proxy
    shares the machine with nginx, the watcher and the syncer, as in a cluster."""

    def __init__(self, work: Path, backend_port: int) -> None:
        self.cluster = ManifestsCluster(work / "manifests")
        self.cluster.apply(k8s.ingress_class("nginx"), k8s.service("tls-backend", port=443),
                           k8s.endpoint_slice("tls-backend", ["127.0.0.1"], backend_port),
                           k8s.ingress("passthrough", [k8s.rule(HOST, ("/", "Prefix", "tls-backend", 443))],
                                       annotations={"nginx.ingress.kubernetes.io/ssl-passthrough": "true"}))
        (work / "pyngress").mkdir()
        self.controller = Controller(work / "pyngress", [f"--manifests={self.cluster.directory}", "--log-level=warning",
                                                         "--enable-ssl-passthrough", "--proxy-processes=1"])

    def start(self) -> tuple[int, int]:
        self.controller.start()
        return self.controller.https_port, self.controller.pid("proxy:proxy-0")

    def stop(self) -> None:
        self.controller.stop()


class Path_:
    """One way to the backend: its port and the process whose CPU it costs (None: direct); `meaning` says what
    its ratios to nginx show, for the paths measured beside the proxy."""

    def __init__(self, name: str, port: int, pid: int | None, meaning: str = "") -> None:
        self.name, self.port, self.pid, self.meaning = name, port, pid, meaning
        self.mibps: list[float] = []
        self.rates: list[float] = []
        self.cpu_download = 0.0
        self.bytes = 0
        self.cpu_connections = 0.0
        self.system_connections = 0.0  # the kernel's part of cpu_connections
        self.cpu_elsewhere = 0.0  # during the other paths' slices: what its own left behind, and its timers
        self.connections = 0

    def cpu(self) -> tuple[float, float]:
        """(user, system) seconds so far."""
        return cpu_times(self.pid) if self.pid else (0.0, 0.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=8, help="rounds; each path gets one download and "
                        "one connection-rate slice per round, in a rotating order")
    parser.add_argument("--seconds", type=float, default=2.0, help="connection-rate slice per path per round")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--floor", action="store_true",
                        help="also measure bench/minimal_forwarder.py: what accepting and connecting in Python, "
                        "and relaying with the proxy's C relay, cost with nothing else (the floor under the proxy's "
                        "CPU per connection)")
    parser.add_argument("--twin", action="store_true",
                        help="also measure a second nginx ssl_preread configured as the first: its ratios to the "
                        "first are this machine's noise, the resolution of the proxy's ratios")
    parser.add_argument("--controller", action="store_true",
                        help="the proxy of a whole controller (`pyngress up --enable-ssl-passthrough "
                        "--proxy-processes=1`, an Ingress with ssl-passthrough), not a proxy process alone")
    parser.add_argument("--python", metavar="PATH",
                        help="run the proxy and the floor on this Python 3.11 (e.g. /usr/bin/python3, the Debian "
                        "Python the image ships), and measure the proxy on the venv's interpreter beside it")
    args = parser.parse_args()
    if args.python and args.controller:
        parser.error("--python measures a proxy process alone: not with --controller")

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        os.chmod(work, 0o755)
        pki = Pki(work)
        crt, key = pki.issue("backend", [HOST])
        (work / "www").mkdir()
        with open(work / "www" / "big", "wb") as f:
            f.write(os.urandom(BIG))
        os.chmod(work / "www", 0o755)
        os.chmod(work / "www" / "big", 0o644)
        backend_port, stream_port, nginx_internal = free_port(), free_port(), free_port()
        backend = Nginx(work / "backend", f"""
http {{
    access_log off;
    {http_temp_paths(work / "backend")}
    keepalive_timeout 0;
    server {{
        listen 127.0.0.1:{backend_port} ssl;
        ssl_certificate {crt};
        ssl_certificate_key {key};
        ssl_session_cache off;
        ssl_session_tickets off;
        root {work / "www"};
        location = / {{ return 200 "ok"; }}
    }}
}}
""")

        def ssl_preread(name: str, port: int) -> Nginx:
            return Nginx(work / name, f"""
stream {{
    map $ssl_preread_server_name $passthrough {{
        {HOST} 127.0.0.1:{backend_port};
        default 127.0.0.1:{nginx_internal};
    }}
    server {{
        listen 127.0.0.1:{port} reuseport;
        ssl_preread on;
        proxy_pass $passthrough;
    }}
}}
""")
        stream = ssl_preread("stream", stream_port)
        twin_port = free_port() if args.twin else 0
        twin = ssl_preread("twin", twin_port) if args.twin else None
        proxy = WholeController(work, backend_port) if args.controller else LoneProxy(work, backend_port, args.python)
        venv_proxy = LoneProxy(work, backend_port, name="venv") if args.python else None
        pool = ProcessPoolExecutor(args.processes)
        floor: subprocess.Popen[bytes] | None = None
        try:
            for port in (backend_port, stream_port):
                wait_listening(port)
            proxy_port, proxy_pid = proxy.start()
            (stream_worker,) = stream.worker_pids()
            paths = [Path_("pyngress proxy", proxy_port, proxy_pid),
                     Path_("nginx ssl_preread", stream_port, stream_worker),
                     Path_("direct", backend_port, None)]
            if args.floor:
                floor_port = free_port()
                floor = subprocess.Popen([args.python or sys.executable, str(Path(__file__).with_name("minimal_forwarder.py")),
                                          str(floor_port), str(backend_port)], start_new_session=True)
                wait_listening(floor_port)
                paths.append(Path_("minimal forwarder", floor_port, floor.pid,
                                   "the floor: accept and connect in Python, the same C relay"))
            if twin is not None:
                wait_listening(twin_port)
                (twin_worker,) = twin.worker_pids()
                paths.append(Path_("second nginx", twin_port, twin_worker,
                                   "the same server twice: what noise alone gives"))
            if venv_proxy is not None:
                paths.append(Path_("proxy, venv python", *venv_proxy.start(),
                                   f"the same proxy on {sys.executable}, not {args.python}"))
            ca = str(pki.ca)
            wait_for(lambda: download(proxy_port, ca) > 0, 60, what="the passthrough route")
            for p in paths:  # warm up: first connections, page cache
                download(p.port, ca)
            order = random.Random(0)  # the same orders in every run of the bench
            for r in range(args.rounds):
                # A new order each round: a rotation would keep each path's predecessor, and what a path leaves
                # behind (connections closing, timers) falls in the slice that follows it.
                for p in order.sample(paths, len(paths)):
                    measured = [q for q in paths if q is not p and q.pid]
                    before = [q.cpu() for q in measured]
                    user, system = p.cpu()
                    p.mibps.append(download(p.port, ca))
                    p.bytes += BIG
                    p.cpu_download += sum(p.cpu()) - user - system
                    user, system = p.cpu()
                    rate, count = connection_rate(pool, p.port, ca, args.seconds, args.processes, args.threads)
                    user_after, system_after = p.cpu()
                    p.cpu_connections += user_after + system_after - user - system
                    p.system_connections += system_after - system
                    p.rates.append(rate)
                    p.connections += count
                    for q, (q_user, q_system) in zip(measured, before):
                        q.cpu_elsewhere += sum(q.cpu()) - q_user - q_system
                print(f"round {r + 1}/{args.rounds}: " + "; ".join(
                    f"{p.name} {p.mibps[-1]:.0f} MiB/s {p.rates[-1]:.0f} conn/s" for p in paths), flush=True)
            report(paths, args)
        finally:
            pool.shutdown()
            if floor is not None:
                floor.kill()
                floor.wait()
            proxy.stop()
            if venv_proxy is not None:
                venv_proxy.stop()
            stream.stop()
            if twin is not None:
                twin.stop()
            backend.stop()


def report(paths: list[Path_], args: argparse.Namespace) -> None:
    print()
    print(f"{args.rounds} rounds; per path and round: one 64 MiB download, then new connections for "
          f"{args.seconds:g} s from {args.processes} client processes x {args.threads} threads; "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; the proxy on {args.python or sys.executable}")
    print(f"{'path':<20}{'MiB/s median (min-max)':>24}{'conn/s median (min-max)':>25}"
          f"{'CPU µs/conn (user+sys)':>24}{'CPU s/GiB':>11}{'elsewhere µs/conn':>19}")
    for p in paths:
        per_conn = (f"{p.cpu_connections / p.connections * 1e6:.0f} "
                    f"({(p.cpu_connections - p.system_connections) / p.connections * 1e6:.0f}"
                    f"+{p.system_connections / p.connections * 1e6:.0f})") if p.pid else "-"
        per_gib = f"{p.cpu_download / (p.bytes / 1024 ** 3):.2f}" if p.pid else "-"
        elsewhere = f"{p.cpu_elsewhere / p.connections * 1e6:.0f}" if p.pid else "-"
        mibps = f"{statistics.median(p.mibps):.0f} ({min(p.mibps):.0f}-{max(p.mibps):.0f})"
        rates = f"{statistics.median(p.rates):.0f} ({min(p.rates):.0f}-{max(p.rates):.0f})"
        print(f"{p.name:<20}{mibps:>24}{rates:>25}{per_conn:>24}{per_gib:>11}{elsewhere:>19}")
    ours, nginx = paths[0], paths[1]
    print()
    print(f"pyngress / nginx: {ratios(ours, nginx)} (target: >= 0.9x on throughput and connection rate in "
          "every round; CPU per connection <= 1.2x)")
    for other in paths[3:]:
        print(f"{other.name} / nginx: {ratios(other, nginx)} ({other.meaning})")


def ratios(ours: Path_, nginx: Path_) -> str:
    """Same-round ratios of `ours` to `nginx`, median and spread: both paths of a round ran within seconds of each
    other, under the same load from the rest of the machine; CPU over all rounds."""
    def spread(values: list[float]) -> str:
        return f"{statistics.median(values):.2f}x (rounds {min(values):.2f}-{max(values):.2f})"
    throughput = [a / b for a, b in zip(ours.mibps, nginx.mibps)]
    rate = [a / b for a, b in zip(ours.rates, nginx.rates)]
    cpu_conn = (ours.cpu_connections / ours.connections) / (nginx.cpu_connections / nginx.connections)
    cpu_gib = (ours.cpu_download / ours.bytes) / (nginx.cpu_download / nginx.bytes)
    # What a process spends during the other paths' slices is its too (deferred work, timers, status writes).
    cpu_all = ((ours.cpu_connections + ours.cpu_elsewhere) / ours.connections) / (
        (nginx.cpu_connections + nginx.cpu_elsewhere) / nginx.connections)
    return (f"throughput {spread(throughput)}, connection rate {spread(rate)}, CPU per connection {cpu_conn:.2f}x "
            f"({cpu_all:.2f}x with what it spends elsewhere), CPU per GiB {cpu_gib:.2f}x")


if __name__ == "__main__":
    main()

"""nginx's master killed under a steady load: requests lost, the longest wait, and how soon a changed route is
served; and what serving every worker from one inherited listening socket (no `reuseport`) costs.

Part 1, the master kill. A whole controller (`pyngress up`, manifests mode) serves one host from a recording
backend, under tests/e2e/nginx_restart/steady_load.py's load: keep-alive clients, a new connection per request,
slow (300 ms) requests, and a connect probe every 10 ms. A poller asks on a new connection every 10 ms which
backend serves the host. In each round the master gets SIGKILL and, at the same moment, the Ingress is changed
to send the host to the other backend; the round ends once the poller has seen only the new backend for 1 s.
- "changed route served after": from the kill until the poller sees only the new backend;
- the same change without a kill, in the same run, is the time a route change takes anyway;
- baseline in the same run: the same rounds with the code before the listening sockets outlived the master
  (`--baseline REF`, by default the parent of the commit that added services/nginx/holder.py, or HEAD before
  that commit exists), run from `git archive` with PYTHONPATH pointing at it.

Part 2, the listener. A plain nginx (2 workers, `return 200`) under wrk, in rounds: `listen PORT reuseport`
(nginx opens a socket per worker), `listen PORT` opened by nginx, and `listen PORT` inherited from a socket
opened the way nginx-listeners opens it. Keep-alive connections, and a new connection per request
(Connection: close). Needs wrk (apt-get install wrk); skipped without it.

    .venv/bin/python bench/bench_nginx_restart.py [--rounds 3] [--baseline REF] [--skip-wrk]
"""
from __future__ import annotations

import argparse
import io
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import requests

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from services.nginx import listeners  # noqa: E402
from services.nginx.listeners import Listener  # noqa: E402
from tests.e2e.nginx_restart.steady_load import RecordingBackend, SteadyLoad  # noqa: E402
from tests.support import k8s  # noqa: E402
from tests.support.controller import Controller, ManifestsCluster  # noqa: E402
from tests.support.net import free_port  # noqa: E402

HOST = "restart.example.com"
STABLE_SECONDS = 1.0
ROUND_TIMEOUT_SECONDS = 30.0


# --- part 1: the master kill ------------------------------------------------------------------------

class RoutePoller:
    """Asks every 10 ms, on a new connection, which backend serves HOST; keeps (time, backend or error)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.seen: list[tuple[float, str]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> "RoutePoller":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        session_headers = {"Host": HOST, "Connection": "close"}
        while not self._stop.is_set():
            at = time.monotonic()
            try:
                answer = requests.get(f"http://127.0.0.1:{self.port}/", headers=session_headers, timeout=10)
                seen = answer.json()["backend"] if answer.status_code == 200 else str(answer.status_code)
            except Exception as err:  # refused, reset, timed out: all count as "not served"
                seen = f"error: {type(err).__name__}"
            self.seen.append((at, seen))
            time.sleep(0.01)

    def served_from(self, want: str, since: float) -> float | None:
        """The time from which every answer (asked after `since`) was `want`, if the last STABLE_SECONDS were."""
        after = [(t, s) for t, s in self.seen if t >= since]
        if not after or after[-1][0] - after[0][0] < STABLE_SECONDS:
            return None
        start = None
        for t, s in after:
            if s != want:
                start = None
            elif start is None:
                start = t
        if start is None or after[-1][0] - start < STABLE_SECONDS:
            return None
        return start


@contextmanager
def controller_running(label: str, pythonpath: str | None, a: RecordingBackend,
                       b: RecordingBackend) -> Iterator[tuple[Controller, ManifestsCluster]]:
    work = Path(tempfile.mkdtemp(prefix=f"bench-restart-{label}-", dir="/tmp"))
    os.chmod(work, 0o711)  # nginx's workers (nobody) reach their temp directories inside
    saved = os.environ.get("PYTHONPATH")
    if pythonpath:
        os.environ["PYTHONPATH"] = pythonpath
    try:
        cluster = ManifestsCluster(work / "manifests")
        cluster.apply(k8s.ingress_class("nginx"))
        controller = Controller(work, [f"--manifests={cluster.directory}", "--log-level=warning"]).start()
    finally:
        if pythonpath:
            if saved is None:
                os.environ.pop("PYTHONPATH")
            else:
                os.environ["PYTHONPATH"] = saved
    try:
        for name, backend in (("a", a), ("b", b)):
            cluster.apply(k8s.service(name), k8s.endpoint_slice(name, [backend.ip], backend.port))
        cluster.apply(route_to("a"))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if requests.get(f"http://127.0.0.1:{controller.http_port}/", headers={"Host": HOST},
                                timeout=2).json().get("backend") == "A":
                    break
            except (requests.RequestException, ValueError):
                pass
            time.sleep(0.05)
        yield controller, cluster
    finally:
        controller.stop()
        shutil.rmtree(work, ignore_errors=True)


def route_to(service: str) -> dict:
    # The other Service stays routed from a second host: its backend stays in the pushed tables, so that the
    # change moves a route and nothing else (dropping a backend and moving a route are two pushes, with 503s
    # in between; that is measured by bench_endpoint_change.py's kind of change, not here).
    other = "b" if service == "a" else "a"
    return k8s.ingress("restart", [k8s.rule(HOST, ("/", "Prefix", service, 80)),
                                   k8s.rule(f"other.{HOST}", ("/", "Prefix", other, 80))])


def one_round(controller: Controller, cluster: ManifestsCluster, target: str, kill: bool) -> dict:
    load = SteadyLoad(controller.http_port, HOST, keepalive=4, fresh=4, slow=2, slow_ms=300).start()
    poller = RoutePoller(controller.http_port).start()
    try:
        time.sleep(1.0)
        old = controller.pid("nginx")
        t0 = time.monotonic()
        if kill:
            os.kill(old, signal.SIGKILL)
        cluster.apply(route_to(target.lower()))
        served = None
        while served is None and time.monotonic() - t0 < ROUND_TIMEOUT_SECONDS:
            time.sleep(0.1)
            served = poller.served_from(target, t0)
        time.sleep(0.5)
    finally:
        poller.stop()
        outcome = load.stop()
    not_served = sum(1 for t, s in poller.seen if t >= t0 and s.startswith("error"))
    return {"lost": len(outcome.lost) + not_served, "probe_failures": len(outcome.probe_failures),
            "answered": len(outcome.ok) + sum(1 for t, s in poller.seen if not s.startswith("error")),
            "longest_wait": max(outcome.longest_wait("keepalive", "fresh"), _poller_longest(poller)),
            "route_after": (served - t0) if served is not None else float("nan"),
            "new_master": controller.pid("nginx") != old}


def _poller_longest(poller: RoutePoller) -> float:
    gaps = [b[0] - a[0] - 0.01 for a, b in zip(poller.seen, poller.seen[1:]) if not a[1].startswith("error")]
    return max(gaps, default=0.0)


def kill_rounds(label: str, pythonpath: str | None, rounds: int) -> tuple[list[dict], list[float]]:
    a, b = RecordingBackend("A", "127.0.89.2"), RecordingBackend("B", "127.0.89.3")
    try:
        with controller_running(label, pythonpath, a, b) as (controller, cluster):
            plain = []
            current = "A"
            for _ in range(2):  # a route change without any restart: what it takes anyway
                current = "B" if current == "A" else "A"
                plain.append(one_round(controller, cluster, current, kill=False)["route_after"])
            results = []
            for _ in range(rounds):
                current = "B" if current == "A" else "A"
                results.append(one_round(controller, cluster, current, kill=True))
                time.sleep(1.0)
            return results, plain
    finally:
        a.stop()
        b.stop()


def baseline_tree(ref: str | None) -> tuple[str, Path]:
    if ref is None:
        added = subprocess.run(["git", "log", "--format=%H", "--diff-filter=A", "-1", "--",
                                "services/nginx/holder.py"], cwd=REPO, capture_output=True, text=True).stdout.strip()
        ref = f"{added}^" if added else "HEAD"
    commit = subprocess.run(["git", "rev-parse", "--short", ref], cwd=REPO, capture_output=True, text=True,
                            check=True).stdout.strip()
    archive = subprocess.run(["git", "archive", commit], cwd=REPO, capture_output=True, check=True).stdout
    tree = Path(tempfile.mkdtemp(prefix="bench-restart-baseline-", dir="/tmp"))
    os.chmod(tree, 0o755)  # as a checkout would be
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(tree)
    return commit, tree


def part_one(rounds: int, baseline_ref: str | None) -> None:
    commit, tree = baseline_tree(baseline_ref)
    try:
        runs = [("pyngress", None), (f"baseline {commit}", str(tree))]
        table = []
        for label, pythonpath in runs:
            results, plain = kill_rounds(label.split()[0], pythonpath, rounds)
            table.append((label, results, plain))
    finally:
        shutil.rmtree(tree, ignore_errors=True)
    print("\n## master SIGKILL under load, with a route change at the same moment")
    print("| run | round | failed requests | failed connects | requests answered | longest wait | "
          "changed route served after | the same change, no kill |")
    print("|---|---|---|---|---|---|---|---|")
    for label, results, plain in table:
        for i, r in enumerate(results, 1):
            print(f"| {label} | {i} | {r['lost']} | {r['probe_failures']} | {r['answered']} | "
                  f"{r['longest_wait'] * 1000:.0f} ms | {r['route_after'] * 1000:.0f} ms | "
                  f"{statistics.median(plain) * 1000:.0f} ms |" + ("" if r["new_master"] else " (no new master!)"))


# --- part 2: the listener under wrk ------------------------------------------------------------------

NGINX_CONF = """daemon off; master_process on; worker_processes 2; pid {dir}/nginx.pid; error_log stderr error;
events {{ worker_connections 4096; multi_accept on; }}
http {{
    access_log off; keepalive_requests 100000;
    client_body_temp_path {dir}/t; proxy_temp_path {dir}/t; fastcgi_temp_path {dir}/t; uwsgi_temp_path {dir}/t;
    scgi_temp_path {dir}/t;
    server {{ listen {port}{options}; location / {{ return 200 "ok\\n"; }} }}
}}
"""


def run_nginx(directory: Path, port: int, variant: str) -> subprocess.Popen:
    conf = directory / "nginx.conf"
    conf.write_text(NGINX_CONF.format(dir=directory, port=port, options=" reuseport" if variant == "reuseport" else ""))
    env = dict(os.environ)
    held: list = []
    if variant == "inherited":
        listener = Listener("http", ("0.0.0.0", port))
        socks = {listener: listeners.open_listener(listener)}
        env["NGINX"] = listeners.nginx_environment(socks)
        held = list(socks.values())
    proc = subprocess.Popen(["nginx", "-p", f"{directory}/", "-c", str(conf)], env=env,
                            pass_fds=[s.fileno() for s in held], stderr=subprocess.DEVNULL)
    for sock in held:
        sock.close()  # nginx holds it now
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            if requests.get(f"http://127.0.0.1:{port}/", timeout=1).status_code == 200:
                break
        except requests.RequestException:
            time.sleep(0.05)
    return proc


def wrk(port: int, close: bool, seconds: int) -> float:
    args = ["wrk", "-t1", "-c64", f"-d{seconds}s", f"http://127.0.0.1:{port}/"]
    if close:
        args[1:1] = ["-H", "Connection: close"]
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    return float(re.search(r"Requests/sec:\s+([0-9.]+)", out).group(1))


def part_two(rounds: int, seconds: int) -> None:
    if not shutil.which("wrk"):
        print("\nwrk is not installed (apt-get install wrk): listener comparison skipped")
        return
    variants = ("reuseport", "plain", "inherited")
    results: dict[tuple[str, bool], list[float]] = {(v, c): [] for v in variants for c in (False, True)}
    directory = Path(tempfile.mkdtemp(prefix="bench-listener-", dir="/tmp"))
    (directory / "t").mkdir()
    try:
        for _ in range(rounds):
            for variant in variants:
                port = free_port()
                proc = run_nginx(directory, port, variant)
                try:
                    for close in (False, True):
                        results[(variant, close)].append(wrk(port, close, seconds))
                finally:
                    proc.send_signal(signal.SIGQUIT)
                    proc.wait(timeout=10)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    print(f"\n## listener: nginx `return 200`, 2 workers, wrk -t1 -c64, {seconds} s, median of {rounds} rounds")
    print("| listener | keep-alive req/s | vs reuseport | new connection per request req/s | vs reuseport |")
    print("|---|---|---|---|---|")
    base = {c: statistics.median(results[("reuseport", c)]) for c in (False, True)}
    for variant in variants:
        ka, nc = (statistics.median(results[(variant, c)]) for c in (False, True))
        print(f"| {variant} | {ka:,.0f} | {ka / base[False]:.2f}x | {nc:,.0f} | {nc / base[True]:.2f}x |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline", default=None, help="git ref of the code to compare with")
    parser.add_argument("--skip-wrk", action="store_true")
    parser.add_argument("--wrk-seconds", type=int, default=4)
    args = parser.parse_args()
    part_one(args.rounds, args.baseline)
    if not args.skip_wrk:
        part_two(args.rounds, args.wrk_seconds)


if __name__ == "__main__":
    main()

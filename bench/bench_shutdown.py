"""SIGTERM to exit for every Python component of a running controller (issue: each must stop in under 1 s).

A controller runs as a user starts it (`pyngress up`, manifests mode, with --enable-ssl-passthrough and
--enable-cni so that the proxy and the CNI processes run too) with one Ingress served. For each program, in
rounds: SIGTERM to its pid, then the time until the process is gone (polled every 2 ms); supervisord starts
it again, and the next round waits until it is running. nginx is not measured: it drains its own
connections (worker_shutdown_timeout), as ingress-nginx's does.
With --ingresses N, N more Ingresses are served (bench_ingress_scale's): a stop then also finds a big store and
model to drop, and a restarted syncer busy with its first sync when the next round stops it.
Run: .venv/bin/python bench/bench_shutdown.py [--rounds N] [--ingresses N]
"""
from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_dataplane import HOST, plain_ingress_cluster, start_ok_backend, stop_nginx  # noqa: E402
from bench.bench_ingress_scale import host, scale_manifests, wait_served  # noqa: E402
from tests.support.controller import Controller  # noqa: E402
from tests.support.net import free_port, wait_for  # noqa: E402

PROGRAMS = ("watcher", "syncer", "crashmon", "nginx-listeners", "proxy:proxy-0", "cniserver", "cniworker:cniworker-0")
TARGET_SECONDS = 1.0


def running_pid(controller: Controller, program: str) -> int:
    """The pid of `program` once supervisord reports it RUNNING."""
    def pid() -> int:
        status = controller.supervisorctl("status", program)
        return controller.pid(program) if " RUNNING " in status else 0
    wait_for(lambda: pid() > 0, 30, what=f"{program} running")
    return pid()


def seconds_to_exit(pid: int, timeout: float = 30.0) -> float:
    started = time.monotonic()
    os.kill(pid, signal.SIGTERM)
    while time.monotonic() - started < timeout:
        try:
            os.kill(pid, 0)
            with open(f"/proc/{pid}/stat") as stat:
                if stat.read().rsplit(")", 1)[1].split()[0] == "Z":
                    break  # exited; supervisord has not reaped it yet
        except (ProcessLookupError, FileNotFoundError):
            break
        time.sleep(0.002)
    return time.monotonic() - started


# The whole tree (`pyngress up`), as a user runs it without and with the optional halves: supervisord stops its
# programs one after the other, so this is more than the slowest program's time.
TREES = {"ingress only": [], "passthrough and CNI on": ["--enable-ssl-passthrough", "--enable-cni"]}


def tree_seconds_to_exit(workdir: Path, manifests: Path, extra_args: list[str]) -> float:
    """SIGTERM to `pyngress up` until it has exited, once the tree serves the Ingress."""
    workdir.mkdir()
    controller = Controller(workdir, [f"--manifests={manifests}", "--log-level=warning", *extra_args])
    try:
        controller.start()
        wait_for(lambda: controller.get("/", HOST).status_code == 200, 60, what="the Ingress served")
        started = time.monotonic()
        controller.stop()
        return time.monotonic() - started
    finally:
        controller.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ingresses", type=int, default=0,
                        help="also serve this many Ingresses (each with its Service and EndpointSlice)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        os.chmod(work, 0o755)
        backend_port = free_port()
        backend = start_ok_backend(work / "backend", backend_port)
        cluster = plain_ingress_cluster(work / "manifests", backend_port)
        for name, text in scale_manifests(args.ingresses, "127.0.0.1", backend_port):
            cluster.write(name, text)
        (work / "pyngress").mkdir()
        controller = Controller(work / "pyngress", [f"--manifests={cluster.directory}", "--log-level=warning",
                                                    "--enable-ssl-passthrough", "--enable-cni"])
        results: dict[str, list[float]] = {program: [] for program in PROGRAMS}
        try:
            controller.start()
            wait_for(lambda: controller.get("/", HOST).status_code == 200, 60, what="the Ingress served")
            if args.ingresses:
                wait_served(controller.http_port, [host(args.ingresses - 1)], time.monotonic() + 120)
            for _ in range(args.rounds):
                for program in PROGRAMS:
                    results[program].append(seconds_to_exit(running_pid(controller, program)))
                    running_pid(controller, program)  # started again before the next one is stopped
            controller.stop()
            trees = {label: [tree_seconds_to_exit(work / f"tree-{index}-{round_}", cluster.directory, extra_args)
                             for round_ in range(args.rounds)]
                     for index, (label, extra_args) in enumerate(TREES.items())}
        finally:
            controller.stop()
            stop_nginx(backend)
    print(f"SIGTERM to exit, {args.rounds} rounds, a running controller (passthrough and CNI on), "
          f"{1 + args.ingresses} Ingresses")
    print(f"{'program':24} {'median':>8} {'max':>8}")
    for program, times in results.items():
        verdict = "ok" if max(times) < TARGET_SECONDS else f"over {TARGET_SECONDS:.0f} s"
        print(f"{program:24} {statistics.median(times) * 1000:>6.0f}ms {max(times) * 1000:>6.0f}ms  {verdict}")
    print("the whole tree: SIGTERM to `pyngress up` until it has exited (nginx drains, then each program stops)")
    for label, times in trees.items():
        print(f"{label:24} {statistics.median(times) * 1000:>6.0f}ms {max(times) * 1000:>6.0f}ms")


if __name__ == "__main__":
    main()

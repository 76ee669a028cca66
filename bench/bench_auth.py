"""Requests/s through basic authentication beside a plain location, in the same run (wrk, keep-alive).

A whole controller (`pyngress up`, manifests mode) serves several hosts from one fast backend (a plain nginx
answering `return 200`), so that the figure is the controller's own cost: `plain.bench` without
authentication (the baseline), and one host per password hash scheme with auth-type basic, every request
carrying the right credentials. nginx checks the hash on every request (it keeps no cache), so the scheme's
cost is the cost: $apr1$ and {SHA} are cheap, bcrypt and yescrypt are made to be slow. Rounds alternate the
hosts; the median of the rounds is printed.

    .venv/bin/python bench/bench_auth.py [--rounds 3] [--seconds 5]
"""
from __future__ import annotations

import argparse
import base64
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support import k8s  # noqa: E402
from tests.support.controller import Controller, ManifestsCluster  # noqa: E402
from tests.support.htpasswd import basic_auth_secret  # noqa: E402
from tests.support.net import free_port, wait_for  # noqa: E402

PREFIX = "nginx.ingress.kubernetes.io"
SCHEMES = ("apr1", "sha", "sha512", "bcrypt", "yescrypt")
USER, PASSWORD = "alice", "correct horse battery staple"


def start_backend(work: Path) -> tuple[subprocess.Popen, int]:
    """A plain nginx answering 200 to everything: fast enough not to be the bottleneck."""
    port = free_port()
    conf = work / "backend.conf"
    conf.write_text(f"daemon off; worker_processes 1; pid {work}/backend.pid; error_log stderr;\n"
                    f"events {{ worker_connections 1024; }}\n"
                    f"http {{ access_log off; server {{ listen 127.0.0.1:{port}; "
                    f"location / {{ return 200 \"ok\"; }} }} }}\n")
    proc = subprocess.Popen(["nginx", "-p", str(work), "-c", str(conf)], stderr=subprocess.DEVNULL)
    return proc, port


def wrk(port: int, host: str, seconds: int, authorization: str | None) -> float:
    args = ["wrk", "-t1", "-c32", f"-d{seconds}s", "-H", f"Host: {host}"]
    if authorization:
        args += ["-H", f"Authorization: {authorization}"]
    out = subprocess.run([*args, f"http://127.0.0.1:{port}/"], capture_output=True, text=True, check=True).stdout
    non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if non_2xx:
        raise RuntimeError(f"{host}: {non_2xx[1]} answers were not 200:\n{out}")
    return float(re.search(r"Requests/sec:\s+([0-9.]+)", out)[1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=5)
    options = parser.parse_args()
    if not shutil.which("wrk"):
        sys.exit("wrk is not installed (apt-get install wrk)")
    work = Path(tempfile.mkdtemp(prefix="bench-auth-", dir="/tmp"))
    os.chmod(work, 0o711)  # nginx's workers (nobody) read the htpasswd files inside
    backend, backend_port = start_backend(work)
    cluster = ManifestsCluster(work / "manifests")
    cluster.apply(k8s.ingress_class("nginx"), k8s.service("backend"),
                  k8s.endpoint_slice("backend", ["127.0.0.1"], backend_port))
    controller = Controller(work, [f"--manifests={cluster.directory}", "--log-level=warning"]).start()
    credentials = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    try:
        cluster.apply(k8s.ingress("plain", [k8s.rule("plain.bench", ("/", "Prefix", "backend", 80))]))
        for scheme in SCHEMES:
            cluster.apply(basic_auth_secret(f"auth-{scheme}", {USER: PASSWORD}, scheme=scheme))
            cluster.apply(k8s.ingress(f"auth-{scheme}", [k8s.rule(f"{scheme}.bench", ("/", "Prefix", "backend", 80))],
                                      annotations={f"{PREFIX}/auth-type": "basic",
                                                   f"{PREFIX}/auth-secret": f"auth-{scheme}"}))
        for scheme in SCHEMES:
            wait_for(lambda: controller.get("/", f"{scheme}.bench", auth=(USER, PASSWORD)).status_code == 200, 30,
                     what=f"{scheme}.bench served")
        wait_for(lambda: controller.get("/", "plain.bench").status_code == 200, 30, what="plain.bench served")
        results: dict[str, list[float]] = {name: [] for name in ("plain", *SCHEMES)}
        for _ in range(options.rounds):
            for name in results:
                results[name].append(wrk(controller.http_port, f"{name}.bench", options.seconds,
                                         None if name == "plain" else credentials))
                time.sleep(0.5)
    finally:
        controller.stop()
        backend.terminate()
        backend.wait()
        shutil.rmtree(work, ignore_errors=True)
    plain = statistics.median(results["plain"])
    print(f"basic auth: requests/s through the controller, wrk -t1 -c32 keep-alive, {options.seconds} s, "
          f"median of {options.rounds} rounds, backend nginx `return 200`")
    for name, values in results.items():
        median = statistics.median(values)
        label = "no authentication (baseline)" if name == "plain" else f"auth-type basic, {name} hash"
        print(f"  {label:34s} {median:10.0f} req/s   {median / plain:6.2f} x baseline")


if __name__ == "__main__":
    main()

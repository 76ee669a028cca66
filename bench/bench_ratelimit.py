"""Rate limits: requests/s through a rate-limited location beside a plain one, same nginx, same run.

pyngress's nginx (2 workers) routes two hosts to the same backend (a plain nginx answering `return 200`):
one through the default profile, one through a profile with limit-rps and limit-connections set far above
what the run reaches (so nothing is refused: the figure is the cost of counting every request in the
shared-memory zones, per client address). wrk (keep-alive, -t1 -c64) alternates between the hosts in
rounds; medians with the spread, and the ratio as the median of same-round ratios.
Run: .venv/bin/python bench/bench_ratelimit.py [--rounds 5] [--seconds 4]
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
from typing import Callable, Mapping, TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from services.nginxconf.config import LocationProfile, RateLimit  # noqa: E402
from services.syncer.model.types import HostRoutes, Route  # noqa: E402
from tests.integration.nginx.conftest import Nginx, route  # noqa: E402
from tests.support.net import free_port, wait_for  # noqa: E402

BACKEND_CONF = """daemon off; master_process on; worker_processes 1; pid {dir}/backend.pid; error_log stderr error;
events {{ worker_connections 4096; }}
http {{
    access_log off; keepalive_requests 100000;
    client_body_temp_path {dir}/t; proxy_temp_path {dir}/t; fastcgi_temp_path {dir}/t; uwsgi_temp_path {dir}/t;
    scgi_temp_path {dir}/t;
    server {{ listen 127.0.0.1:{port}; location / {{ return 200 "ok\\n"; }} }}
}}
"""
LIMITED = LocationProfile.of(rate_limit=RateLimit(zone="bench_limited", rps=1_000_000, connections=65535))
HOSTS = {"plain.bench": "default", "limited.bench": LIMITED.name}
T = TypeVar("T")


def start_backend(directory: Path) -> tuple[subprocess.Popen, int]:
    port = free_port()
    (directory / "t").mkdir()
    conf = directory / "backend.conf"
    conf.write_text(BACKEND_CONF.format(dir=directory, port=port))
    proc = subprocess.Popen(["nginx", "-p", f"{directory}/", "-c", str(conf)], stderr=subprocess.DEVNULL)
    return proc, port


def wrk(port: int, host: str, seconds: int) -> float:
    out = subprocess.run(["wrk", "-t1", "-c64", f"-d{seconds}s", "-H", f"Host: {host}", f"http://127.0.0.1:{port}/"],
                         capture_output=True, text=True, check=True).stdout
    if "Non-2xx" in out:
        raise RuntimeError(f"{host} answered errors under load:\n{out}")
    return float(re.search(r"Requests/sec:\s+([0-9.]+)", out).group(1))


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):,.0f} req/s ({min(values):,.0f}-{max(values):,.0f})"


def alternate_hosts(routes: Mapping[str, Route | HostRoutes], backends: dict[str, int], *,
                    profiles: list[LocationProfile], rounds: int, seconds: int,
                    measure: Callable[[int, str, int], T] = wrk) -> dict[str, list[T]]:
    """Requests/s (or what `measure(port, host, seconds)` gives) through each host of `routes` (host → its "/" route,
    or its whole HostRoutes), wrk alternating between them in `rounds`, on pyngress's nginx with `profiles`; each
    backend of `backends` (name → how many endpoints) is the same plain nginx answering 200."""
    if not shutil.which("wrk"):
        sys.exit("wrk is not installed (apt-get install wrk)")
    base = Path(tempfile.mkdtemp(prefix="bench-hosts-", dir="/tmp"))
    os.chmod(base, 0o711)
    backend, backend_port = start_backend(base)
    (base / "pyngress").mkdir(mode=0o711)
    nginx = Nginx(base / "pyngress")
    try:
        nginx.start()
        assert nginx.apply(nginx.config(profiles))
        nginx.push({host: r if isinstance(r, HostRoutes) else HostRoutes(prefix={"/": r}) for host, r in routes.items()},
                   {name: [f"127.0.0.1:{backend_port}"] * count for name, count in backends.items()})
        for host in routes:
            wait_for(lambda: nginx.get("/", host=host).status == 200, 10, what=f"{host} served")
        results: dict[str, list[T]] = {host: [] for host in routes}
        for _ in range(rounds):
            for host in routes:
                results[host].append(measure(nginx.http_port, host, seconds))
                time.sleep(0.5)
        return results
    finally:
        nginx.close()
        backend.send_signal(signal.SIGQUIT)
        backend.wait(timeout=10)
        shutil.rmtree(base, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=int, default=4)
    args = parser.parse_args()
    results = alternate_hosts({host: route("app", profile) for host, profile in HOSTS.items()}, {"app": 1},
                              profiles=[LIMITED], rounds=args.rounds, seconds=args.seconds)
    plain, limited = results["plain.bench"], results["limited.bench"]
    print(f"## rate-limited location vs plain, wrk -t1 -c64 keep-alive, {args.seconds} s, {args.rounds} rounds")
    print(f"plain location:        {spread(plain)}")
    print(f"limit-rps + limit-connections: {spread(limited)}")
    print(f"ratio limited/plain:   {statistics.median(l / p for l, p in zip(limited, plain)):.3f}")


if __name__ == "__main__":
    main()

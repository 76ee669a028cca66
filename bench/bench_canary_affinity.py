"""Canary + cookie affinity: requests/s through a location whose route has a canary (weight 50, a header and a
cookie to check first) and cookie affinity, beside a plain one, same nginx, same run.

The per-request Lua of such a route: the canary decision (header, cookie, then weight), the affinity pick
(the cookie's endpoint, or a random one and a Set-Cookie: wrk sends no cookie, so every request takes that
longer way) over four endpoints per backend, then the balancer. Both hosts go to the same plain nginx backend
(`return 200`). wrk (keep-alive, -t1 -c64) alternates between the hosts in rounds; medians with the spread,
and the ratio as the median of same-round ratios. The issue's bound: the Lua costs under 10% of throughput.
Run: .venv/bin/python bench/bench_canary_affinity.py [--rounds 5] [--seconds 4]
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_ratelimit import spread, start_backend, wrk  # noqa: E402
from services.syncer.annotations.base import AffinityPolicy, CanaryPolicy  # noqa: E402
from services.syncer.model_types import CanaryRoute, HostRoutes, Route  # noqa: E402
from tests.integration.nginx.conftest import Nginx, route  # noqa: E402
from tests.support.net import wait_for  # noqa: E402

CANARY = Route(backend="app", ingress="default/app", affinity=AffinityPolicy(cookie="route"),
               canary=CanaryRoute(backend="app-canary", ingress="default/app-canary",
                                  policy=CanaryPolicy(header="X-Canary", cookie="canary", weight=50)))
HOSTS = {"plain.bench": route("app"), "canary.bench": CANARY}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=int, default=4)
    args = parser.parse_args()
    if not shutil.which("wrk"):
        sys.exit("wrk is not installed (apt-get install wrk)")
    base = Path(tempfile.mkdtemp(prefix="bench-canary-", dir="/tmp"))
    os.chmod(base, 0o711)
    backend, backend_port = start_backend(base)
    (base / "pyngress").mkdir(mode=0o711)
    nginx = Nginx(base / "pyngress")
    # Four endpoints per backend, all the same server (distinct loopback addresses reach it through 127.0.0.1's
    # listener only, so the same address four times: the Lua does its work over four peers either way).
    endpoints = [f"127.0.0.1:{backend_port}"] * 4
    try:
        nginx.start()
        assert nginx.apply(nginx.config())
        nginx.push({host: HostRoutes(prefix={"/": r}) for host, r in HOSTS.items()},
                   {"app": endpoints, "app-canary": endpoints})
        for host in HOSTS:
            wait_for(lambda: nginx.get("/", host=host).status == 200, 10, what=f"{host} served")
        results: dict[str, list[float]] = {host: [] for host in HOSTS}
        for _ in range(args.rounds):
            for host in HOSTS:
                results[host].append(wrk(nginx.http_port, host, args.seconds))
                time.sleep(0.5)
    finally:
        nginx.close()
        backend.send_signal(signal.SIGQUIT)
        backend.wait(timeout=10)
        shutil.rmtree(base, ignore_errors=True)
    plain, canary = results["plain.bench"], results["canary.bench"]
    print(f"## canary + affinity location vs plain, wrk -t1 -c64 keep-alive, {args.seconds} s, {args.rounds} rounds")
    print(f"plain location:            {spread(plain)}")
    print(f"canary + affinity:         {spread(canary)}")
    print(f"ratio canary+affinity/plain: {statistics.median(c / p for c, p in zip(canary, plain)):.3f}")


if __name__ == "__main__":
    main()

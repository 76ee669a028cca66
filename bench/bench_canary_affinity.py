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
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_ratelimit import alternate_hosts, spread  # noqa: E402
from services.syncer.annotations.base import AffinityPolicy, CanaryPolicy  # noqa: E402
from services.syncer.model.types import CanaryRoute, Route  # noqa: E402
from tests.integration.nginx.conftest import route  # noqa: E402

CANARY = Route(backend="app", ingress="default/app", affinity=AffinityPolicy(cookie="route"),
               canary=CanaryRoute(backend="app-canary", ingress="default/app-canary",
                                  policy=CanaryPolicy(header="X-Canary", cookie="canary", weight=50)))
HOSTS = {"plain.bench": route("app"), "canary.bench": CANARY}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=int, default=4)
    args = parser.parse_args()
    # Four endpoints per backend, all the same server: the Lua does its work over four peers either way.
    results = alternate_hosts(HOSTS, {"app": 4, "app-canary": 4}, profiles=[], rounds=args.rounds,
                              seconds=args.seconds)
    plain, canary = results["plain.bench"], results["canary.bench"]
    print(f"## canary + affinity location vs plain, wrk -t1 -c64 keep-alive, {args.seconds} s, {args.rounds} rounds")
    print(f"plain location:            {spread(plain)}")
    print(f"canary + affinity:         {spread(canary)}")
    print(f"ratio canary+affinity/plain: {statistics.median(c / p for c, p in zip(canary, plain)):.3f}")


if __name__ == "__main__":
    main()

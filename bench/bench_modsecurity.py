"""ModSecurity with the OWASP CRS: requests/s and p99 through an Ingress with the WAF beside the same Ingress
without it, same nginx, same run; and what each WAF profile adds to `nginx -t` and to nginx's memory.

pyngress's nginx (2 workers) routes three hosts to the same backend (a plain nginx answering `return 200`): the
default profile; enable-modsecurity + enable-owasp-core-rules (the recommended rules in detection-only mode and
the CRS at paranoia level 1); and the same with a modsecurity-snippet that includes ingress-nginx's recommended
file and says SecRuleEngine On (blocking). The requests are ordinary (a browser's User-Agent and Accept, a short
query string), so the figure is the cost of running every CRS rule on a request that passes. wrk (keep-alive,
-t2 -c32, --latency) alternates between the hosts in rounds; medians with the spread, and the ratios as the
median of same-round ratios.
Run: .venv/bin/python bench/bench_modsecurity.py [--rounds 5] [--seconds 4]
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

from bench.bench_dataplane import wrk  # noqa: E402
from bench.bench_ratelimit import start_backend  # noqa: E402
from services.nginxconf.config import LocationProfile  # noqa: E402
from services.nginxconf.render import render  # noqa: E402
from services.syncer.annotations import Risk, parse_annotations  # noqa: E402
from services.syncer.model.types import HostRoutes  # noqa: E402
from tests.integration.nginx.conftest import Nginx, route  # noqa: E402
from tests.support.net import wait_for  # noqa: E402

PREFIX = "nginx.ingress.kubernetes.io"
WAF = {"enable-modsecurity": "true", "enable-owasp-core-rules": "true"}
BLOCKING = {**WAF, "modsecurity-snippet": "Include /etc/nginx/modsecurity/modsecurity.conf\nSecRuleEngine On"}
HEADERS = {"User-Agent": "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0",
           "Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}
PATH = "/products?id=42&sort=price&q=running+shoes"


def profile(annotations: dict[str, str], **extra: str) -> LocationProfile:
    parsed = parse_annotations({f"{PREFIX}/{k}": v for k, v in {**annotations, **extra}.items()}, prefix=PREFIX,
                               max_risk=Risk.CRITICAL, allow_snippets=True)
    return parsed.profile


def spread(values: list[float], unit: str, scale: float = 1.0) -> str:
    values = [v * scale for v in values]
    return f"{statistics.median(values):,.{1 if scale != 1 else 0}f}{unit} ({min(values):,.1f}-{max(values):,.1f})"


def throughput(nginx: Nginx, hosts: dict[str, LocationProfile], rounds: int, seconds: int
               ) -> dict[str, list[tuple[float, float]]]:
    nginx.push({host: HostRoutes(prefix={"/": route("app", p.name)}) for host, p in hosts.items()},
               {"app": [f"127.0.0.1:{nginx.backend_port}"]})  # type: ignore[attr-defined]
    for host in hosts:
        wait_for(lambda: nginx.get(PATH, host=host, headers=HEADERS).status == 200, 10, what=f"{host} served")
    results: dict[str, list[tuple[float, float]]] = {host: [] for host in hosts}
    for _ in range(rounds):
        for host in hosts:
            results[host].append(wrk(f"http://127.0.0.1:{nginx.http_port}{PATH}", seconds, {"Host": host, **HEADERS}))
            time.sleep(0.5)
    return results


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def profile_cost(nginx: Nginx, counts: list[int]) -> list[tuple[int, float, float]]:
    """(WAF profiles, nginx -t seconds, master RSS MiB after the reload) for each count of distinct profiles."""
    rows = []
    for count in counts:
        profiles = [profile(WAF, **{"proxy-read-timeout": str(10 + i)}) for i in range(count)]
        conf = render(nginx.config(profiles))
        started = time.monotonic()
        nginx.run(nginx.reloader.test(conf))
        tested = time.monotonic() - started
        assert nginx.apply(nginx.config(profiles))
        time.sleep(1)
        rows.append((count, tested, rss_mib(nginx.master_pid())))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=int, default=4)
    args = parser.parse_args()
    if not shutil.which("wrk"):
        sys.exit("wrk is not installed (apt-get install wrk)")
    base = Path(tempfile.mkdtemp(prefix="bench-modsecurity-", dir="/tmp"))
    os.chmod(base, 0o711)
    backend, backend_port = start_backend(base)
    (base / "pyngress").mkdir(mode=0o711)
    nginx = Nginx(base / "pyngress")
    nginx.backend_port = backend_port  # type: ignore[attr-defined]
    hosts = {"plain.bench": LocationProfile("default"), "waf.bench": profile(WAF), "blocking.bench": profile(BLOCKING)}
    try:
        nginx.start()
        # First, while the master's heap holds no rules freed by an earlier configuration.
        costs = profile_cost(nginx, [0, 1, 10])
        assert nginx.apply(nginx.config([p for p in hosts.values() if p.name != "default"]))
        results = throughput(nginx, hosts, args.rounds, args.seconds)
    finally:
        nginx.close()
        backend.send_signal(signal.SIGQUIT)
        backend.wait(timeout=10)
        shutil.rmtree(base, ignore_errors=True)
    plain = results["plain.bench"]
    print(f"## WAF + CRS vs plain, wrk -t2 -c32 keep-alive --latency, {args.seconds} s, {args.rounds} rounds")
    for host, label in (("plain.bench", "plain Ingress"), ("waf.bench", "WAF + CRS, detection-only"),
                        ("blocking.bench", "WAF + CRS, SecRuleEngine On")):
        runs = results[host]
        line = f"{label:30} {spread([r for r, _ in runs], ' req/s')}  p99 {spread([p for _, p in runs], ' ms', 1000)}"
        if host != "plain.bench":
            rate = statistics.median(w[0] / p[0] for w, p in zip(runs, plain))
            p99 = statistics.median(w[1] / p[1] for w, p in zip(runs, plain))
            line += f"  ratio req/s {rate:.2f}, p99 {p99:.2f}x"
        print(line)
    print("## distinct WAF + CRS profiles: nginx -t, and the master's RSS after the reload")
    for count, tested, rss in costs:
        print(f"{count:3} profiles: nginx -t {tested:.2f} s, master RSS {rss:,.0f} MiB")


if __name__ == "__main__":
    main()

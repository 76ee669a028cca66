"""TLS Terminate listeners: `pyngress proxy` ending TLS (services/proxy/terminate.py) beside nginx's stream module
doing the same (`listen ... ssl; proxy_pass`), same run, to the same plain backend (an nginx http server).

New TLS connections per second (GET of a 2-byte page, `Connection: close`, from several client processes and
threads) and CPU per connection of the proxy process and of the nginx stream worker, in rounds that alternate the
two paths (medians). Why it matters: the choice of where Terminate runs (docs/gateway-api.md).
Run: .venv/bin/python bench/bench_terminate.py [--rounds N]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_passthrough import HOST, connection_rate  # noqa: E402
from tests.integration.proxy.harness import (Nginx, Pki, ProxyProcess, TablePublisher, cpu_times,  # noqa: E402
                                             free_port, http_temp_paths, wait_listening)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--threads", type=int, default=8)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, ProcessPoolExecutor(args.processes) as pool:
        work = Path(tmp)
        os.chmod(work, 0o755)
        pki_dir = work / "pki"
        pki_dir.mkdir()
        pki = Pki(pki_dir)
        cert, key = pki.issue(HOST, [HOST])
        backend_port, stream_port, proxy_port = free_port(), free_port(), free_port()
        backend = Nginx(work / "backend", f"""http {{ access_log off; {http_temp_paths(work / "backend")}
  server {{ listen 127.0.0.1:{backend_port}; location / {{ return 200 "ok"; }} }} }}""")
        stream = Nginx(work / "stream", f"""stream {{ server {{ listen 127.0.0.1:{stream_port} ssl;
  ssl_certificate {cert}; ssl_certificate_key {key}; proxy_pass 127.0.0.1:{backend_port}; }} }}""")
        run_dir = work / "run"
        run_dir.mkdir(mode=0o700)
        table = TablePublisher(run_dir)
        seq = table.replace_all({f"host/{HOST}": {
            "backends": [{"weight": 1, "endpoints": [f"127.0.0.1:{backend_port}"]}],
            "terminate": {"cert": cert.read_text(), "key": key.read_text()}}, "config": {"use_proxy_protocol": False}})
        proxy = ProxyProcess(proxy_port, run_dir, log_path=work / "proxy.log").wait_serving(seq)
        try:
            for port in (backend_port, stream_port, proxy_port):
                wait_listening(port)
            paths = {"pyngress proxy": (proxy_port, proxy.proc.pid), "nginx stream ssl": (stream_port, stream.worker_pids()[0])}
            rates: dict[str, list[float]] = {name: [] for name in paths}
            cpu: dict[str, float] = dict.fromkeys(paths, 0.0)
            count: dict[str, int] = dict.fromkeys(paths, 0)
            for r in range(args.rounds):
                order = list(paths) if r % 2 == 0 else list(reversed(paths))
                for name in order:
                    port, pid = paths[name]
                    before = sum(cpu_times(pid))
                    rate, total = connection_rate(pool, port, str(pki.ca), args.seconds, args.processes, args.threads)
                    cpu[name] += sum(cpu_times(pid)) - before
                    count[name] += total
                    rates[name].append(rate)
                print(f"round {r + 1}/{args.rounds}: " + "; ".join(f"{n} {rates[n][-1]:.0f} conn/s" for n in paths))
            load = os.getloadavg()[0]
            print(f"\n{args.rounds} rounds of {args.seconds:g} s per path, {args.processes} client processes x "
                  f"{args.threads} threads; load average {load:.1f}")
            for name in paths:
                print(f"{name:18} {statistics.median(rates[name]):6.0f} conn/s median "
                      f"({min(rates[name]):.0f}-{max(rates[name]):.0f}), CPU {cpu[name] / count[name] * 1e6:.0f} µs/conn")
        finally:
            proxy.stop()
            table.close()
            stream.stop()
            backend.stop()


if __name__ == "__main__":
    main()

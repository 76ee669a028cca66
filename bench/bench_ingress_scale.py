"""Time and peak memory to sync 1,000 and 10,000 Ingresses, beside a hand-written static nginx config.

pyngress: a running controller (manifests mode) is given N Ingresses (each its own host, Service and
EndpointSlice, one file per hundred Ingresses); the clock runs from the files landing until the last host
is answered by its backend. Peak memory is the sum of VmHWM of nginx (master + workers), the watcher and
the syncer.

Baseline, in the same run: the same N hosts as a static nginx.conf written by hand (one server block per
host, `proxy_pass` to the backend, no Lua module), `nginx -t`, then a HUP reload of a running nginx,
until the last host answers. Peak memory is nginx's (master + workers).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support import k8s  # noqa: E402
from tests.support.controller import Controller, EchoBackends, ManifestsCluster  # noqa: E402
from tests.support.net import free_port  # noqa: E402

SIZES = (1000, 10000)
PER_FILE = 100


def host(i: int) -> str:
    return f"h{i}.scale.example.com"


def vm_hwm_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def nginx_pids(master: int) -> list[int]:
    children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
    return [master, *map(int, children)]


def wait_served(port: int, hosts: list[str], deadline: float) -> None:
    session = requests.Session()
    for h in hosts:
        while True:
            try:
                if session.get(f"http://127.0.0.1:{port}/", headers={"Host": h}, timeout=5).status_code == 200:
                    break
            except requests.RequestException:
                pass
            if time.monotonic() > deadline:
                raise SystemExit(f"{h} not served before the deadline")
            time.sleep(0.01)


def scale_manifests(n: int, ip: str, port: int) -> list[tuple[str, str]]:
    """N Ingresses, each with its own host (host(i)), Service and EndpointSlice (ip:port), as manifest files
    of PER_FILE Ingresses: (file name, YAML)."""
    files = []
    for start in range(0, n, PER_FILE):
        docs = []
        for i in range(start, min(n, start + PER_FILE)):
            docs += [k8s.service(f"s{i}"), k8s.endpoint_slice(f"s{i}", [ip], port),
                     k8s.ingress(f"i{i}", [k8s.rule(host(i), ("/", "Prefix", f"s{i}", 80))])]
        files.append((f"scale-{start}.yaml", yaml.safe_dump_all(docs)))
    return files


def pyngress_sync(n: int, echo: EchoBackends, ip: str) -> tuple[float, float, int, float]:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        cluster = ManifestsCluster(work / "manifests")
        cluster.apply(k8s.ingress_class("nginx"))
        controller = Controller(work, [f"--manifests={cluster.directory}", "--log-level=warning"]).start()
        try:
            reloads = controller.metric("nginx_ingress_controller_success")
            sync_seconds = controller.metric("pyngress_sync_duration_seconds_sum", kind="total")
            files = [(f".{name}", text) for name, text in scale_manifests(n, ip, echo.port)]
            for name, text in files:  # written hidden (the watcher skips dot files), then renamed at once
                (cluster.directory / name).write_text(text)
            t0 = time.monotonic()
            for name, _ in files:
                os.replace(cluster.directory / name, cluster.directory / name[1:])
            wait_served(controller.http_port, [host(n - 1), host(0), host(n // 2)], time.monotonic() + 600)
            elapsed = time.monotonic() - t0
            wait_served(controller.http_port, [host(i) for i in range(0, n, max(1, n // 50))], time.monotonic() + 60)
            pids = nginx_pids(controller.pid("nginx")) + [controller.pid("watcher"), controller.pid("syncer")]
            peak = sum(vm_hwm_kib(p) for p in pids)
            reloads = controller.metric("nginx_ingress_controller_success") - reloads
            sync_seconds = controller.metric("pyngress_sync_duration_seconds_sum", kind="total") - sync_seconds
        finally:
            controller.stop()
    return elapsed, sync_seconds, peak, reloads


STATIC_TEMPLATE = """
daemon off; master_process on; worker_processes auto; pid {prefix}/nginx.pid; error_log stderr error;
events {{ worker_connections 1024; }}
http {{
  access_log off;
  client_body_temp_path {prefix}/tmp; proxy_temp_path {prefix}/tmp; fastcgi_temp_path {prefix}/tmp;
  uwsgi_temp_path {prefix}/tmp; scgi_temp_path {prefix}/tmp;
  server_names_hash_bucket_size 128; server_names_hash_max_size 65536;
  server {{ listen {port} default_server; return 404; }}
{servers}
}}
"""


def static_baseline(n: int, echo: EchoBackends, ip: str) -> tuple[float, float, int]:
    with tempfile.TemporaryDirectory() as tmp:
        prefix = Path(tmp)
        (prefix / "tmp").mkdir()
        os.chmod(tmp, 0o755)
        port = free_port()
        conf = prefix / "nginx.conf"
        conf.write_text(STATIC_TEMPLATE.format(prefix=prefix, port=port, servers=""))
        # Its own session, as the controller's (autogroup scheduling: see bench_dataplane.start_nginx).
        nginx = subprocess.Popen(["nginx", "-p", str(prefix), "-c", str(conf)], start_new_session=True)
        try:
            time.sleep(0.5)
            servers = "\n".join(
                f"  server {{ listen {port}; server_name {host(i)}; location / {{ proxy_pass http://{ip}:{echo.port}; }} }}"
                for i in range(n))
            t0 = time.monotonic()
            conf.write_text(STATIC_TEMPLATE.format(prefix=prefix, port=port, servers=servers))
            subprocess.run(["nginx", "-t", "-q", "-p", str(prefix), "-c", str(conf)], check=True)
            test_seconds = time.monotonic() - t0
            nginx.send_signal(signal.SIGHUP)
            wait_served(port, [host(n - 1), host(0), host(n // 2)], time.monotonic() + 600)
            elapsed = time.monotonic() - t0
            time.sleep(1)  # old workers gone, new ones settled
            peak = sum(vm_hwm_kib(p) for p in nginx_pids(nginx.pid))
        finally:
            nginx.send_signal(signal.SIGQUIT)
            nginx.wait(30)
    return elapsed, test_seconds, peak


def main() -> None:
    echo = EchoBackends()
    ip = echo.start("SCALE")
    rows = []
    try:
        for n in SIZES:
            base_s, base_test_s, base_kib = static_baseline(n, echo, ip)
            ours_s, syncer_s, ours_kib, reloads = pyngress_sync(n, echo, ip)
            rows.append((n, ours_s, syncer_s, base_s, base_test_s, ours_kib, base_kib, reloads))
    finally:
        echo.stop()
    print("full sync of N Ingresses (files land → last host served), pyngress vs static nginx.conf without Lua")
    print("  end to end: files renamed into place → last host served (includes YAML parsing by the watcher)")
    print("  syncer: its own time (model, render, push to nginx), summed over the syncs the burst caused")
    print(f"{'N':>6} {'end to end s':>13} {'syncer s':>9} {'static s':>9} {'(nginx -t)':>10} {'e2e ratio':>10} "
          f"{'syncer ratio':>13} {'pyngress MiB':>13} {'static MiB':>11} {'reloads':>8}")
    for n, ours, syncer, base, base_test, ours_kib, base_kib, reloads in rows:
        print(f"{n:>6} {ours:>13.2f} {syncer:>9.2f} {base:>9.2f} {base_test:>10.2f} {ours / base:>10.2f} "
              f"{syncer / base:>13.2f} {ours_kib / 1024:>13.0f} {base_kib / 1024:>11.0f} {reloads:>8.0f}")
    print("target: a full sync of 10,000 Ingresses within 3x the baseline")


if __name__ == "__main__":
    main()

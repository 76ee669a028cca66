"""The Kubernetes API source: Ingress created in the API → traffic served, and memory at 10,000 objects.

1. Latency: an Ingress (its own host, for a Service whose endpoint already answers) is created through
   the official client; the clock runs until a request for its host is answered by the backend. 50 times
   on a near-empty cluster, then again at each size (`--sizes`, default 1,000, 10,000 and 30,000
   Ingresses, Services and EndpointSlices in the store). At each size also the update of one existing
   Ingress (its path sent to another Service) until the new backend answers, 20 times: this must stay flat
   as the cluster grows. Baselines in the same run: the create call alone (the API's own round trip), and one
   request through nginx to a host already served (what a single poll costs).
2. Memory at each size: VmRSS and VmHWM of the watcher and the syncer, beside the raw JSON size of those
   objects as the API serves them and the memory of a bare Python process holding them as dicts (json.loads
   of the same bytes), and of one holding nothing.

The API server is the test server (tests/kube_api) in this process; run alone with
`.venv/bin/python bench/bench_api.py [--sizes 1000,10000,30000]`.
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests
from kubernetes import client

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.kube_api import KubeApiServer  # noqa: E402
from tests.support import k8s  # noqa: E402
from tests.support.controller import Controller, EchoBackends  # noqa: E402
from tests.support.kube_cluster import ApiCluster  # noqa: E402

LATENCY_SAMPLES = 50
UPDATE_SAMPLES = 20
SIZES = (1_000, 10_000, 30_000)
CREATE_THREADS = 8
KINDS = ("Ingress", "Service", "EndpointSlice")
# What a bare interpreter holding the objects does: the baseline for the watcher's and syncer's memory.
HOLDER = """
import json, sys
objects = json.loads(open(sys.argv[1], "rb").read())
status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines() if ":" in line)
print(json.dumps({k: int(status[k].split()[0]) for k in ("VmRSS", "VmHWM")}))
"""


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(pct / 100 * (len(ordered) - 1))))]


def memory_kib(pid: int) -> dict[str, int]:
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return {k: int(fields[k].split()[0]) for k in ("VmRSS", "VmHWM")}


def wait_answered(session: requests.Session, controller: Controller, host: str, want: str,
                  timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    url = f"http://127.0.0.1:{controller.http_port}/"
    while time.monotonic() < deadline:
        resp = session.get(url, headers={"Host": host}, timeout=5)
        if resp.status_code == 200 and resp.json()["backend"] == want:
            return
        time.sleep(0.002)
    raise RuntimeError(f"{host} not answered by {want} within {timeout} s (log: {controller.log_path})")


def measure_latency(cluster: ApiCluster, controller: Controller, label: str) -> tuple[list[float], list[float]]:
    """(create → served, create call alone) in seconds, LATENCY_SAMPLES times."""
    session = requests.Session()
    served, calls = [], []
    for i in range(LATENCY_SAMPLES):
        host = f"{label}-{i}.latency.example.com"
        t0 = time.perf_counter()
        cluster.apply(k8s.ingress(f"{label}-{i}", [k8s.rule(host, ("/", "Prefix", "latency", 80))]))
        calls.append(time.perf_counter() - t0)
        wait_answered(session, controller, host, "LAT")
        served.append(time.perf_counter() - t0)
    return served, calls


def one_request_seconds(controller: Controller, host: str) -> float:
    session = requests.Session()
    url = f"http://127.0.0.1:{controller.http_port}/"
    samples = []
    for _ in range(LATENCY_SAMPLES):
        t0 = time.perf_counter()
        session.get(url, headers={"Host": host}, timeout=5)
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def scale_objects(i: int, backend_ip: str, port: int) -> list[dict]:
    name = f"s{i}"
    return [k8s.service(name), k8s.endpoint_slice(name, [backend_ip], port),
            k8s.ingress(name, [k8s.rule(f"{name}.scale.example.com", ("/", "Prefix", name, 80))])]


def create_at_scale(cluster: ApiCluster, backend_ip: str, port: int, start: int, end: int) -> float:
    t0 = time.perf_counter()
    with ThreadPoolExecutor(CREATE_THREADS) as pool:
        for _ in pool.map(lambda i: cluster.apply(*scale_objects(i, backend_ip, port)), range(start, end)):
            pass
    return time.perf_counter() - t0


def measure_updates(cluster: ApiCluster, controller: Controller, size: int) -> list[float]:
    """Seconds from updating an existing Ingress (its path to the "latency" Service) until the new backend
    answers for its host, UPDATE_SAMPLES times, on Ingresses spread over the cluster. Each is put back and served
    again before the next: the time of one update, not of one coalesced with the last one's undoing."""
    session = requests.Session()
    served = []
    for n in range(UPDATE_SAMPLES):
        name = f"s{(n * 7919) % size}"
        host = f"{name}.scale.example.com"
        t0 = time.perf_counter()
        cluster.apply(k8s.ingress(name, [k8s.rule(host, ("/", "Prefix", "latency", 80))]))
        wait_answered(session, controller, host, "LAT")
        served.append(time.perf_counter() - t0)
        cluster.apply(k8s.ingress(name, [k8s.rule(host, ("/", "Prefix", name, 80))]))
        wait_answered(session, controller, host, "SCALE")
    return served


def holder_baseline(api: KubeApiServer, work: Path) -> tuple[int, dict[str, int], dict[str, int]]:
    """(raw JSON bytes of the objects, memory of a Python process holding them, of one holding nothing)."""
    raw = json.dumps({kind: api.objects(kind) for kind in KINDS}).encode()
    dump = work / "objects.json"
    dump.write_bytes(raw)
    empty = work / "empty.json"
    empty.write_text("{}")
    run = lambda path: json.loads(subprocess.run([sys.executable, "-c", HOLDER, str(path)], check=True,
                                                 capture_output=True, text=True).stdout)
    return len(raw), run(dump), run(empty)


def ms(values: list[float]) -> str:
    scaled = [v * 1000 for v in values]
    return f"p50 {percentile(scaled, 50):7.1f} ms   p99 {percentile(scaled, 99):7.1f} ms   max {max(scaled):7.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)),
                        help="cluster sizes to measure at, comma-separated (default %(default)s)")
    sizes = sorted(int(size) for size in parser.parse_args().sizes.split(","))
    echo = EchoBackends()
    work = Path(tempfile.mkdtemp(prefix="bapi-"))  # short: ipc socket paths live under it
    api = KubeApiServer().start()
    configuration = api.configuration()
    configuration.connection_pool_maxsize = CREATE_THREADS
    api_client = client.ApiClient(configuration)
    cluster = ApiCluster(api_client)
    controller = Controller(work, [f"--kubeconfig={api.write_kubeconfig(work / 'kubeconfig')}",
                                   "--log-level=warning", "--update-status=false"])
    results = []
    try:
        lat_ip, scale_ip = echo.start("LAT"), echo.start("SCALE")
        cluster.apply(k8s.ingress_class("nginx"), k8s.service("latency"),
                      k8s.endpoint_slice("latency", [lat_ip], echo.port))
        controller.start()
        small_served, small_calls = measure_latency(cluster, controller, "small")
        one_request = one_request_seconds(controller, "small-0.latency.example.com")
        reloads_before = controller.metric("nginx_ingress_controller_success")
        created = 0
        for size in sizes:
            create_seconds = create_at_scale(cluster, scale_ip, echo.port, created, size)
            t0 = time.perf_counter()
            wait_answered(requests.Session(), controller, f"s{size - 1}.scale.example.com", "SCALE", timeout=900)
            all_served_after_create = time.perf_counter() - t0
            created = size
            time.sleep(2)  # let the last batches settle before reading memory
            memory = {program: memory_kib(controller.pid(program)) for program in ("watcher", "syncer")}
            served, calls = measure_latency(cluster, controller, f"at{size}")
            updates = measure_updates(cluster, controller, size)
            results.append((size, create_seconds, all_served_after_create, memory, served, calls, updates))
        reloads_after = controller.metric("nginx_ingress_controller_success")
        raw_bytes, holder, empty = holder_baseline(api, work)
    finally:
        controller.stop()
        api.stop()
        echo.stop()
        shutil.rmtree(work, ignore_errors=True)

    print(f"Ingress created in the API → its host answered by the backend, {LATENCY_SAMPLES} Ingresses each")
    print(f"  near-empty cluster:                  {ms(small_served)}")
    print(f"  baseline, the create call alone:     {ms(small_calls)} (near-empty)")
    print(f"  baseline, one request through nginx to a served host: p50 {one_request * 1000:.2f} ms")
    for size, create_seconds, after, memory, served, calls, updates in results:
        print(f"At {size:,} each of Ingress, Service, EndpointSlice (created in {create_seconds:.1f} s, "
              f"{CREATE_THREADS} client threads; the last host answered {after:.1f} s later)")
        print(f"  Ingress created → served:            {ms(served)} (create call p50 "
              f"{percentile(calls, 50) * 1000:.1f} ms)")
        print(f"  one Ingress updated → served:        {ms(updates)}")
        print("  memory (MiB)                        VmRSS    VmHWM")
        for program, kib in memory.items():
            print(f"    {program:<32} {kib['VmRSS'] / 1024:7.1f}  {kib['VmHWM'] / 1024:7.1f}")
        total = sum(kib["VmRSS"] for kib in memory.values()) / 1024
        print(f"    watcher + syncer                 {total:7.1f}")
    print(f"Reloads while every object arrived: {reloads_after - reloads_before:.0f}")
    print(f"At {sizes[-1]:,}, baseline: Python holding the objects {holder['VmRSS'] / 1024:7.1f} MiB VmRSS "
          f"(as dicts from json.loads); holding nothing {empty['VmRSS'] / 1024:7.1f} MiB; the objects' raw JSON, "
          f"as the API serves them: {raw_bytes / 1024 / 1024:.1f} MiB")


if __name__ == "__main__":
    main()

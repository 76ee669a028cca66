"""The whole controller at 10,000 to 100,000 Ingresses through the Kubernetes API (issue 37's scale table).

At each size N (`--sizes`), a fresh API test server (tests/kube_api, in this process, serving from memory) is
filled with N Ingresses, each with its own host, Service and EndpointSlice (bench_webhook_review.py's names:
ing-i, svc-i, hi.bench.example, so that its reviews apply here too); every tenth has TLS with a certificate of
its own (one CA, one EC P-256 key shared, bench/scale_certificates.py). Then `pyngress up --kubeconfig` starts,
and the bench measures:
- start → all served: until the last host created, a sample of 50 others and a TLS host (its own certificate,
  chosen by SNI) answer; with where the time went, from the controller's log: the watcher's first complete list
  of each kind, the syncer's snapshot, the first build and push (pyngress_sync_duration_seconds);
- created → served, p50/p99 of 20 Ingresses created one by one (new hosts, an existing Service);
- endpoint change → traffic moved, p99 of 20 EndpointSlices moved to another backend;
- one new location profile (an annotation that needs a reload) → served, the syncer's reload time (render,
  nginx -t, HUP), requests lost meanwhile by a client looping on another host, nginx workers' RSS after;
- RSS of every process of the controller, summed; the size of the store as the watcher publishes it beside the
  clone message cap (proto/limits.py), and the number of snapshot parts;
- /metrics with traffic on 10,000 Ingresses (one request each): the scrape's time and size, /healthz's median
  and worst time during it (bench_metrics_scrape.py's client);
- with --webhook, the admission webhook's median and p99 per kind of review (bench_webhook_review.py's client).

nginx's shared dictionaries' use is not exposed by the Lua side (no endpoint reads free_space()); the bench
prints their configured sizes.

    .venv/bin/python bench/bench_scale.py [--sizes 10000,30000,100000] [--webhook] [--reviews 200]
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import socket
import ssl
import statistics
import sys
import tempfile
import threading
from collections import Counter
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import msgpack
import requests
from kubernetes import client

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import scale_certificates  # noqa: E402
from bench_api import memory_kib  # noqa: E402
from bench_metrics_scrape import healthz_times, scrape  # noqa: E402
from bench_webhook_review import connect, kinds, percentile, timed  # noqa: E402
from proto.limits import CLONE_MAX_MESSAGE_BYTES  # noqa: E402
from services.common.clone_parts import SNAPSHOT_PART_BYTES  # noqa: E402
from services.nginxconf.render import SHARED_DICT_SIZE  # noqa: E402
from services.tools.webhook_certificate import make_pair  # noqa: E402
from tests.kube_api import KubeApiServer  # noqa: E402
from tests.kube_api.resources import by_kind  # noqa: E402
from tests.support import k8s  # noqa: E402
from tests.support.controller import Controller, EchoBackends  # noqa: E402
from tests.support.kube_cluster import ApiCluster  # noqa: E402
from tests.support.net import free_port, wait_for  # noqa: E402

SIZES = (10_000, 30_000, 100_000)
SAMPLES = 20
PROBED = 50
TLS_EVERY = 10
TRAFFIC_INGRESSES = 10_000
# The reload's looping client: a request sent again on a new connection after its keep-alive one closed unanswered.
RESENT = "sent again"
PROFILE_ANNOTATION = {"nginx.ingress.kubernetes.io/proxy-read-timeout": "77"}  # a location setting: a reload


def host(i: int) -> str:
    return f"h{i}.bench.example"


def scale_objects(i: int, ip: str, port: int, certs: dict[str, Any]) -> list[dict]:
    tls = None
    service = k8s.service(f"svc-{i}")
    # Addresses of a cluster's usual /12 (10.96.0.0/12): the API test server allocates from a /16 only.
    service["spec"]["clusterIP"] = f"10.{100 + i // 65536}.{i // 256 % 256}.{i % 256}"
    objects = [service, k8s.endpoint_slice(f"svc-{i}", [ip], port)]
    if i % TLS_EVERY == 0:
        objects.append(k8s.secret(f"tls-{i}", {"tls.crt": certs["certs"][host(i)], "tls.key": certs["key"]},
                                  "kubernetes.io/tls"))
        tls = [{"hosts": [host(i)], "secretName": f"tls-{i}"}]
    objects.append(k8s.ingress(f"ing-{i}", [k8s.rule(host(i), ("/", "Prefix", f"svc-{i}", 80))], tls=tls))
    return objects


def seed(api: KubeApiServer, objects: list[dict]) -> None:
    """Store the objects straight into the test server's memory (its own create, with every default and check,
    without HTTP): 300,000 creates through the client would take longer than the bench."""
    storage = api._storage  # noqa: SLF001 - the test server has no bulk load, and the bench owns this instance
    assert storage is not None

    def create_all(chunk: list[dict]) -> None:
        for obj in chunk:
            storage.create(by_kind(obj["kind"]), obj["metadata"].get("namespace"), obj, "bench")
    for start in range(0, len(objects), 5000):  # in the server's loop, as its handlers run; a call may take 10 s
        api._call(create_all, objects[start:start + 5000])  # noqa: SLF001


def answers(session: requests.Session, port: int, name: str, want: str) -> bool:
    try:
        resp = session.get(f"http://127.0.0.1:{port}/", headers={"Host": name}, timeout=5, allow_redirects=False)
    except requests.RequestException:
        return False
    return resp.status_code == 200 and resp.json().get("backend") == want


def wait_answered(session: requests.Session, controller: Controller, name: str, want: str,
                  timeout: float = 120.0) -> None:
    """Until `want` answers for `name`. A kept-alive connection an old worker closes during a reload fails the
    request sent on it at that moment (as with any HTTP server; clients retry such a request): polled again."""
    deadline = time.monotonic() + timeout
    while not answers(session, controller.http_port, name, want):
        if time.monotonic() > deadline:
            raise SystemExit(f"{name} not answered by {want} within {timeout} s (log: {controller.log_path})")
        time.sleep(0.002)


def tls_answers(port: int, name: str, ca: Path) -> bool:
    """A request to `name` over TLS, its certificate (chosen by SNI) checked against the bench's CA."""
    context = ssl.create_default_context(cafile=str(ca))
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, \
                context.wrap_socket(raw, server_hostname=name) as conn:
            conn.sendall(f"GET / HTTP/1.1\r\nHost: {name}\r\nConnection: close\r\n\r\n".encode())
            return conn.recv(100).startswith(b"HTTP/1.1 200")
    except (OSError, ssl.SSLError):
        return False


def wait_all_served(controller: Controller, n: int, ca: Path, deadline: float) -> None:
    session = requests.Session()
    probed = [n - 1] + list(range(1, n, max(1, n // PROBED)))  # over HTTP: the TLS ones (i % 10 == 0) redirect
    while time.monotonic() < deadline:
        probed = [i for i in probed if not answers(session, controller.http_port, host(i), "SCALE")]
        if not probed and tls_answers(controller.https_port, host(0), ca):
            return
        time.sleep(0.05)
    raise SystemExit(f"not all served before the deadline (log: {controller.log_path})")


_LOG_TIME = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3})Z \w+ (\w+) (.*)$")


def log_phases(log: Path, started_wall: float) -> dict[str, float]:
    """Seconds from start to the first log line of each phase."""
    marks = {"the watcher's process started": "watcher watcher started",
             "nginx's first master": "nginx-listeners handed",
             **{f"first list of {kind}": f"watcher listed target={kind} "
                for kind in ("Secret", "Ingress", "Service", "EndpointSlice")},
             "watcher serves snapshots": "watcher store synced",
             "syncer has the snapshot": "syncer store snapshot",
             "the first nginx.conf applied": "syncer nginx reloaded"}
    found: dict[str, float] = {}
    for line in log.read_text(errors="replace").splitlines():
        match = _LOG_TIME.match(line)
        if not match:
            continue
        text = f"{match[2]} {match[3]}"
        for phase, prefix in marks.items():
            if phase not in found and text.startswith(prefix):
                at = datetime.strptime(match[1], "%Y-%m-%dT%H:%M:%S.%f").replace(tzinfo=timezone.utc)
                found[phase] = at.timestamp() - started_wall
    return found


def metric(controller: Controller, name: str, **labels: str) -> float:
    """As Controller.metric, with the time a scrape takes at 100,000 Ingresses (0 when the series is absent)."""
    text = requests.get(f"http://127.0.0.1:{controller.healthz_port}/metrics", timeout=120).text
    for line in text.splitlines():
        if line.startswith((name + "{", name + " ")) and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def histogram_sum(controller: Controller, kind: str) -> float:
    return metric(controller, "pyngress_sync_duration_seconds_sum", kind=kind)


def created_to_served(cluster: ApiCluster, controller: Controller) -> list[float]:
    session, served = requests.Session(), []
    for i in range(SAMPLES):
        name = f"new{i}.bench.example"
        t0 = time.perf_counter()
        cluster.apply(k8s.ingress(f"new-{i}", [k8s.rule(name, ("/", "Prefix", "latency", 80))]))
        wait_answered(session, controller, name, "LAT")
        served.append(time.perf_counter() - t0)
    return served


def endpoint_moves(cluster: ApiCluster, controller: Controller, n: int, ip: str, port: int) -> list[float]:
    session, moved = requests.Session(), []
    for s in range(SAMPLES):
        i = (s * 7919 + 1) % n
        i += i % TLS_EVERY == 0  # over HTTP, a host with TLS redirects
        t0 = time.perf_counter()
        cluster.apply(k8s.endpoint_slice(f"svc-{i}", [ip], port))
        wait_answered(session, controller, host(i), "MOVED")
        moved.append(time.perf_counter() - t0)
    return moved


def nginx_workers(controller: Controller) -> list[int]:
    master = controller.pid("nginx")
    return [int(p) for p in Path(f"/proc/{master}/task/{master}/children").read_text().split()]


def new_profile(cluster: ApiCluster, controller: Controller, n: int) -> dict[str, Any]:
    """One Ingress whose annotation needs a new location profile: apply → served, the syncer's reload time, and
    the requests a client looping on another host saw fail meanwhile."""
    stop = threading.Event()
    outcome: Counter[str] = Counter()

    def get(session: requests.Session) -> str:
        status = session.get(f"http://127.0.0.1:{controller.http_port}/", headers={"Host": host(n - 1)},
                             timeout=5).status_code
        return "ok" if status == 200 else f"status {status}"

    def loop() -> None:
        # One keep-alive connection, as a browser's. A retiring worker closes its idle keep-alive connections, and
        # a request sent on one as it closes gets no answer: every HTTP client sends it again on a new connection
        # (RFC 9112 section 9.3.1; requests does not), so the bench does too and counts it apart. A failure on the
        # new connection is a lost request.
        session = requests.Session()
        while not stop.is_set():
            try:
                outcome[get(session)] += 1
            except requests.ConnectionError:
                outcome[RESENT] += 1
                session = requests.Session()
                try:
                    outcome[get(session)] += 1
                except requests.RequestException as err:
                    outcome[type(err).__name__] += 1
            except requests.RequestException as err:
                outcome[type(err).__name__] += 1
    reloads, reload_seconds = metric(controller, "nginx_ingress_controller_success"), histogram_sum(controller, "reload")
    client_thread = threading.Thread(target=loop)
    client_thread.start()
    try:
        t0 = time.perf_counter()
        cluster.apply(k8s.ingress("profile", [k8s.rule("profile.bench.example", ("/", "Prefix", "latency", 80))],
                                  annotations=PROFILE_ANNOTATION))
        wait_answered(requests.Session(), controller, "profile.bench.example", "LAT")
        served = time.perf_counter() - t0
        wait_for(lambda: metric(controller, "nginx_ingress_controller_success") > reloads, 60, what="the reload")
        time.sleep(2)  # the old workers finish and leave
    finally:
        stop.set()
        client_thread.join()
    workers = nginx_workers(controller)
    return {"served": served, "reload": histogram_sum(controller, "reload") - reload_seconds,
            "reloads": metric(controller, "nginx_ingress_controller_success") - reloads,
            "requests": sum(v for k, v in outcome.items() if k != RESENT), "lost": {k: v for k, v in outcome.items() if k not in ("ok", RESENT)},
            "resent": outcome[RESENT],
            "workers_mib": sum(memory_kib(w)["VmRSS"] for w in workers) / 1024, "workers": len(workers)}


def process_name(pid: int) -> str:
    """"nginx: master", "nginx: worker", a pyngress program's name ("watcher", "proxy", ...) or "supervisord"."""
    argv = [a.decode(errors="replace") for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if a]
    if argv[0].startswith("nginx:"):
        return argv[0].split(" process")[0]
    names = [Path(a).name for a in argv]
    if "pyngress" in names[:-1]:
        return names[names.index("pyngress") + 1]
    return next((name for name in names if name == "supervisord"), names[0])


def rss_by_process(controller: Controller) -> dict[str, tuple[int, float]]:
    """name → (how many, MiB of VmRSS summed)."""
    found: dict[str, tuple[int, float]] = {}
    for pid in controller.pids():
        try:
            name, kib = process_name(pid), memory_kib(pid)["VmRSS"]
        except (OSError, KeyError):
            continue
        count, mib = found.get(name, (0, 0.0))
        found[name] = (count + 1, mib + kib / 1024)
    return found


def store_bytes(api: KubeApiServer) -> int:
    """The store as the watcher publishes it, packed (an upper bound: the watcher slims objects first)."""
    return sum(len(msgpack.packb(obj)) for kind in ("Ingress", "Service", "EndpointSlice", "Secret")
               for obj in api.objects(kind))


def traffic_then_scrape(controller: Controller, n: int) -> dict[str, float]:
    count = min(n, TRAFFIC_INGRESSES)

    def some(start: int) -> None:
        session = requests.Session()
        for i in range(start, count, 4):
            answers(session, controller.http_port, host(i), "SCALE")
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(some, range(4)))
    port = controller.healthz_port
    idle = healthz_times(port, None, 100)
    done, during = threading.Event(), []
    poller = threading.Thread(target=lambda: during.extend(healthz_times(port, done)))
    poller.start()
    time.sleep(0.05)
    seconds, size = scrape(port)
    done.set()
    poller.join()
    return {"ingresses": count, "seconds": seconds, "mb": size / 1e6, "idle_ms": statistics.median(idle) * 1000,
            "during_ms": statistics.median(during) * 1000, "worst_ms": max(during) * 1000}


def webhook_reviews(n: int, port: int, ca: Path, count: int) -> dict[str, tuple[float, float]]:
    connection = connect(port, ca)
    timed(connection, kinds(n, 20)["new host"])  # warm up
    results = {}
    for kind, bodies in kinds(n, count).items():
        times, _ = timed(connection, bodies)
        results[kind] = (statistics.median(times) * 1000, percentile(times, 0.99) * 1000)
    connection.close()
    return results


def ms(values: list[float]) -> str:
    scaled = sorted(v * 1000 for v in values)
    return f"p50 {statistics.median(scaled):6.1f} ms  p99 {percentile(scaled, 0.99):6.1f} ms"


def one_size(n: int, certs: dict[str, Any], echo: EchoBackends, args: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="bscale-"))  # short: ipc socket paths live under it
    os.chmod(work, 0o755)
    (work / "ca.crt").write_text(certs["ca"])
    api = KubeApiServer().start()
    extra = []
    if args.webhook:
        pair = make_pair("webhook", "bench")
        for name in ("ca", "cert", "key"):
            (work / f"webhook-{name}").write_text(pair[name])
        webhook_port = free_port()
        extra = [f"--validating-webhook=127.0.0.1:{webhook_port}",
                 f"--validating-webhook-certificate={work / 'webhook-cert'}",
                 f"--validating-webhook-key={work / 'webhook-key'}"]
    controller = Controller(work, [f"--kubeconfig={api.write_kubeconfig(work / 'kubeconfig')}", "--log-level=info",
                                   "--update-status=false", *extra])
    row: dict[str, Any] = {"n": n}
    try:
        scale_ip, lat_ip, moved_ip = echo.ips["SCALE"], echo.ips["LAT"], echo.ips["MOVED"]
        t0 = time.perf_counter()
        objects = [k8s.ingress_class("nginx"), k8s.service("latency"),
                   k8s.endpoint_slice("latency", [lat_ip], echo.port)]
        for i in range(n):
            objects += scale_objects(i, scale_ip, echo.port, certs)
        seed(api, objects)
        row["seed"] = time.perf_counter() - t0
        row["store_mb"] = store_bytes(api) / 1e6
        del objects
        started_wall, t0 = time.time(), time.perf_counter()
        controller.start(wait=False)
        wait_all_served(controller, n, work / "ca.crt", time.monotonic() + args.deadline)
        row["all_served"] = time.perf_counter() - t0
        row["phases"] = log_phases(controller.log_path, started_wall)
        row["build_push"] = {kind: histogram_sum(controller, kind) for kind in ("total", "push", "reload")}
        row["pushes"] = metric(controller, "pyngress_dynamic_pushes")
        time.sleep(2)
        row["rss_start"] = rss_by_process(controller)
        configuration = api.configuration()
        cluster = ApiCluster(client.ApiClient(configuration))
        row["created"] = created_to_served(cluster, controller)
        row["moved"] = endpoint_moves(cluster, controller, n, moved_ip, echo.port)
        row["profile"] = new_profile(cluster, controller, n)
        row["scrape"] = traffic_then_scrape(controller, n)
        row["rss"] = rss_by_process(controller)
        if args.webhook:
            row["webhook"] = webhook_reviews(n, webhook_port, work / "webhook-ca", args.reviews)
    finally:
        controller.stop()
        api.stop()
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return row


def report(row: dict[str, Any]) -> None:
    n = row["n"]
    print(f"\n== {n:,} Ingresses ({n // TLS_EVERY:,} with TLS, own certificate), each with Service and EndpointSlice "
          f"(seeded in {row['seed']:.0f} s; packed store {row['store_mb']:.0f} MB, message cap "
          f"{CLONE_MAX_MESSAGE_BYTES / 2**20:.0f} MiB, snapshot parts of {SNAPSHOT_PART_BYTES / 2**20:.0f} MiB: "
          f"~{max(1, round(row['store_mb'] * 1e6 / SNAPSHOT_PART_BYTES))} parts)")
    print(f"  start → all served (last created + {PROBED} sampled + one TLS by SNI): {row['all_served']:.1f} s")
    for phase, at in sorted(row["phases"].items(), key=lambda kv: kv[1]):
        print(f"    {at:7.1f} s  {phase}")
    bp = row["build_push"]
    print(f"    syncer's own time summed over its syncs: {bp['total']:.1f} s (of it pushes {bp['push']:.1f} s, "
          f"reloads {bp['reload']:.1f} s; {row['pushes']:.0f} pushes of the tables)")
    print(f"  created → served ({SAMPLES}):      {ms(row['created'])}")
    print(f"  endpoint moved → traffic ({SAMPLES}): {ms(row['moved'])}")
    p = row["profile"]
    print(f"  new location profile → served {p['served'] * 1000:.0f} ms; syncer's reload {p['reload'] * 1000:.0f} ms "
          f"({p['reloads']:.0f} reload); failed meanwhile {p['lost'] or 'none'} of {p['requests']} "
          f"({p['resent']} sent again after a keep-alive close); "
          f"{p['workers']} workers {p['workers_mib']:.0f} MiB RSS after")
    for label, key in (("after start", "rss_start"), ("at the end", "rss")):
        total = sum(mib for _, mib in row[key].values())
        parts = ", ".join(f"{name}{f' ×{count}' if count > 1 else ''} {mib:.0f}"
                          for name, (count, mib) in sorted(row[key].items(), key=lambda kv: -kv[1][1]))
        print(f"  RSS {label}: {total:.0f} MiB in all ({parts})")
    print(f"  nginx shared dictionaries: routes, backends, certificates {SHARED_DICT_SIZE} each (use not exposed)")
    s = row["scrape"]
    print(f"  /metrics with traffic on {s['ingresses']:,} Ingresses: {s['seconds']:.2f} s, {s['mb']:.0f} MB; "
          f"/healthz during it median {s['during_ms']:.1f} ms, worst {s['worst_ms']:.1f} ms (idle {s['idle_ms']:.1f})")
    for kind, (median, p99) in row.get("webhook", {}).items():
        print(f"  webhook review, {kind:30} median {median:6.2f} ms  p99 {p99:6.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--webhook", action="store_true", help="run the admission webhook and time its reviews")
    parser.add_argument("--reviews", type=int, default=200, help="webhook reviews of each kind")
    parser.add_argument("--deadline", type=float, default=900, help="seconds allowed for all to be served")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (the controller's log)")
    args = parser.parse_args()
    sizes = sorted(int(size) for size in args.sizes.split(","))
    t0 = time.perf_counter()
    certs = scale_certificates.make([host(i) for i in range(0, sizes[-1], TLS_EVERY)])
    print(f"{len(certs['certs']):,} certificates made in {time.perf_counter() - t0:.1f} s")
    echo = EchoBackends()
    try:
        for name in ("SCALE", "LAT", "MOVED"):
            echo.start(name)
        for n in sizes:
            report(one_size(n, certs, echo, args))
    finally:
        echo.stop()


if __name__ == "__main__":
    main()

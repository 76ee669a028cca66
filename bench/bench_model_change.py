"""One change's model update, in-process: IncrementalModel.update after each of 20 changes, median, min and max.

Shapes: `routes` (one Gateway, N HTTPRoutes each on its own host; each change a new HTTPRoute on a new host) and
`ingresses` (N Ingresses each with its own host, Service and EndpointSlice; the changes alternate a new Ingress and
one more EndpointSlice of an existing Service). `--tls-every K` (ingresses): every K-th Ingress has TLS, with a
Secret and a certificate of its own (bench/scale_certificates.py), and every third change is a new TLS Ingress with
its Secret. `--root DIR` times the code of another checkout (a worktree of the baseline revision) with this script.
Run: .venv/bin/python bench/bench_model_change.py --shape routes --n 10000 [--tls-every 10] [--root DIR]
"""
from __future__ import annotations

import argparse
import base64
import statistics
import sys
import time
from pathlib import Path

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--shape", choices=("routes", "ingresses"), required=True)
parser.add_argument("--n", type=int, required=True)
parser.add_argument("--tls-every", type=int, default=0, help="ingresses: every K-th Ingress with TLS (0: none)")
parser.add_argument("--root", default=str(Path(__file__).resolve().parents[1]))
args = parser.parse_args()
sys.path.insert(0, args.root)
sys.path.insert(1, str(Path(__file__).resolve().parent))

import scale_certificates  # noqa: E402

from services.syncer.model.incremental import IncrementalModel  # noqa: E402
from tests.support import gateway_objects as gw  # noqa: E402
from tests.support.model_cluster import Cluster  # noqa: E402

CHANGES = 20
PARENT = {"name": "bench", "namespace": "default"}


def route(name: str, host: str) -> dict:
    return gw.http_route(name, parents=[PARENT], hostnames=[host],
                         rules=[gw.rule(gw.backend_ref("web"), matches=[gw.path_match("/")])])


def tls_app(cluster: Cluster, name: str, host: str, certs: dict) -> None:
    """An Ingress with its Service and EndpointSlice, and TLS for its host with a Secret of its own."""
    encode = base64.b64encode
    cluster.tls_secret(f"{name}-tls", data={"tls.crt": encode(certs["certs"][host].encode()).decode(),
                                            "tls.key": encode(certs["key"].encode()).decode()})
    cluster.app(name, host=host, tls=[{"hosts": [host], "secretName": f"{name}-tls"}])


def main() -> None:
    cluster = Cluster()
    every = args.tls_every if args.shape == "ingresses" else 0
    tls_hosts = [f"h{i}.path.example.com" for i in range(0, args.n, every)] if every else []
    new_tls = [f"new{j}.path.example.com" for j in range(2, CHANGES, 3)] if every else []
    certs = scale_certificates.make(tls_hosts + new_tls) if every else {}
    cluster.ingress_class()
    cluster.app("web", host="web.example.com")
    if args.shape == "routes":
        cluster.add(gw.gateway_class())
        cluster.add(gw.gateway("bench", listeners=[gw.listener()]))
        for i in range(args.n):
            cluster.add(route(f"r{i}", f"h{i}.bench.test"))
    else:
        for i in range(args.n):
            if every and i % every == 0:
                tls_app(cluster, f"app{i}", f"h{i}.path.example.com", certs)
            else:
                cluster.app(f"app{i}", host=f"h{i}.path.example.com")
    model = IncrementalModel(cluster.settings)
    started = time.perf_counter()
    model.update(cluster.store, None)
    print(f"first model: {time.perf_counter() - started:.1f} s", file=sys.stderr)
    times = []
    for j in range(CHANGES):
        before = dict(cluster.store)
        if args.shape == "routes":
            cluster.add(route(f"new{j}", f"new{j}.bench.test"))
        elif every and j % 3 == 2:
            tls_app(cluster, f"new{j}", f"new{j}.path.example.com", certs)
        elif j % 2 == 0:
            cluster.app(f"new{j}", host=f"new{j}.path.example.com")
        else:
            cluster.endpoint_slice(f"app{j}", addresses=(f"10.9.{j}.1",))
        changed = {key for key in cluster.store.keys() | before.keys() if cluster.store.get(key) is not before.get(key)}
        started = time.perf_counter()
        model.update(cluster.store, changed)
        times.append(time.perf_counter() - started)
    shape = f"{args.shape} (every {every}th with TLS)" if every else args.shape
    print(f"{shape} {args.n}: median {statistics.median(times) * 1000:.1f} ms, "
          f"min {min(times) * 1000:.1f}, max {max(times) * 1000:.1f}")


if __name__ == "__main__":
    main()

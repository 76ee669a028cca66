"""Location profiles at scale: 10,000 Ingresses spread over 500 distinct combinations of location settings.

Each distinct combination of an Ingress's location annotations is one named location in nginx.conf (a
profile). This measures what many combinations cost, beside the same 10,000 Ingresses with one combination,
same run: nginx.conf size, `nginx -t` time and its peak memory (what each nginx process holds of the
configuration), the model build and render time; then whether one more Ingress reloads nginx (its
nginx.conf differs) when it brings a new combination, and when it reuses one.
Combinations: proxy-connect-timeout (5 values) x proxy-read-timeout (10) x proxy-body-size (5) x enable-cors (2).
Run: .venv/bin/python bench/bench_profile_scale.py [--ingresses N]
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from services.nginxconf.config_check import check_file  # noqa: E402
from services.nginxconf.paths import NginxPaths  # noqa: E402
from services.nginxconf.prefix import prepare  # noqa: E402
from services.nginxconf.render import render  # noqa: E402
from tests.support.model_cluster import PREFIX, Cluster  # noqa: E402

COMBINATIONS = 500


def annotations(combination: int) -> dict[str, str]:
    connect, rest = combination % 5, combination // 5
    read, rest = rest % 10, rest // 10
    body, cors = rest % 5, rest // 5
    values = {"proxy-connect-timeout": f"{connect + 1}s", "proxy-read-timeout": f"{(read + 1) * 10}s",
              "proxy-body-size": f"{body + 1}m"}
    if cors % 2:
        values["enable-cors"] = "true"
    return {f"{PREFIX}/{name}": value for name, value in values.items()}


def cluster_of(ingresses: int, combinations: int) -> Cluster:
    cluster = Cluster()
    cluster.ingress_class()
    for i in range(ingresses):
        cluster.app(f"app{i}", host=f"h{i}.scale.example.com", annotations=annotations(i % combinations))
    return cluster


def measure(cluster: Cluster, check_dir: Path) -> dict[str, float]:
    paths = NginxPaths.of(check_dir / "state", check_dir / "run")
    prepare(paths)
    started = time.monotonic()
    model = cluster.build(state_dir=str(paths.state_dir), run_dir=str(paths.run_dir))
    conf = render(model.config)
    built = time.monotonic() - started
    tested = paths.prefix / "check.conf"
    tested.write_text(conf)
    started = time.monotonic()
    check_file(paths, tested)
    checked = time.monotonic() - started
    return {"profiles": len(model.config.profiles), "conf_kib": len(conf.encode()) / 1024, "build_s": built,
            "nginx_t_s": checked, "peak_mib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}


def reloads_for_one_more(cluster: Cluster, values: dict[str, str]) -> int:
    """1 when adding one Ingress with these annotations changes nginx.conf (the syncer reloads), else 0."""
    before = render(cluster.build().config)
    cluster.app("one-more", host="one-more.scale.example.com", annotations=values)
    after = render(cluster.build().config)
    del cluster.store[next(k for k in cluster.store if k.startswith("Ingress/") and k.endswith("/one-more"))]
    return int(before != after)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ingresses", type=int, default=10_000)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="pyngress-bench-", dir="/tmp"))
    os.chmod(base, 0o711)
    try:
        # One combination first: the peak memory of nginx -t is a maximum over the children so far.
        rows = {}
        for combinations in (1, COMBINATIONS):
            cluster = cluster_of(args.ingresses, combinations)
            rows[combinations] = measure(cluster, base / str(combinations))
            if combinations == COMBINATIONS:
                new = reloads_for_one_more(cluster, {**annotations(7), f"{PREFIX}/proxy-read-timeout": "123s"})
                reused = reloads_for_one_more(cluster, annotations(7))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"{args.ingresses} Ingresses (each its own host, Service, EndpointSlice)")
    print(f"{'combinations':>12} {'profiles':>8} {'nginx.conf':>11} {'build+render':>13} {'nginx -t':>9} {'nginx -t peak':>14}")
    for combinations, row in rows.items():
        print(f"{combinations:>12} {row['profiles']:>8} {row['conf_kib']:>8.0f}KiB {row['build_s']:>12.2f}s "
              f"{row['nginx_t_s']:>8.2f}s {row['peak_mib']:>11.0f}MiB")
    print(f"one more Ingress with a new combination: {new} reload; with an existing one: {reused} reloads")


if __name__ == "__main__":
    main()

"""CNI ADD: pyngress-cni (through `pyngress cniserver` and two `pyngress cniworker`s) beside Debian's Go
`bridge` + `host-local` plugins from /usr/lib/cni, in the same run, each driven exactly as a container
runtime drives a plugin (CNI_* environment, network configuration on stdin, a fresh netns per pod):

- ADD latency over 100 sequential pods (p50, p99), the variants taking turns pod by pod so that load
  from elsewhere on the machine spreads over all of them; DEL latency of the same pods;
- total time for 50 pods added at once.

pyngress-cni runs in three forms: the venv's console script (`.venv/bin/pyngress-cni`, which pays for the
editable install's import hook at every start), a two-line launcher in a CNI bin directory that
runs the system Python with `-IS` (isolated, no site module) and imports the plugin module, compiled
once (examples/cni/README.md), and the static C binary for nodes without Python (cni-plugin/,
`build/pyngress-cni-static`). Each side has its own bridge and subnet. The executables' sizes are
printed too.
With --controller the plugins talk to the CNI server of a whole running controller (`pyngress up --enable-cni`).
Run: .venv/bin/python bench/bench_cni.py [--pods 100] [--burst 50] [--controller]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_dataplane import plain_ingress_cluster  # noqa: E402
from tests.integration.cniserver.cni_processes import PLUGIN, CniStack, free_subnet, pod_args  # noqa: E402
from tests.integration.cniserver.plugins import plugin_path  # noqa: E402
from tests.support.controller import Controller  # noqa: E402
from tests.support.net import free_port  # noqa: E402

GO_CNI_PATH = "/usr/lib/cni"
PLUGIN_SOURCE = Path(__file__).resolve().parents[1] / "services" / "cni_plugin" / "main.py"


@dataclass
class Variant:
    label: str
    argv: list[str]
    config: dict
    env: dict[str, str]
    add_ms: list[float] = field(default_factory=list)
    del_ms: list[float] = field(default_factory=list)
    burst_s: float = 0.0

    def call(self, command: str, container: str, netns: str) -> float:
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "CNI_COMMAND": command, "CNI_CONTAINERID": container,
               "CNI_NETNS": netns, "CNI_IFNAME": "eth0", "CNI_ARGS": pod_args(container), **self.env}
        stdin = json.dumps(self.config).encode()
        start = time.perf_counter()
        done = subprocess.run(self.argv, input=stdin, env=env, capture_output=True)
        elapsed = time.perf_counter() - start
        if done.returncode != 0:
            raise RuntimeError(f"{self.label} {command} {container} failed: {done.stdout!r} {done.stderr!r}")
        return elapsed * 1000


class Namespaces:
    def __init__(self, tag: str) -> None:
        self.tag = tag
        self.names: list[str] = []

    def new(self) -> str:
        name = f"bn{self.tag}-{len(self.names)}"
        subprocess.run(["ip", "netns", "add", name], check=True)
        self.names.append(name)
        return f"/var/run/netns/{name}"

    def remove_all(self) -> None:
        for name in self.names:
            subprocess.run(["ip", "netns", "del", name], capture_output=True)


def installed_plugin(bin_dir: Path) -> Path:
    """The launcher of examples/cni/README.md in a CNI bin directory."""
    target = bin_dir / "pyngress-cni"
    target.write_text(f"#!{os.path.realpath(sys.executable)} -IS\n"
                      f"import sys; sys.path.insert(0, {str(PLUGIN_SOURCE.parent)!r})\n"
                      "from main import main; sys.exit(main())\n")
    target.chmod(0o755)
    return target


def startup_ms(argv: list[str], runs: int = 30) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, capture_output=True, env={"CNI_COMMAND": "VERSION"}, input=b"")
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100)[98] if len(values) >= 2 else values[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pods", type=int, default=100, help="sequential pods per variant")
    parser.add_argument("--burst", type=int, default=50, help="pods added at once per variant")
    parser.add_argument("--controller", action="store_true",
                        help="the CNI server and workers of a whole controller (`pyngress up --enable-cni`, one "
                        "Ingress served), not the CNI processes alone")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("run as root: the benchmark creates network namespaces, bridges and veths")

    tag = uuid.uuid4().hex[:5]
    workdir = Path(tempfile.mkdtemp(prefix="pcni-bench-", dir="/tmp"))
    go_subnet = free_subnet(22)
    py_subnet = free_subnet(22)
    while py_subnet.overlaps(go_subnet):
        py_subnet = free_subnet(22)
    namespaces = Namespaces(tag)
    bridges = (f"bgo{tag}", f"bpy{tag}")
    controller = None
    try:
        if args.controller:
            controller = whole_controller(workdir / "controller")
            # A stack object over the controller's run directory, to find its socket and read its metrics.
            stack = CniStack(workdir / "controller")
        else:
            stack = CniStack(workdir, log_level="info")  # the default; debug costs per request
            stack.start_server()
            for _ in range(2):
                stack.start_worker()
        stack.wait_workers(2)
        bin_dir = workdir / "bin"
        bin_dir.mkdir()
        py_config = {"cniVersion": "1.0.0", "name": f"bpy-{tag}", "type": "pyngress-cni", "bridge": bridges[1],
                     "ipam": {"subnet": str(py_subnet)}}
        py_env = {"PYNGRESS_CNI_SOCKET": str(stack.socket), "CNI_PATH": str(bin_dir)}
        variants = [
            Variant("Go bridge + host-local", [f"{GO_CNI_PATH}/bridge"],
                    {"cniVersion": "1.0.0", "name": f"bgo-{tag}", "type": "bridge", "bridge": bridges[0],
                     "isGateway": True, "ipam": {"type": "host-local", "subnet": str(go_subnet),
                                                 "dataDir": str(workdir / "host-local")}},
                    {"CNI_PATH": GO_CNI_PATH}),
            Variant("pyngress-cni, venv console script", [str(PLUGIN)], py_config, py_env),
            Variant("pyngress-cni, launcher, python -IS", [str(installed_plugin(bin_dir))], py_config, py_env),
            Variant("pyngress-cni-static (C, musl, static)", [str(plugin_path("static"))], py_config, py_env),
        ]
        for variant in variants:  # warm-up: bridges created, caches filled, workers' first-call costs paid
            netns = namespaces.new()
            variant.call("ADD", f"warm-{variant.argv[0][-6:]}", netns)
            variant.call("DEL", f"warm-{variant.argv[0][-6:]}", netns)

        pods = [[(f"s{i}v{v}", namespaces.new()) for v in range(len(variants))] for i in range(args.pods)]
        for i, row in enumerate(pods):
            order = list(range(len(variants)))
            order = order[i % len(order):] + order[:i % len(order)]
            for v in order:
                variants[v].add_ms.append(variants[v].call("ADD", *row[v]))
        server_sum = stack.metric("pyngress_cni_request_duration_seconds_sum", '{command="ADD",result="success"}')
        server_count = stack.metric("pyngress_cni_request_duration_seconds_count", '{command="ADD",result="success"}')
        for row in pods:
            for v, variant in enumerate(variants):
                variant.del_ms.append(variant.call("DEL", *row[v]))

        for v, variant in enumerate(variants):
            burst = [(f"b{i}v{v}", namespaces.new()) for i in range(args.burst)]
            with ThreadPoolExecutor(args.burst) as pool:
                start = time.perf_counter()
                list(pool.map(lambda pod: variant.call("ADD", *pod), burst))
                variant.burst_s = time.perf_counter() - start
                list(pool.map(lambda pod: variant.call("DEL", *pod), burst))

        report(variants, args, server_sum / server_count * 1000,
               {"python3 -IS (nothing imported)": startup_ms([os.path.realpath(sys.executable), "-IS", "-c", "pass"]),
                "venv python (site + editable hook)": startup_ms([sys.executable, "-c", "pass"]),
                "Go bridge VERSION": startup_ms([f"{GO_CNI_PATH}/bridge"]),
                "pyngress-cni VERSION, venv script": startup_ms([str(PLUGIN)]),
                "pyngress-cni VERSION, launcher -IS": startup_ms(variants[2].argv),
                "pyngress-cni-static VERSION": startup_ms(variants[3].argv)})
        report_sizes()
    finally:
        if controller is not None:
            controller.stop()
        else:
            stack.stop()
        namespaces.remove_all()
        for bridge in bridges:
            subprocess.run(["ip", "link", "del", bridge], capture_output=True)
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


def whole_controller(workdir: Path) -> Controller:
    """`pyngress up --enable-cni` (two workers, the default) in manifests mode, serving one Ingress: the CNI
    processes share the machine with nginx, the watcher and the syncer, as on a node."""
    backend_port = free_port()
    cluster = plain_ingress_cluster(workdir / "manifests", backend_port)
    controller = Controller(workdir, [f"--manifests={cluster.directory}", "--log-level=warning", "--enable-cni"])
    return controller.start()


def report_sizes() -> None:
    """What a node needs on disk for each plugin."""
    sizes = {"pyngress-cni-static": [plugin_path("static")],
             "Go bridge + host-local": [Path(GO_CNI_PATH, "bridge"), Path(GO_CNI_PATH, "host-local")],
             "pyngress-cni (main.py; plus a Python)": [PLUGIN_SOURCE]}
    print("executable sizes (KiB):")
    for label, paths in sizes.items():
        print(f"  {label:40} {sum(p.stat().st_size for p in paths) / 1024:8.1f}")


def report(variants: list[Variant], args: argparse.Namespace, server_ms: float, startup: dict[str, float]) -> None:
    base = variants[0]
    base_p50 = statistics.median(base.add_ms)
    print(f"\nCNI ADD, {args.pods} sequential pods per variant (ms), and {args.burst} pods at once (s); "
          f"{os.cpu_count()} CPUs")
    print(f"{'variant':40} {'ADD p50':>8} {'ADD p99':>8} {'DEL p50':>8} {'burst':>7}   p50 ratio   burst ratio")
    for variant in variants:
        p50 = statistics.median(variant.add_ms)
        print(f"{variant.label:40} {p50:8.1f} {p99(variant.add_ms):8.1f} {statistics.median(variant.del_ms):8.1f} "
              f"{variant.burst_s:7.2f}   {p50 / base_p50:9.2f}   {variant.burst_s / base.burst_s:11.2f}")
    print(f"\ncniserver's own time per sequential ADD (request in to answer out, mean): {server_ms:.1f} ms")
    print("process start-up, p50 of 30 (ms):")
    for label, ms in startup.items():
        print(f"  {label:40} {ms:6.1f}")


if __name__ == "__main__":
    sys.exit(main())

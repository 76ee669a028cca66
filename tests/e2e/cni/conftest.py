"""A pod network per test served by real processes: `pyngress cniserver`, two `pyngress cniworker`s, and
`pyngress-cni` executed as a container runtime does. Everything is unique to the test (network name,
bridge, subnet, namespaces, run/state dirs) and removed afterwards even when the test fails.

Every test runs twice: with the Python plugin and with the static one (tests/integration/cniserver/plugins.py)."""
from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.integration.cniserver.cni_processes import CniStack, PluginRun, free_subnet, pod_args, run_plugin
from tests.integration.cniserver.plugins import PLUGIN_NAMES, plugin_path


def sh(*cmd: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, check=check)


class PodNetwork:
    def __init__(self, workdir: Path, plugin: Path) -> None:
        self.plugin = plugin
        tag = uuid.uuid4().hex[:6]
        self.name = f"e2e-{tag}"
        self.bridge = f"pce{tag}"
        self.subnet = free_subnet()
        self.gateway = str(self.subnet.network_address + 1)
        self.stack = CniStack(workdir)
        self.namespaces: list[str] = []

    def start(self, workers: int = 2) -> None:
        self.stack.start_server()
        for _ in range(workers):
            self.stack.start_worker()
        self.stack.wait_workers(workers)

    def config(self, **extra: Any) -> dict[str, Any]:
        return {"cniVersion": "1.1.0", "name": self.name, "type": "pyngress-cni", "bridge": self.bridge,
                "ipam": {"subnet": str(self.subnet)}, **extra}

    def netns(self) -> str:
        name = f"{self.bridge}-{len(self.namespaces)}"
        sh("ip", "netns", "add", name)
        self.namespaces.append(name)
        return f"/var/run/netns/{name}"

    def call(self, command: str, container: str, netns: str = "", **extra: Any) -> PluginRun:
        return run_plugin(command, self.config(**extra), container, netns, cni_args=pod_args(container),
                          socket_path=self.stack.socket, plugin=self.plugin)

    def in_pod(self, netns: str, *cmd: str, check: bool = True) -> subprocess.CompletedProcess:
        return sh("ip", "netns", "exec", Path(netns).name, *cmd, check=check)

    def allocations(self) -> list[str]:
        """Addresses allocated on disk (the IPAM store names one file after each)."""
        directory = self.stack.state_dir / "cni" / "networks" / self.name
        return sorted(p.name for p in directory.iterdir() if p.name[0].isdigit()) if directory.exists() else []

    def bridge_ports(self) -> list[str]:
        if sh("ip", "link", "show", self.bridge, check=False).returncode != 0:
            return []
        return [link["ifname"] for link in json.loads(sh("ip", "-j", "link", "show", "master", self.bridge).stdout)]

    def cleanup(self) -> None:
        self.stack.stop()
        for name in self.namespaces:
            sh("ip", "netns", "del", name, check=False)
        for port in self.bridge_ports():
            sh("ip", "link", "del", port, check=False)
        sh("ip", "link", "del", self.bridge, check=False)


@pytest.fixture(params=PLUGIN_NAMES)
def plugin(request: pytest.FixtureRequest) -> Path:
    """Each plugin executable in turn: the Python reference and the static binary."""
    return plugin_path(request.param)


@pytest.fixture
def pod_network(plugin: Path) -> Iterator[PodNetwork]:
    workdir = Path(tempfile.mkdtemp(prefix="pcni-e2e-", dir="/tmp"))
    network = PodNetwork(workdir, plugin)
    try:
        network.start()
        yield network
    finally:
        network.cleanup()
        shutil.rmtree(workdir, ignore_errors=True)

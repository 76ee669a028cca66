"""A throw-away pod network per test: its own network name, bridge, subnet, state dir and namespaces,
all removed afterwards even when the test fails."""
from __future__ import annotations

import json
import os
import random
import subprocess
import uuid
from pathlib import Path

import pytest

from services.cniworker import masquerade
from services.cniworker.handler import handle
from services.common.cni_config.request import CniRequest, parse_request


def sh(*cmd: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, check=check)


def sh_json(*cmd: str):
    return json.loads(sh(*cmd).stdout or "[]")


class PodNetwork:
    sh = staticmethod(sh)
    sh_json = staticmethod(sh_json)

    def __init__(self, state_dir: Path) -> None:
        tag = uuid.uuid4().hex[:8]
        self.state_dir = str(state_dir)
        self.name = f"pyt-{os.getpid()}-{tag}"
        self.bridge = f"pyb{tag}"
        self.prefix = f"10.{random.randint(64, 254)}.{random.randint(0, 255)}"
        self.subnet = f"{self.prefix}.0/24"
        self.gateway = f"{self.prefix}.1"
        self.namespaces: list[str] = []

    def config(self, **overrides) -> dict:
        config = {"cniVersion": "1.1.0", "name": self.name, "type": "pyngress-cni", "bridge": self.bridge,
                  "ipam": {"subnet": self.subnet}}
        config.update(overrides)
        return config

    def netns(self) -> str:
        """A fresh namespace; returns its path (what CNI_NETNS carries)."""
        name = f"{self.bridge}-{len(self.namespaces)}"
        sh("ip", "netns", "add", name)
        self.namespaces.append(name)
        return f"/var/run/netns/{name}"

    def request(self, command: str, container_id: str = "", netns: str = "", ifname: str = "eth0",
                **config) -> CniRequest:
        """The request as a worker gets it: parsed from the CNI variables and the configuration's bytes."""
        env = {"CNI_COMMAND": command, "CNI_CONTAINERID": container_id, "CNI_NETNS": netns, "CNI_IFNAME": ifname,
               "CNI_ARGS": f"K8S_POD_NAMESPACE=default;K8S_POD_NAME={container_id}"}
        return parse_request({k: v for k, v in env.items() if v}, json.dumps(self.config(**config)).encode())

    def call(self, command: str, container_id: str = "", netns: str = "", ifname: str = "eth0",
             pod_cidr: str | None = None, **config) -> dict:
        return handle(self.request(command, container_id, netns, ifname, **config), state_dir=self.state_dir,
                      pod_cidr=pod_cidr)

    def add(self, container_id: str, netns: str | None = None, **config) -> dict:
        return self.call("ADD", container_id, netns or self.netns(), **config)

    def in_pod(self, netns: str, *cmd: str, check: bool = True) -> subprocess.CompletedProcess:
        return sh("ip", "netns", "exec", os.path.basename(netns), *cmd, check=check)

    def allocations(self) -> dict[str, str]:
        """address -> file content, straight from the IPAM directory."""
        directory = Path(self.state_dir) / "cni" / "networks" / self.name
        if not directory.exists():
            return {}
        return {p.name: p.read_bytes().decode() for p in directory.iterdir() if p.name[0].isdigit()}

    def bridge_ports(self) -> list[str]:
        return [link["ifname"] for link in sh_json("ip", "-j", "link", "show", "master", self.bridge)] \
            if sh("ip", "link", "show", self.bridge, check=False).returncode == 0 else []

    def cleanup(self) -> None:
        for port in self.bridge_ports():
            sh("ip", "link", "del", port, check=False)
        sh("ip", "link", "del", self.bridge, check=False)
        for name in self.namespaces:
            sh("ip", "netns", "del", name, check=False)
        masquerade.remove(self.name)
        tables = sh("nft", "-j", "list", "table", masquerade.FAMILY, masquerade.TABLE, check=False)
        if tables.returncode == 0 and not any("chain" in item for item in json.loads(tables.stdout)["nftables"]):
            sh("nft", "delete", "table", masquerade.FAMILY, masquerade.TABLE, check=False)


@pytest.fixture
def pods(tmp_path):
    network = PodNetwork(tmp_path / "state")
    try:
        yield network
    finally:
        network.cleanup()


@pytest.fixture
def restore_ip_forward():
    """ipMasq turns on host-wide IPv4 forwarding; put it back as it was."""
    path = Path("/proc/sys/net/ipv4/ip_forward")
    before = path.read_text()
    yield
    path.write_text(before)

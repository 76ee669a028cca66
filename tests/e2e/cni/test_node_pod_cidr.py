"""Without --pod-cidr, the CNI server and workers take the pod subnet from the Node named by --node-name."""
import ipaddress
import json
import subprocess
import tempfile
import uuid
from pathlib import Path

import yaml

from tests.integration.cniserver.cni_processes import VENV_BIN, CniStack, free_subnet, pod_args, run_plugin
from tests.support.net import wait_for


def test_pods_get_addresses_from_the_nodes_pod_cidr_and_follow_its_changes():
    workdir = Path(tempfile.mkdtemp(prefix="pcni-node-", dir="/tmp"))
    tag = uuid.uuid4().hex[:6]
    node_name, bridge, network = f"node-{tag}", f"pcn{tag}", f"node-{tag}"
    manifests = workdir / "manifests"
    manifests.mkdir()

    def publish_node(cidr: str) -> None:
        (manifests / ".node.yaml").write_text(yaml.safe_dump(
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node_name}, "spec": {"podCIDR": cidr}}))
        (manifests / ".node.yaml").replace(manifests / "node.yaml")

    first, second = free_subnet(), free_subnet()
    publish_node(str(first))
    stack = CniStack(workdir, log_level="info", extra_flags=(f"--node-name={node_name}",))
    watcher = subprocess.Popen([str(VENV_BIN / "pyngress"), "watcher", f"--manifests={manifests}", *stack.flags()],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    namespaces = []
    config = {"cniVersion": "1.1.0", "name": network, "type": "pyngress-cni", "bridge": bridge}

    def add(container: str) -> dict:
        namespaces.append(f"{bridge}-{len(namespaces)}")
        subprocess.run(["ip", "netns", "add", namespaces[-1]], check=True)
        run = run_plugin("ADD", config, container, f"/var/run/netns/{namespaces[-1]}",
                         cni_args=pod_args(container), socket_path=stack.socket)
        assert run.returncode == 0, run.stdout
        return json.loads(run.stdout)

    try:
        stack.start_server()
        stack.start_worker()
        stack.wait_workers(1)
        address = wait_for(lambda: add("pod-a"), 10, what="an ADD served from the Node's podCIDR")
        assert ipaddress.ip_interface(address["ips"][0]["address"]).ip in first

        publish_node(str(second))
        def served_from_second() -> bool:
            result = add(f"pod-{len(namespaces)}")
            return ipaddress.ip_interface(result["ips"][0]["address"]).ip in second
        wait_for(served_from_second, 10, interval=0.3, what="ADDs from the Node's new podCIDR")
    finally:
        watcher.kill()
        stack.stop()
        for name in namespaces:
            subprocess.run(["ip", "netns", "del", name], capture_output=True)
        subprocess.run(["ip", "link", "del", bridge], capture_output=True)

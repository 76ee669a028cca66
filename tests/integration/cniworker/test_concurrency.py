"""Many ADDs at once, from threads of one worker and from several worker processes: each pod gets
its own address and interface, and the bridge they all race to create ends up created once."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

# One worker process: ADDs its pods from a thread pool, prints the addresses it got.
_WORKER = """
import json, sys
from concurrent.futures import ThreadPoolExecutor
from services.cniworker.handler import handle
from services.common.cni_config.request import parse_request
state_dir, config, pods = sys.argv[1], sys.argv[2].encode(), json.loads(sys.argv[3])
def add(pod):
    cid, netns = pod
    env = {"CNI_COMMAND": "ADD", "CNI_CONTAINERID": cid, "CNI_NETNS": netns, "CNI_IFNAME": "eth0",
           "CNI_ARGS": f"K8S_POD_NAMESPACE=default;K8S_POD_NAME={cid}"}
    return handle(parse_request(env, config), state_dir=state_dir, pod_cidr=None)["ips"][0]["address"]
with ThreadPoolExecutor(len(pods)) as pool:
    print(json.dumps(list(pool.map(add, pods))))
"""


def assert_each_pod_has_its_own_address(pods, placed: dict[str, str]):
    assert len(set(placed.values())) == len(placed)
    for netns, address in placed.items():
        info = json.loads(pods.in_pod(netns, "ip", "-j", "-4", "addr", "show", "dev", "eth0").stdout)
        assert [f"{a['local']}/{a['prefixlen']}" for a in info[0]["addr_info"]] == [address]
    assert len(pods.bridge_ports()) == len(placed)
    assert len(pods.allocations()) == len(placed)


def test_concurrent_adds_from_threads(pods):
    netns = [pods.netns() for _ in range(8)]
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda i: pods.call("ADD", f"thread-pod-{i}", netns[i]), range(8)))
    assert_each_pod_has_its_own_address(pods, {ns: r["ips"][0]["address"] for ns, r in zip(netns, results)})


def test_concurrent_adds_from_processes(pods):
    batches = [[(f"proc{p}-pod{i}", pods.netns()) for i in range(3)] for p in range(3)]
    procs = [subprocess.Popen([sys.executable, "-c", _WORKER, pods.state_dir, json.dumps(pods.config()),
                               json.dumps(batch)], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for batch in batches]
    placed = {}
    for proc, batch in zip(procs, batches):
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        placed.update({netns: address for (_, netns), address in zip(batch, json.loads(out))})
    assert_each_pod_has_its_own_address(pods, placed)

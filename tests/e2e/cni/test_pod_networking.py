"""Pods networked through the whole CNI path: runtime → pyngress-cni → cniserver → broker → cniworkers."""
from __future__ import annotations

import fcntl
import ipaddress
import json
import os
import signal
import subprocess
from concurrent.futures import ThreadPoolExecutor

from tests.support.net import wait_for


def pod_address(result: dict) -> str:
    return result["ips"][0]["address"].split("/")[0]


def test_three_pods_get_addresses_reach_each_other_and_are_removed_cleanly(pod_network):
    net = pod_network
    pods = {f"pod{i}": net.netns() for i in range(3)}
    results = {}
    for container, netns in pods.items():
        run = net.call("ADD", container, netns)
        assert run.returncode == 0, run
        results[container] = run.result
    addresses = {container: pod_address(result) for container, result in results.items()}
    assert len(set(addresses.values())) == 3
    assert all(ipaddress.ip_address(a) in net.subnet for a in addresses.values())

    for container, netns in pods.items():
        eth0 = json.loads(net.in_pod(netns, "ip", "-j", "addr", "show", "eth0").stdout)[0]
        assert addresses[container] in [a["local"] for a in eth0["addr_info"]]
        routes = json.loads(net.in_pod(netns, "ip", "-j", "route", "show", "default").stdout)
        assert [(r["dst"], r["gateway"]) for r in routes] == [("default", net.gateway)]
    assert net.in_pod(pods["pod0"], "ping", "-c1", "-W2", addresses["pod1"]).returncode == 0
    assert net.in_pod(pods["pod1"], "ping", "-c1", "-W2", addresses["pod2"]).returncode == 0
    assert net.in_pod(pods["pod2"], "ping", "-c1", "-W2", net.gateway).returncode == 0
    assert subprocess.run(["ping", "-c1", "-W2", addresses["pod2"]], capture_output=True).returncode == 0  # host side

    check = net.call("CHECK", "pod0", pods["pod0"], prevResult=results["pod0"])
    assert (check.returncode, check.stdout) == (0, ""), check

    host_veth = results["pod1"]["interfaces"][0]["name"]
    for _ in range(2):  # DEL is idempotent
        deleted = net.call("DEL", "pod1", pods["pod1"])
        assert (deleted.returncode, deleted.stdout) == (0, ""), deleted
    assert subprocess.run(["ip", "link", "show", host_veth], capture_output=True).returncode != 0
    assert addresses["pod1"] not in net.allocations()

    namespace = os.path.basename(pods["pod2"])
    subprocess.run(["ip", "netns", "del", namespace], check=True)
    net.namespaces.remove(namespace)
    gone = net.call("DEL", "pod2", pods["pod2"])
    assert gone.returncode == 0, gone
    assert addresses["pod2"] not in net.allocations()
    assert net.allocations() == [addresses["pod0"]]


def test_fifty_pods_at_once_get_fifty_addresses_and_leave_nothing_behind(pod_network):
    net = pod_network
    pods = {f"burst{i}": net.netns() for i in range(50)}
    with ThreadPoolExecutor(50) as pool:
        added = dict(zip(pods, pool.map(lambda item: net.call("ADD", item[0], item[1]), pods.items())))
        assert [c for c, run in added.items() if run.returncode != 0] == [], \
            {c: run.stdout for c, run in added.items() if run.returncode != 0}
        assert len({pod_address(run.result) for run in added.values()}) == 50
        assert len(net.allocations()) == 50 and len(net.bridge_ports()) == 50
        deleted = list(pool.map(lambda item: net.call("DEL", item[0], item[1]), pods.items()))
    assert [run.returncode for run in deleted] == [0] * 50
    assert net.allocations() == [] and net.bridge_ports() == []
    links = {link["ifname"] for link in json.loads(subprocess.run(["ip", "-j", "link", "show"], capture_output=True,
                                                                   check=True).stdout)}
    assert not links & {run.result["interfaces"][0]["name"] for run in added.values()}


def test_a_worker_killed_during_a_burst_costs_only_retries(pod_network):
    """Each ADD succeeds or fails with code 11; the retries succeed; nothing leaks.

    The test holds the network's IPAM lock (the flock host-local shares) while the burst arrives, so
    that every worker is certainly in the middle of ADDs when one of them is killed.
    """
    net = pod_network
    pods = {f"kill{i}": net.netns() for i in range(24)}
    store = net.stack.state_dir / "cni" / "networks" / net.name
    store.mkdir(mode=0o700, parents=True)
    lock = os.open(store / "lock", os.O_RDWR | os.O_CREAT, 0o600)
    victim = net.stack.workers[0]
    with ThreadPoolExecutor(24) as pool:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            burst = pool.map(lambda item: (item[0], net.call("ADD", item[0], item[1])), pods.items())
            wait_for(lambda: net.stack.metric("pyngress_cni_requests_in_flight") == 24,
                     what="the whole burst in flight")
            os.kill(victim.pid, signal.SIGKILL)
            net.stack.start_worker()  # supervisord would; here the test does
            net.stack.wait_workers(2)
        finally:
            os.close(lock)
        outcome = dict(burst)
    failed = [c for c, run in outcome.items() if run.returncode != 0]
    assert failed and all(outcome[c].result["code"] == 11 for c in failed), {c: outcome[c].stdout for c in failed}
    for container in failed:
        retried = net.call("ADD", container, pods[container])
        assert retried.returncode == 0, retried
        outcome[container] = retried
    addresses = [pod_address(run.result) for run in outcome.values()]
    assert len(set(addresses)) == 24 and set(addresses) == set(net.allocations())
    for container, netns in pods.items():
        assert net.call("DEL", container, netns).returncode == 0
    assert net.allocations() == [] and net.bridge_ports() == []

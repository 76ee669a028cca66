"""ADD and DEL on real namespaces, bridges and veths: what a pod and the host end up with."""
from __future__ import annotations

import json
from ipaddress import IPv4Interface

import pytest

from proto.cni import CONTAINER_UNKNOWN, INVALID_ENV, INVALID_NETWORK_CONFIG, IPAM_EXHAUSTED, CniError
from services.cniworker.netlink import host_veth_name


def pod_address(pods, netns) -> list[str]:
    info = json.loads(pods.in_pod(netns, "ip", "-j", "-4", "addr", "show", "dev", "eth0").stdout)
    return [f"{a['local']}/{a['prefixlen']}" for a in info[0]["addr_info"]]


def bridge_mac(pods) -> str:
    return pods.sh_json("ip", "-j", "link", "show", pods.bridge)[0]["address"]


def test_three_pods_get_distinct_addresses_a_default_route_and_reach_each_other(pods):
    netns = [pods.netns() for _ in range(3)]
    results = [pods.add("pod0", netns[0])]
    gateway_mac = bridge_mac(pods)
    results += [pods.add(f"pod{i}", ns) for i, ns in enumerate(netns[1:], start=1)]
    # the gateway keeps its MAC as ports join (else the pods' ARP entries for it would go stale)
    assert bridge_mac(pods) == gateway_mac

    addresses = [r["ips"][0]["address"] for r in results]
    assert len(set(addresses)) == 3
    assert all(IPv4Interface(a).ip not in (IPv4Interface(pods.subnet).network.network_address,
                                           IPv4Interface(pods.subnet).network.broadcast_address)
               and a.split("/")[0] != pods.gateway for a in addresses)
    for ns, address in zip(netns, addresses):
        assert pod_address(pods, ns) == [address]
        routes = json.loads(pods.in_pod(ns, "ip", "-j", "route", "show", "default").stdout)
        assert [(r["gateway"], r["dev"]) for r in routes] == [(pods.gateway, "eth0")]
        lo = json.loads(pods.in_pod(ns, "ip", "-j", "link", "show", "lo").stdout)[0]
        assert "UP" in lo["flags"]
    for i, ns in enumerate(netns):
        peer = addresses[(i + 1) % 3].split("/")[0]
        pods.in_pod(ns, "ping", "-c1", "-W1", peer)
        pods.in_pod(ns, "ping", "-c1", "-W1", pods.gateway)
    # the pods' own loopback works too
    pods.in_pod(netns[0], "ping", "-c1", "-W1", "127.0.0.1")


def test_host_end_is_on_the_bridge_with_hairpin_and_the_result_names_both_ends(pods):
    ns = pods.netns()
    result = pods.add("hairpin-pod", ns, mtu=1400)
    host, pod = result["interfaces"]
    assert host["name"] == host_veth_name("hairpin-pod", "eth0")
    port = pods.sh_json("bridge", "-j", "-d", "link", "show", "dev", host["name"])[0]
    assert (port["master"], port["hairpin"], port["mtu"]) == (pods.bridge, True, 1400)
    link = json.loads(pods.in_pod(ns, "ip", "-j", "link", "show", "eth0").stdout)[0]
    assert (link["address"], link["mtu"], pod["sandbox"]) == (pod["mac"], 1400, ns)
    bridge_addr = pods.sh_json("ip", "-j", "-4", "addr", "show", "dev", pods.bridge)[0]["addr_info"]
    assert [f"{a['local']}/{a['prefixlen']}" for a in bridge_addr] == [f"{pods.gateway}/24"]


def test_a_bridge_deleted_between_two_adds_is_set_up_again_by_the_second(pods):
    # The second ADD comes within the time an ADD trusts the worker's last check of the bridge: the veth cannot
    # join the bridge that is gone, and the ADD sets it up again instead of failing.
    first_ns, second_ns = pods.netns(), pods.netns()
    pods.add("before", first_ns)
    pods.sh("ip", "link", "del", pods.bridge)
    result = pods.add("after", second_ns)
    assert pods.bridge_ports() == [result["interfaces"][0]["name"]]
    bridge_addr = pods.sh_json("ip", "-j", "-4", "addr", "show", "dev", pods.bridge)[0]["addr_info"]
    assert [f"{a['local']}/{a['prefixlen']}" for a in bridge_addr] == [f"{pods.gateway}/24"]
    pods.in_pod(second_ns, "ping", "-c1", "-W1", pods.gateway)


def test_0_4_0_result_and_dns_passed_through(pods):
    dns = {"nameservers": ["10.96.0.10"], "search": ["default.svc.cluster.local"]}
    result = pods.add("old-runtime", cniVersion="0.4.0", dns=dns)
    assert result["cniVersion"] == "0.4.0"
    assert result["ips"][0]["version"] == "4" and result["dns"] == dns


def test_same_container_added_twice_keeps_its_address(pods):
    ns = pods.netns()
    first = pods.add("twice", ns)
    second = pods.add("twice", ns)
    assert first["ips"] == second["ips"]
    assert len(pods.allocations()) == 1
    assert pod_address(pods, ns) == [first["ips"][0]["address"]]


def test_a_stale_host_veth_of_the_same_name_is_replaced(pods):
    stale = host_veth_name("stale", "eth0")
    pods.sh("ip", "link", "add", stale, "type", "veth", "peer", "name", f"x{stale[4:]}")
    result = pods.add("stale")
    assert result["interfaces"][0]["name"] == stale
    assert stale in pods.bridge_ports()


def test_pod_cidr_is_the_subnet_when_the_config_has_none(pods):
    result = pods.call("ADD", "from-flag", pods.netns(), pod_cidr=pods.subnet, ipam={})
    assert result["ips"][0]["address"].startswith(pods.prefix + ".")


def test_no_subnet_anywhere_is_a_config_error(pods):
    with pytest.raises(CniError) as err:
        pods.call("ADD", "nosubnet", pods.netns(), ipam={})
    assert err.value.code == INVALID_NETWORK_CONFIG and "--pod-cidr" in err.value.msg


def test_full_subnet_fails_naming_it_and_leaves_nothing_behind(pods):
    pods.subnet = f"{pods.prefix}.0/30"  # gateway .1, one pod .2, broadcast .3
    assert pods.add("only")["ips"][0]["address"] == f"{pods.prefix}.2/30"
    with pytest.raises(CniError) as err:
        pods.add("too-many")
    assert err.value.code == IPAM_EXHAUSTED and pods.subnet in err.value.msg
    assert pods.bridge_ports() == [host_veth_name("only", "eth0")]


def test_missing_namespace_is_container_unknown_and_allocates_nothing(pods):
    with pytest.raises(CniError) as err:
        pods.add("ghost", "/var/run/netns/does-not-exist-pyngress")
    assert err.value.code == CONTAINER_UNKNOWN
    assert pods.allocations() == {}


def test_a_netns_path_that_is_no_network_namespace_is_an_invalid_env(pods):
    with pytest.raises(CniError) as err:
        pods.add("wrong-path", "/proc/self/ns/uts")
    assert err.value.code == INVALID_ENV and "not a network namespace" in err.value.msg
    assert pods.allocations() == {}


def test_failure_part_way_rolls_back_address_and_veth(pods):
    ns = pods.netns()
    pods.in_pod(ns, "ip", "link", "add", "eth0", "type", "veth", "peer", "name", "other")
    with pytest.raises(CniError) as err:
        pods.add("clash", ns)
    assert err.value.code == INVALID_ENV and "eth0" in err.value.msg
    assert pods.allocations() == {}
    assert pods.sh("ip", "link", "show", host_veth_name("clash", "eth0"), check=False).returncode != 0


def test_del_twice_removes_veth_and_frees_the_address(pods):
    ns = pods.netns()
    address = pods.add("gone", ns)["ips"][0]["address"]
    assert pods.call("DEL", "gone", ns) == {}
    assert pods.call("DEL", "gone", ns) == {}
    assert pods.allocations() == {}
    assert pods.bridge_ports() == []
    assert json.loads(pods.in_pod(ns, "ip", "-j", "link", "show").stdout)[-1]["ifname"] == "lo"
    # the address is free again: a later pod may get it when the round robin comes back
    assert address.split("/")[0] not in pods.allocations()


def test_del_after_the_namespace_is_gone_or_without_one_succeeds(pods):
    ns = pods.netns()
    pods.add("deleted-ns", ns)
    pods.sh("ip", "netns", "del", ns.rsplit("/", 1)[1])
    assert pods.call("DEL", "deleted-ns", ns) == {}
    assert pods.call("DEL", "never-added", "") == {}
    assert pods.allocations() == {}
    assert host_veth_name("deleted-ns", "eth0") not in pods.bridge_ports()


def test_an_interface_of_the_same_name_in_the_pod_fails_the_add_and_leaves_nothing_behind(pods):
    ns = pods.netns()
    pods.in_pod(ns, "ip", "link", "add", "eth0", "type", "veth", "peer", "name", "other0")
    with pytest.raises(CniError) as err:
        pods.add("clash", ns)
    assert err.value.code == INVALID_ENV and "eth0" in err.value.msg and "exists there already" in err.value.msg
    assert pods.bridge_ports() == [] and pods.allocations() == {}
    names = sorted(link["ifname"] for link in json.loads(pods.in_pod(ns, "ip", "-j", "link", "show").stdout))
    assert names == ["eth0", "lo", "other0"]  # the pod's own pair, untouched

"""Batched rtnetlink requests against a real kernel, inside throw-away namespaces: each request gets its own
answer, in order, a failure does not stop the requests after it, and links are described as ip(8) shows them."""
from __future__ import annotations

import errno
import json
from ipaddress import IPv4Address, IPv4Interface

import pytest
from pyroute2.netlink.exceptions import NetlinkError

from services.cniworker import rtnl_batch
from services.cniworker.netns import NetNS
from services.cniworker.rtnl_batch import RtnlSocket


def test_each_request_is_answered_in_order_and_a_failure_stops_none_after_it(pods):
    path = pods.netns()
    address = IPv4Interface("10.250.0.2/24")

    def batch():
        with RtnlSocket() as sock:
            return sock.exchange([rtnl_batch.set_link(1), rtnl_batch.add_address(1, address),
                                  rtnl_batch.add_address(1, address), rtnl_batch.get_link(name="nothing-here"),
                                  rtnl_batch.default_route(1, IPv4Address("10.250.0.1"), replace=False)])
    with NetNS(path) as ns:
        up, added, again, missing, routed = ns.run(batch)
    assert [a.error for a in (up, added, again, missing, routed)] == [0, 0, errno.EEXIST, errno.ENODEV, 0]
    assert "already assigned" in again.message  # the kernel's own reason comes with its error code
    with pytest.raises(NetlinkError) as err:
        again.check()
    assert err.value.code == errno.EEXIST
    lo = json.loads(pods.in_pod(path, "ip", "-j", "-4", "addr", "show", "dev", "lo").stdout)[0]
    assert "UP" in lo["flags"] and [a["local"] for a in lo["addr_info"]] == ["127.0.0.1", "10.250.0.2"]
    routes = json.loads(pods.in_pod(path, "ip", "-j", "route", "show", "default").stdout)
    assert [(r["gateway"], r["dev"], r["protocol"]) for r in routes] == [("10.250.0.1", "lo", "static")]


def test_a_veth_created_into_another_namespace_is_described_with_its_peer_index_there(pods):
    host_side, pod_side = pods.netns(), pods.netns()
    pods.in_pod(host_side, "ip", "link", "add", "br0", "type", "bridge")
    bridge = json.loads(pods.in_pod(host_side, "ip", "-j", "link", "show", "br0").stdout)[0]["ifindex"]
    with NetNS(host_side) as host, NetNS(pod_side) as pod:
        def create():
            with RtnlSocket() as sock:
                return sock.exchange([
                    rtnl_batch.create_veth(host_name="vhost", pod_ifname="eth0", netns_fd=pod.fd,
                                           bridge_index=bridge, mtu=1400),
                    rtnl_batch.set_hairpin("vhost"), rtnl_batch.get_link(name="vhost")])
        created, hairpin, described = host.run(create)
    assert (created.error, hairpin.error, described.error) == (0, 0, 0)
    shown = json.loads(pods.in_pod(host_side, "ip", "-j", "link", "show", "vhost").stdout)[0]
    in_pod = json.loads(pods.in_pod(pod_side, "ip", "-j", "link", "show", "eth0").stdout)[0]
    assert described.link == rtnl_batch.Link(index=shown["ifindex"], mac=shown["address"],
                                             peer_index=in_pod["ifindex"])
    assert (shown["master"], shown["mtu"], in_pod["mtu"]) == ("br0", 1400, 1400)
    port = json.loads(pods.in_pod(host_side, "bridge", "-j", "-d", "link", "show", "dev", "vhost").stdout)[0]
    assert port["hairpin"] is True

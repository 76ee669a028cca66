"""CHECK compares the pod with its ADD result; UPDATE puts back what ADD set up."""
from __future__ import annotations

import json

import pytest

from proto.cni import CONTAINER_UNKNOWN, INVALID_NETWORK_CONFIG, CniError
from proto.cni import CHECK_FAILED


def check(pods, container_id, netns, prev, **config):
    return pods.call("CHECK", container_id, netns, prevResult=prev, **config)


def check_failure(pods, container_id, netns, prev) -> CniError:
    with pytest.raises(CniError) as err:
        check(pods, container_id, netns, prev)
    return err.value


def pod_state(pods, netns, host_veth) -> tuple:
    return (pods.in_pod(netns, "ip", "-j", "-d", "addr", "show").stdout,
            pods.in_pod(netns, "ip", "-j", "route", "show").stdout,
            pods.sh("bridge", "-j", "-d", "link", "show", "dev", host_veth).stdout)


@pytest.mark.parametrize("version", ["1.1.0", "0.4.0"])
def test_check_passes_right_after_add(pods, version):
    ns = pods.netns()
    prev = pods.add("checked", ns, cniVersion=version)
    assert check(pods, "checked", ns, prev, cniVersion=version) == {}


def test_check_names_a_removed_address(pods):
    ns = pods.netns()
    prev = pods.add("lost-address", ns)
    address = prev["ips"][0]["address"]
    pods.in_pod(ns, "ip", "addr", "del", address, "dev", "eth0")
    err = check_failure(pods, "lost-address", ns, prev)
    assert err.code == CHECK_FAILED and f"eth0 lacks address {address}" in err.msg


def test_check_names_a_removed_default_route_and_hairpin_off(pods):
    ns = pods.netns()
    prev = pods.add("lost-route", ns)
    pods.in_pod(ns, "ip", "route", "del", "default")
    pods.sh("bridge", "link", "set", "dev", prev["interfaces"][0]["name"], "hairpin", "off")
    err = check_failure(pods, "lost-route", ns, prev)
    assert f"lacks route to 0.0.0.0/0 via {pods.gateway}" in err.msg and "hairpin mode off" in err.msg


def test_check_names_a_mac_other_than_the_add_result(pods):
    ns = pods.netns()
    prev = pods.add("other-mac", ns)
    prev["interfaces"][1]["mac"] = "02:00:00:00:00:01"
    assert "eth0 has MAC" in check_failure(pods, "other-mac", ns, prev).msg


def test_check_of_a_gone_namespace_or_without_prev_result(pods):
    ns = pods.netns()
    prev = pods.add("vanished", ns)
    with pytest.raises(CniError) as err:
        pods.call("CHECK", "vanished", ns)
    assert err.value.code == INVALID_NETWORK_CONFIG and "prevResult" in err.value.msg
    pods.sh("ip", "netns", "del", ns.rsplit("/", 1)[1])
    assert check_failure(pods, "vanished", ns, prev).code == CONTAINER_UNKNOWN


def test_update_of_an_intact_pod_changes_nothing_and_answers_like_add(pods):
    ns = pods.netns()
    added = pods.add("steady", ns)
    before = pod_state(pods, ns, added["interfaces"][0]["name"])
    assert pods.call("UPDATE", "steady", ns) == added
    assert pod_state(pods, ns, added["interfaces"][0]["name"]) == before


def test_update_repairs_mtu_route_hairpin_and_bridge_port(pods):
    ns = pods.netns()
    added = pods.add("drifted", ns, mtu=1400)
    host = added["interfaces"][0]["name"]
    pods.in_pod(ns, "ip", "link", "set", "eth0", "mtu", "1300")
    pods.in_pod(ns, "ip", "route", "del", "default")
    pods.sh("ip", "link", "set", host, "nomaster")
    assert pods.call("UPDATE", "drifted", ns, mtu=1400) == added
    assert check(pods, "drifted", ns, added) == {}
    assert json.loads(pods.in_pod(ns, "ip", "-j", "link", "show", "eth0").stdout)[0]["mtu"] == 1400
    pods.in_pod(ns, "ping", "-c1", "-W1", pods.gateway)


def test_update_of_a_pod_never_added_is_container_unknown(pods):
    with pytest.raises(CniError) as err:
        pods.call("UPDATE", "stranger", pods.netns())
    assert err.value.code == CONTAINER_UNKNOWN and "ADD it before UPDATE" in err.value.msg

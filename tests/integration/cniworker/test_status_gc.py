"""STATUS says whether an ADD could succeed now; GC frees what the runtime no longer knows about."""
from __future__ import annotations

import pytest

from proto.cni import INVALID_NETWORK_CONFIG, CniError
from proto.cni import PLUGIN_NOT_AVAILABLE, PLUGIN_NOT_AVAILABLE_LIMITED_CONNECTIVITY
from services.cniworker.netlink import host_veth_name


def status_error(pods, **config) -> CniError:
    with pytest.raises(CniError) as err:
        pods.call("STATUS", **config)
    return err.value


def test_status_is_ready_on_a_fresh_network(pods):
    assert pods.call("STATUS") == {}


def test_status_is_not_available_when_the_subnet_is_full(pods):
    pods.subnet = f"{pods.prefix}.0/30"
    pods.add("the-only-one")
    err = status_error(pods)
    assert err.code == PLUGIN_NOT_AVAILABLE and pods.subnet in err.msg


def test_status_warns_of_limited_connectivity_when_the_bridge_of_running_pods_is_gone(pods):
    pods.add("orphaned")
    pods.sh("ip", "link", "del", pods.bridge)
    err = status_error(pods)
    assert err.code == PLUGIN_NOT_AVAILABLE_LIMITED_CONNECTIVITY and pods.bridge in err.msg


def test_status_is_not_available_when_the_state_dir_cannot_be_used(pods, tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    pods.state_dir = str(blocker)
    assert status_error(pods).code == PLUGIN_NOT_AVAILABLE


def test_gc_releases_attachments_the_runtime_does_not_list_and_deletes_their_veths(pods):
    netns = {cid: pods.netns() for cid in ("keep", "leak1", "leak2")}
    added = {cid: pods.add(cid, ns) for cid, ns in netns.items()}
    valid = [{"containerID": "keep", "ifname": "eth0"}]
    assert pods.call("GC", **{"cni.dev/valid-attachments": valid}) == {}
    assert list(pods.allocations().values()) == ["keep\r\neth0"]
    assert pods.bridge_ports() == [host_veth_name("keep", "eth0")]
    pods.in_pod(netns["keep"], "ping", "-c1", "-W1", pods.gateway)
    # the freed addresses are handed out again once the round robin comes back to them
    assert added["leak1"]["ips"][0]["address"].split("/")[0] not in pods.allocations()


def test_gc_with_a_malformed_attachment_list_says_what_it_expects(pods):
    with pytest.raises(CniError) as err:
        pods.call("GC", **{"cni.dev/valid-attachments": [{"containerID": "x"}]})
    assert err.value.code == INVALID_NETWORK_CONFIG and "containerID" in err.value.msg

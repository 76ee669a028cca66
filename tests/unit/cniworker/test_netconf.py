"""Network configuration checks: defaults, and a clear message for each bad value."""
import pytest

from proto.cni import INVALID_NETWORK_CONFIG, CniError
from services.cniworker.netconf import parse_network
from services.cniworker.netlink import host_veth_name


def test_defaults():
    net = parse_network({"cniVersion": "1.1.0", "name": "pods", "type": "pyngress-cni"})
    assert (net.bridge, net.mtu, net.ip_masq, net.dns) == ("pyngress0", 1500, False, {})


@pytest.mark.parametrize("override, message", [
    ({"name": "../etc"}, "network name"),
    ({"name": ""}, "network name"),
    ({"bridge": "a-very-long-bridge-name"}, "not a valid interface name"),
    ({"bridge": "br/0"}, "not a valid interface name"),
    ({"mtu": 20}, "mtu 20"),
    ({"mtu": "1500"}, "mtu '1500'"),
    ({"ipMasq": "yes"}, "ipMasq"),
    ({"dns": ["8.8.8.8"]}, "dns must be an object"),
])
def test_bad_values_are_named(override, message):
    with pytest.raises(CniError) as err:
        parse_network({"cniVersion": "1.1.0", "name": "pods", **override})
    assert err.value.code == INVALID_NETWORK_CONFIG and message in err.value.msg


def test_host_veth_names_are_derived_short_and_distinct():
    name = host_veth_name("abc123", "eth0")
    assert name == host_veth_name("abc123", "eth0") and len(name) == 15 and name.startswith("veth")
    assert name != host_veth_name("abc123", "net1") != host_veth_name("abc124", "eth0")

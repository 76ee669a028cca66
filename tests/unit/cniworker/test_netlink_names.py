"""Names the worker derives for the links it creates."""
from services.cniworker.netlink import host_veth_name
from services.common.cni_config.names import is_valid_ifname


def test_host_veth_names_are_derived_short_and_distinct():
    name = host_veth_name("abc123", "eth0")
    assert name == host_veth_name("abc123", "eth0") and len(name) == 15 and name.startswith("veth")
    assert name != host_veth_name("abc123", "net1") != host_veth_name("abc124", "eth0")
    assert is_valid_ifname(name)

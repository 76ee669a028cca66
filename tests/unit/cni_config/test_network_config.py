"""The typed network configuration: defaults, and a clear message for each bad value."""
import pytest

from proto.cni import INVALID_NETWORK_CONFIG, CniError
from services.common.cni_config.ipam import IpamSection
from services.common.cni_config.network import parse_network, parse_network_config


def test_defaults():
    net = parse_network({"cniVersion": "1.1.0", "name": "pods", "type": "pyngress-cni"})
    assert (net.bridge, net.mtu, net.ip_masq, net.dns) == ("pyngress0", 1500, False, {})
    assert (net.ipam, net.server_socket, net.prev_result, net.valid_attachments) == (IpamSection(), None, None, None)


def test_the_configuration_is_parsed_from_the_plugins_stdin_once_into_frozen_objects():
    net = parse_network_config(b'{"cniVersion": "1.0.0", "name": "pods", "type": "pyngress-cni", "mtu": 1400, '
                               b'"ipam": {"subnet": "10.1.0.0/16"}, "custom": {"kept": true}}', command="ADD")
    assert (net.cni_version, net.mtu, str(net.ipam.subnet), net.raw["custom"]) == \
        ("1.0.0", 1400, "10.1.0.0/16", {"kept": True})
    with pytest.raises(AttributeError):
        net.mtu = 9000  # type: ignore[misc]


@pytest.mark.parametrize("override, message", [
    ({"name": "../etc"}, "network name"),
    ({"name": ""}, "network name"),
    ({"bridge": "a-very-long-bridge-name"}, "not a valid interface name"),
    ({"bridge": "br/0"}, "not a valid interface name"),
    ({"mtu": 20}, "mtu 20"),
    ({"mtu": "1500"}, "mtu '1500'"),
    ({"ipMasq": "yes"}, "ipMasq"),
    ({"dns": ["8.8.8.8"]}, "dns must be an object"),
    # A key given as null is as wrong as any other type (the server refused these, and an ADD failed either way).
    ({"mtu": None}, "mtu None"),
    ({"dns": None}, "dns must be an object"),
    ({"bridge": None}, "bridge None"),
])
def test_bad_values_are_named(override, message):
    with pytest.raises(CniError) as err:
        parse_network({"cniVersion": "1.1.0", "name": "pods", "type": "pyngress-cni", **override})
    assert err.value.code == INVALID_NETWORK_CONFIG and message in err.value.msg

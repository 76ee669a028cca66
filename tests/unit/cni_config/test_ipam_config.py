"""The `ipam` section: parsed once (what it says alone), then resolved with the node's pod CIDR."""
from ipaddress import IPv4Address, IPv4Network

import pytest

from proto.cni import INVALID_NETWORK_CONFIG, UNSUPPORTED_FIELD, CniError
from services.common.cni_config.ipam import IpamConfig, IpamSection, parse_ipam


def resolve_ipam(ipam: dict, pod_cidr: str | None) -> IpamConfig:
    return parse_ipam(ipam).resolve(pod_cidr)


def test_defaults_gateway_first_address_and_range_spans_the_usable_hosts():
    cfg = resolve_ipam({"subnet": "10.20.30.0/24"}, None)
    assert (str(cfg.gateway), str(cfg.range_start), str(cfg.range_end)) == ("10.20.30.1", "10.20.30.1", "10.20.30.254")
    assert cfg.size() == 253


def test_pod_cidr_is_used_when_the_config_has_no_subnet():
    assert resolve_ipam({}, "10.9.0.0/16").subnet == IPv4Network("10.9.0.0/16")
    assert resolve_ipam({"subnet": "10.8.0.0/24"}, "10.9.0.0/16").subnet == IPv4Network("10.8.0.0/24")
    # a pod CIDR with host bits is taken as its network; a configuration's subnet must be exact
    assert resolve_ipam({}, "10.9.1.7/16").subnet == IPv4Network("10.9.0.0/16")


def test_the_section_says_only_what_it_says():
    assert parse_ipam({}) == IpamSection()
    section = parse_ipam({"type": "pyngress", "gateway": "10.9.0.254", "rangeStart": "10.9.1.0"})
    assert (section.subnet, section.gateway, section.range_start, section.range_end) == \
        (None, IPv4Address("10.9.0.254"), IPv4Address("10.9.1.0"), None)
    cfg = section.resolve("10.9.0.0/16")
    assert (str(cfg.gateway), str(cfg.range_start), str(cfg.range_end)) == ("10.9.0.254", "10.9.1.0", "10.9.255.254")


@pytest.mark.parametrize("ipam, pod_cidr, message", [
    ({}, None, "set ipam.subnet in the network configuration or start the CNI server with --pod-cidr"),
    ({"subnet": "10.1.2.0"}, None, None),  # a single host: /32
    ({"subnet": "banana"}, None, "is not a CIDR"),
    ({"subnet": "fd00::/64"}, None, "only IPv4"),
    ({"subnet": "10.1.2.0/31"}, None, "too small"),
    ({"subnet": "10.1.2.0/24", "gateway": "10.1.3.1"}, None, "must be a host address inside ipam.subnet"),
    ({"subnet": "10.1.2.0/24", "rangeStart": "10.1.2.255"}, None, "rangeStart 10.1.2.255 must be a host address"),
    ({"subnet": "10.1.2.0/24", "rangeStart": "10.1.2.9", "rangeEnd": "10.1.2.8"}, None, "comes after"),
    ({"subnet": "10.1.2.0/24", "rangeStart": "10.1.2.1", "rangeEnd": "10.1.2.1"}, None, "no address besides the gateway"),
    ({"subnet": "10.1.2.0/24", "gateway": "x"}, None, "ipam.gateway 'x' is not an IPv4 address"),
    # the same rules for the pod CIDR that stands in for a missing subnet
    ({}, "banana", "the pod CIDR 'banana' is not a CIDR"),
    ({}, "fd00::/64", "only IPv4"),
    ({}, "10.1.2.0/31", "too small"),
    ({"gateway": "10.1.3.1"}, "10.1.2.0/24", "ipam.gateway 10.1.3.1 must be a host address inside the pod CIDR"),
    ({"rangeEnd": "10.1.2.255"}, "10.1.2.0/24", "ipam.rangeEnd 10.1.2.255 must be a host address"),
])
def test_bad_ipam_sections_are_rejected_with_what_to_change(ipam, pod_cidr, message):
    with pytest.raises(CniError) as err:
        resolve_ipam(ipam, pod_cidr)
    assert err.value.code == INVALID_NETWORK_CONFIG
    if message:
        assert message in err.value.msg
    assert err.value.details


@pytest.mark.parametrize("subnet", [5, None, ["10.0.0.0/24"], "10.0.0.0/33", "10.1.2.3/24"])
def test_a_subnet_is_a_cidr_string_without_host_bits(subnet):
    with pytest.raises(CniError) as err:
        parse_ipam({"subnet": subnet})
    assert err.value.code == INVALID_NETWORK_CONFIG and "ipam.subnet" in err.value.msg


def test_an_unknown_key_is_an_unsupported_field():
    with pytest.raises(CniError) as err:
        parse_ipam({"subnet": "10.0.0.0/24", "routes": []})
    assert err.value.code == UNSUPPORTED_FIELD and err.value.msg == "ipam field routes=[] is not supported"

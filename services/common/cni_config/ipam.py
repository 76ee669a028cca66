"""The `ipam` section of the network configuration: `{"type", "subnet", "gateway", "rangeStart", "rangeEnd"}`.

Parsing checks what the section says on its own (`IpamSection`): known keys (an unknown one is code 2),
an IPv4 subnet in CIDR form with room for a gateway and a pod, IPv4 host addresses inside it, a range
that runs forwards. Without a subnet, the node's pod CIDR (`--pod-cidr`, or its Node's spec.podCIDR)
takes its place: `IpamSection.resolve` checks the addresses against it, fills in the defaults (gateway
and range start: the first host; range end: the last) and gives the `IpamConfig` the allocator uses.
Every problem else is code 7 (invalid network configuration).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network, ip_network
from typing import Any

from proto.cni import INVALID_NETWORK_CONFIG, UNSUPPORTED_FIELD, CniError

IPAM_KEYS = ("type", "subnet", "gateway", "rangeStart", "rangeEnd")
# A /30 holds a gateway and one pod besides the network and broadcast addresses; anything smaller, none.
MAX_PREFIX_LENGTH = 30
_CONFIG_SUBNET = "ipam.subnet"
_POD_CIDR = "the pod CIDR"


@dataclass(frozen=True, kw_only=True)
class IpamConfig:
    """The addresses one network hands out: every default filled in."""
    subnet: IPv4Network
    gateway: IPv4Address
    range_start: IPv4Address
    range_end: IPv4Address

    def size(self) -> int:
        count = int(self.range_end) - int(self.range_start) + 1
        return count - (1 if self.range_start <= self.gateway <= self.range_end else 0)

    def contains(self, ip: IPv4Address) -> bool:
        return self.range_start <= ip <= self.range_end and ip != self.gateway


@dataclass(frozen=True, kw_only=True)
class IpamSection:
    """What the `ipam` section says; None where it says nothing."""
    subnet: IPv4Network | None = None
    gateway: IPv4Address | None = None
    range_start: IPv4Address | None = None
    range_end: IPv4Address | None = None

    def resolve(self, pod_cidr: str | None) -> IpamConfig:
        """The section with the node's pod CIDR standing in for a missing subnet, and every default filled in."""
        subnet = self.subnet
        if subnet is None:
            if not pod_cidr:
                raise no_pod_subnet()
            subnet = parse_subnet(pod_cidr, what=_POD_CIDR, strict=False)
            for key, ip in (("gateway", self.gateway), ("rangeStart", self.range_start), ("rangeEnd", self.range_end)):
                if ip is not None:
                    _check_host_address(ip, key=key, subnet=subnet, subnet_name=_POD_CIDR)
        first, last = subnet.network_address + 1, subnet.broadcast_address - 1
        config = IpamConfig(subnet=subnet, gateway=self.gateway or first, range_start=self.range_start or first,
                            range_end=self.range_end or last)
        if config.size() == 0:
            raise _invalid(f"ipam range {config.range_start}-{config.range_end} holds no address besides the "
                           f"gateway {config.gateway}", "widen the range, or move the gateway out of it")
        return config


def parse_ipam(section: Any) -> IpamSection:
    if not isinstance(section, dict):
        raise _invalid("ipam must be a JSON object", 'e.g. "ipam": {"subnet": "10.88.0.0/24"}')
    for key, value in section.items():
        if key not in IPAM_KEYS:
            raise CniError(UNSUPPORTED_FIELD, f"ipam field {key}={json.dumps(value)} is not supported",
                           details=f"ipam takes {', '.join(IPAM_KEYS[1:])}")
    subnet = parse_subnet(section["subnet"], what=_CONFIG_SUBNET, strict=True) if "subnet" in section else None
    addresses = {key: _parse_address(section[key], key=key, subnet=subnet)
                 for key in ("gateway", "rangeStart", "rangeEnd") if key in section}
    start, end = addresses.get("rangeStart"), addresses.get("rangeEnd")
    if start and end and start > end:
        raise _invalid(f"ipam.rangeStart {start} comes after ipam.rangeEnd {end}", "swap them")
    return IpamSection(subnet=subnet, gateway=addresses.get("gateway"), range_start=start, range_end=end)


def parse_subnet(text: Any, *, what: str, strict: bool) -> IPv4Network:
    """An IPv4 subnet with room for a gateway and a pod. `strict` refuses host bits (a network
    configuration must be exact); the pod CIDR given on a command line is taken as its network."""
    try:
        if not isinstance(text, str):
            raise ValueError(f"{type(text).__name__} is not a string")
        subnet = ip_network(text, strict=strict)
    except ValueError as err:
        raise _invalid(f"{what} {text!r} is not a CIDR such as 10.88.0.0/24 ({err})",
                       "give the network address and prefix length, e.g. 10.88.0.0/24") from None
    if not isinstance(subnet, IPv4Network):
        raise _invalid(f"{what} {text}: only IPv4 subnets are supported", "give an IPv4 subnet, e.g. 10.88.0.0/24")
    if subnet.prefixlen > MAX_PREFIX_LENGTH:
        raise _invalid(f"{what} {subnet} is too small: a gateway and a pod need at least a /{MAX_PREFIX_LENGTH}",
                       f"give a /{MAX_PREFIX_LENGTH} or larger")
    return subnet


def no_pod_subnet() -> CniError:
    """Neither the network configuration nor the node gives a subnet."""
    return _invalid("no pod subnet: set ipam.subnet in the network configuration or start the CNI server "
                    "with --pod-cidr", "or start it with --node-name of a Node whose spec.podCIDR is set")


def _parse_address(text: Any, *, key: str, subnet: IPv4Network | None) -> IPv4Address:
    try:
        ip = IPv4Address(text if isinstance(text, str) else "")
    except ValueError:
        raise _invalid(f"ipam.{key} {text!r} is not an IPv4 address", "give a single address, e.g. 10.88.0.1") from None
    if subnet is not None:
        _check_host_address(ip, key=key, subnet=subnet, subnet_name=_CONFIG_SUBNET)
    return ip


def _check_host_address(ip: IPv4Address, *, key: str, subnet: IPv4Network, subnet_name: str) -> None:
    if ip not in subnet:
        why, fix = f"it is outside {subnet_name}", "pick an address inside it"
    elif ip in (subnet.network_address, subnet.broadcast_address):
        why, fix = "it is the network or broadcast address", "pick an address strictly inside the subnet"
    else:
        return
    raise _invalid(f"ipam.{key} {ip} must be a host address inside {subnet_name} {subnet}: {why}", fix)


def _invalid(msg: str, details: str) -> CniError:
    return CniError(INVALID_NETWORK_CONFIG, msg, details=details)

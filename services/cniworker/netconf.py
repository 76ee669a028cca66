"""The network configuration a worker acts on, checked once so the commands can trust it."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from proto.cni import INVALID_NETWORK_CONFIG, CniError

# The CNI specification's rule for network names; it also keeps the name a safe path component
# (the IPAM store is a directory named after it) and a safe nftables chain name.
_NETWORK_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")
# Linux interface names: at most 15 bytes, no '/', ':' or whitespace, not "." or "..".
_IFNAME = re.compile(r"[^/:\s]{1,15}")

DEFAULT_BRIDGE = "pyngress0"
DEFAULT_MTU = 1500


@dataclass(frozen=True)
class NetworkConfig:
    cni_version: str
    name: str
    bridge: str = DEFAULT_BRIDGE
    mtu: int = DEFAULT_MTU
    ip_masq: bool = False
    dns: dict = field(default_factory=dict)


def parse_network(config: dict) -> NetworkConfig:
    """The plugin-level settings of `config`; the `ipam` section is resolved separately (ipam.resolve_ipam)."""
    name = config.get("name")
    if not isinstance(name, str) or not _NETWORK_NAME.fullmatch(name):
        raise _invalid(f"network name {name!r} must start with a letter or digit and contain only letters, "
                       "digits, '_', '.' and '-'")
    bridge = config.get("bridge", DEFAULT_BRIDGE)
    if not isinstance(bridge, str) or not is_valid_ifname(bridge):
        raise _invalid(f"bridge {bridge!r} is not a valid interface name (1-15 characters, no '/', ':' or spaces)")
    mtu = config.get("mtu", DEFAULT_MTU)
    if isinstance(mtu, bool) or not isinstance(mtu, int) or not 68 <= mtu <= 65535:
        raise _invalid(f"mtu {mtu!r} must be an integer between 68 and 65535")
    ip_masq = config.get("ipMasq", False)
    if not isinstance(ip_masq, bool):
        raise _invalid(f"ipMasq {ip_masq!r} must be true or false")
    dns = config.get("dns") or {}
    if not isinstance(dns, dict):
        raise _invalid("dns must be an object with nameservers, domain, search and options")
    return NetworkConfig(cni_version=str(config.get("cniVersion", "")), name=name, bridge=bridge, mtu=mtu,
                         ip_masq=ip_masq, dns=dns)


def is_valid_ifname(name: str) -> bool:
    return bool(_IFNAME.fullmatch(name)) and name not in (".", "..") and len(name.encode()) <= 15


def _invalid(msg: str) -> CniError:
    return CniError(INVALID_NETWORK_CONFIG, msg)

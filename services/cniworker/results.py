"""The CNI result of ADD (and UPDATE) in the version the caller asked for.

1.0.0 and 1.1.0 share one shape; 1.1.0 may also carry each interface's MTU; 0.4.0 adds
`"version": "4"` to each IP entry. The container interface is index 1 of `interfaces`.
"""
from __future__ import annotations

from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Interface
from typing import Any, Mapping

from services.common.cni_config.network import check_cni_version

DEFAULT_ROUTE = "0.0.0.0/0"


@dataclass(frozen=True, kw_only=True)
class Attachment:
    """What ADD built for one pod interface: everything its result reports."""
    host_ifname: str
    host_mac: str
    pod_ifname: str
    pod_mac: str
    sandbox: str
    address: IPv4Interface
    gateway: IPv4Address
    mtu: int


def add_result(*, cni_version: str, attachment: Attachment, dns: Mapping[str, Any]) -> dict:
    check_cni_version(cni_version)
    host: dict[str, str | int] = {"name": attachment.host_ifname, "mac": attachment.host_mac}
    pod: dict[str, str | int] = {"name": attachment.pod_ifname, "mac": attachment.pod_mac,
                                 "sandbox": attachment.sandbox}
    if cni_version == "1.1.0":
        host["mtu"] = pod["mtu"] = attachment.mtu
    ip: dict[str, str | int] = {"address": str(attachment.address), "gateway": str(attachment.gateway), "interface": 1}
    if cni_version == "0.4.0":
        ip = {"version": "4", **ip}
    return {
        "cniVersion": cni_version,
        "interfaces": [host, pod],
        "ips": [ip],
        "routes": [{"dst": DEFAULT_ROUTE, "gw": str(attachment.gateway)}],
        "dns": dict(dns),
    }

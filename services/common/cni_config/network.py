"""The network configuration (the plugin's stdin): its well-known fields and pyngress-cni's own.

`{"cniVersion", "name", "type": "pyngress-cni", "bridge" (default "pyngress0"), "mtu" (default 1500),
"ipMasq", "ipam": {...}, "dns", "serverSocket"}` (DESIGN.md, Interfaces), plus what a runtime adds:
`prevResult` (CHECK), `runtimeConfig`, `args`, and `cni.dev/valid-attachments` (GC). A key given as
null is a mistake like any other wrong type. Codes: JSON that does not decode is 6, an unsupported
cniVersion is 1, a key the `ipam` section does not know is 2, anything else wrong is 7.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping

from proto.cni import DECODE_FAILURE, INCOMPATIBLE_VERSION, INVALID_NETWORK_CONFIG, SUPPORTED_VERSIONS, CniError

from .ipam import IpamSection, parse_ipam
from .names import is_valid_cni_name, is_valid_ifname
from .runtime_env import AttachmentId

DEFAULT_BRIDGE = "pyngress0"
DEFAULT_MTU = 1500
_EXAMPLE = 'e.g. {"cniVersion": "1.1.0", "name": "pods", "type": "pyngress-cni", "ipam": {"subnet": "10.88.0.0/24"}}'
_OBJECT_KEYS = ("prevResult", "dns", "runtimeConfig", "args")
# libcni passes GC's list under both names (the specification once named it "cni.dev/attachments").
_VALID_ATTACHMENTS = ("cni.dev/valid-attachments", "cni.dev/attachments")


@dataclass(frozen=True, kw_only=True)
class NetworkConfig:
    cni_version: str
    name: str
    type: str
    bridge: str = DEFAULT_BRIDGE
    mtu: int = DEFAULT_MTU
    ip_masq: bool = False
    ipam: IpamSection = IpamSection()
    dns: Mapping[str, Any] = field(default_factory=dict)
    server_socket: str | None = None
    prev_result: Mapping[str, Any] | None = None      # CHECK: the result of the ADD
    valid_attachments: frozenset[AttachmentId] | None = None  # GC only: the attachments to keep
    raw: Mapping[str, Any] = field(default_factory=dict)  # the whole document, unknown keys included


def decode_json(data: bytes, *, what: str, details: str) -> Any:
    """`data` as JSON; code 6 (decode failure) naming `what` when it is not JSON at all."""
    try:
        return json.loads(data)
    except (UnicodeDecodeError, ValueError) as err:
        raise CniError(DECODE_FAILURE, f"{what} is not JSON ({err})", details=details) from None


def decode_network_config(config: bytes) -> dict[str, Any]:
    """The plugin's stdin as a JSON object."""
    document = decode_json(config, what="network configuration",
                           details="pass the network configuration (a JSON object) on the plugin's stdin")
    _require_object(document)
    return document


def parse_network_config(config: bytes, *, command: str) -> NetworkConfig:
    return parse_network(decode_network_config(config), command=command)


def parse_network(document: Any, *, command: str = "ADD") -> NetworkConfig:
    """The typed network configuration of a `command` call (GC's reads its valid attachments too)."""
    _require_object(document)
    version = document.get("cniVersion")
    if not isinstance(version, str) or not version:
        raise _invalid('network configuration lacks "cniVersion"', f"set it to one of {_versions()}")
    check_cni_version(version)
    name = document.get("name")
    if not isinstance(name, str) or not is_valid_cni_name(name):
        raise _invalid(f"network name {name!r} is not valid",
                       "give \"name\" starting with a letter or digit, then letters, digits, '_', '.' or '-'")
    plugin_type = document.get("type")
    if not isinstance(plugin_type, str) or not plugin_type:
        raise _invalid('network configuration lacks "type"', 'set "type": "pyngress-cni"')
    bridge = document.get("bridge", DEFAULT_BRIDGE)
    if not isinstance(bridge, str) or not is_valid_ifname(bridge):
        raise _invalid(f"bridge {bridge!r} is not a valid interface name",
                       "use 1-15 bytes, not '.' or '..', without '/', ':' or whitespace (default pyngress0)")
    mtu = document.get("mtu", DEFAULT_MTU)
    if isinstance(mtu, bool) or not isinstance(mtu, int) or not 68 <= mtu <= 65535:
        raise _invalid(f"mtu {mtu!r} must be an integer from 68 to 65535", f"or leave it out ({DEFAULT_MTU})")
    ip_masq = document.get("ipMasq", False)
    if not isinstance(ip_masq, bool):
        raise _invalid(f"ipMasq {ip_masq!r} must be true or false", 'e.g. "ipMasq": true')
    for key in _OBJECT_KEYS:
        if key in document and not isinstance(document[key], dict):
            raise _invalid(f"{key} must be an object", f"give {key} as a JSON object {{...}} or leave it out")
    socket_path = document.get("serverSocket")
    if socket_path is not None and (not isinstance(socket_path, str) or not socket_path.startswith("/")):
        raise _invalid(f"serverSocket {socket_path!r} must be an absolute path",
                       "e.g. /var/run/pyngress/cni/cni-server.sock, or leave it out")
    ipam = parse_ipam(document["ipam"]) if "ipam" in document else IpamSection()
    return NetworkConfig(cni_version=version, name=name, type=plugin_type, bridge=bridge, mtu=mtu, ip_masq=ip_masq,
                         ipam=ipam, dns=document.get("dns", {}), server_socket=socket_path,
                         prev_result=document.get("prevResult"),
                         valid_attachments=_valid_attachments(document) if command == "GC" else None,
                         raw=document)


def check_cni_version(version: str) -> None:
    """A cniVersion this plugin speaks, in configurations and in results."""
    if version not in SUPPORTED_VERSIONS:
        raise CniError(INCOMPATIBLE_VERSION, f"cniVersion {version!r} is not supported",
                       details=f"pyngress-cni supports {_versions()}")


def _require_object(document: Any) -> None:
    if not isinstance(document, dict):
        raise _invalid(f"network configuration must be a JSON object, got {type(document).__name__}", _EXAMPLE)


def _valid_attachments(document: Mapping[str, Any]) -> frozenset[AttachmentId]:
    entries = document.get(_VALID_ATTACHMENTS[0], document.get(_VALID_ATTACHMENTS[1], []))
    if not isinstance(entries, list) or not all(
            isinstance(e, dict) and isinstance(e.get("containerID"), str) and isinstance(e.get("ifname"), str)
            for e in entries):
        raise _invalid('cni.dev/valid-attachments must be a list of {"containerID": ..., "ifname": ...}',
                       'e.g. [{"containerID": "abc", "ifname": "eth0"}]')
    return frozenset(AttachmentId(e["containerID"], e["ifname"]) for e in entries)


def _versions() -> str:
    return ", ".join(SUPPORTED_VERSIONS)


def _invalid(msg: str, details: str) -> CniError:
    return CniError(INVALID_NETWORK_CONFIG, msg, details=details)

"""Validation of one CNI call as the plugin forwards it (CNI specification 1.1).

The plugin sends `{"env": {...CNI_* variables...}, "config": "<base64 of its stdin>"}`. `parse_request`
turns that body into a `CniRequest` or raises `CniError` with the specification's code and a message
that says what to change. The worker calls `build_request` on the same two parts it receives from the
broker, so a request is checked by the same rules wherever it arrives.

Codes: a body or config that cannot be decoded is 6; missing or malformed environment is 4 (an
unknown command included: CNI_COMMAND is an environment variable); an unsupported cniVersion is 1;
a network configuration that decodes but is wrong is 7; a key the `ipam` section does not know is 2.
"""
from __future__ import annotations

import binascii
import ipaddress
import json
import re
from typing import Any, Mapping

from proto.cni import (DECODE_FAILURE, INCOMPATIBLE_VERSION, INVALID_ENV, INVALID_NETWORK_CONFIG,
                       SUPPORTED_VERSIONS, UNSUPPORTED_FIELD, CniError, CniRequest)

NEWEST_VERSION = SUPPORTED_VERSIONS[-1]

_ATTACHMENT_ENV = ("CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME")
# The variables each command cannot do without (CNI_COMMAND aside). UPDATE is OpenShift SDN's
# re-apply of a running pod's settings and needs what ADD needs.
REQUIRED_ENV: dict[str, tuple[str, ...]] = {
    "ADD": _ATTACHMENT_ENV,
    "CHECK": _ATTACHMENT_ENV,
    "UPDATE": _ATTACHMENT_ENV,
    "DEL": ("CNI_CONTAINERID", "CNI_IFNAME"),  # CNI_NETNS may be gone by then: DEL must still succeed
    "VERSION": (),
    "STATUS": (),
    "GC": (),
}
COMMANDS = tuple(REQUIRED_ENV)
# Commands that create or change a pod's network and so must know which pod it is.
POD_COMMANDS = frozenset({"ADD", "UPDATE"})

# The specification's container ID and network name syntax; the length cap keeps IDs usable in file names.
_CONTAINER_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")
_MAX_CONTAINER_ID = 255
_CNI_ARGS_KEY = re.compile(r"[A-Za-z0-9_]+")
# Kubernetes: namespaces are DNS-1123 labels, pod names DNS-1123 subdomains, UIDs UUIDs (or hashes).
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_NAMESPACE = re.compile(_DNS_LABEL)
_POD_NAME = re.compile(rf"{_DNS_LABEL}(\.{_DNS_LABEL})*")
_POD_UID = re.compile(r"[A-Za-z0-9-]{1,64}")
_IPAM_KEYS = ("type", "subnet", "gateway", "rangeStart", "rangeEnd")
_MAX_NETNS_PATH = 4096
_EXAMPLE = 'e.g. {"cniVersion": "1.1.0", "name": "pods", "type": "pyngress-cni", "ipam": {"subnet": "10.88.0.0/24"}}'


def parse_request(body: bytes) -> CniRequest:
    """Decode and validate the HTTP body the plugin sent."""
    env, config = decode_body(body)
    return build_request(env, config)


def decode_body(body: bytes) -> tuple[dict[str, str], bytes]:
    """The body's environment and the raw network configuration (the plugin's stdin)."""
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, ValueError) as err:
        raise CniError(DECODE_FAILURE, f"request body is not JSON ({err})",
                       'send {"env": {"CNI_COMMAND": ...}, "config": "<base64 of the network configuration>"}')
    if not isinstance(data, dict):
        raise CniError(DECODE_FAILURE, f"request body must be a JSON object, got {type(data).__name__}",
                       'send {"env": {...}, "config": "<base64 of the network configuration>"}')
    env = data.get("env")
    if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        raise CniError(DECODE_FAILURE, 'request field "env" must be an object of string values',
                       "pass the plugin's CNI_* environment variables as strings")
    encoded = data.get("config")
    if not isinstance(encoded, str):
        raise CniError(DECODE_FAILURE, 'request field "config" must be a base64 string',
                       "pass the plugin's stdin (the network configuration) base64-encoded")
    try:
        config = binascii.a2b_base64(encoded.encode("ascii"), strict_mode=True)
    except (UnicodeEncodeError, binascii.Error) as err:
        raise CniError(DECODE_FAILURE, f'request field "config" is not valid base64 ({err})',
                       "encode the network configuration with standard base64 (RFC 4648, with padding)")
    return env, config


def build_request(env: Mapping[str, str], config: bytes) -> CniRequest:
    """Validate the CNI environment and the network configuration of one call."""
    command = _command(env)
    missing = [name for name in REQUIRED_ENV[command] if not env.get(name)]
    if missing:
        raise CniError(INVALID_ENV, f"{', '.join(missing)} not set; {command} requires "
                                    f"{', '.join(REQUIRED_ENV[command])}",
                       "set them in the plugin's environment as a container runtime does, e.g. "
                       "CNI_CONTAINERID=<id> CNI_NETNS=/var/run/netns/<name> CNI_IFNAME=eth0")
    container_id = env.get("CNI_CONTAINERID", "")
    if container_id:
        _check_container_id(container_id)
    ifname = env.get("CNI_IFNAME", "")
    if ifname and not is_valid_ifname(ifname):
        raise CniError(INVALID_ENV, f"CNI_IFNAME {ifname!r} is not a valid interface name",
                       "use 1-15 bytes, not '.' or '..', without '/', ':' or whitespace (e.g. eth0)")
    netns = env.get("CNI_NETNS", "")
    if netns and (not netns.startswith("/") or "\0" in netns or len(netns) > _MAX_NETNS_PATH):
        raise CniError(INVALID_ENV, f"CNI_NETNS {netns!r} is not an absolute path",
                       "pass the network namespace as a path such as /var/run/netns/NAME or /proc/PID/ns/net")
    args = parse_cni_args(env.get("CNI_ARGS", ""))
    if command in POD_COMMANDS:
        absent = [key for key in ("K8S_POD_NAMESPACE", "K8S_POD_NAME") if not args.get(key)]
        if absent:
            raise CniError(INVALID_ENV, f"CNI_ARGS lacks {' and '.join(absent)}; {command} needs the pod's identity",
                           "pass CNI_ARGS=K8S_POD_NAMESPACE=<namespace>;K8S_POD_NAME=<name>[;K8S_POD_UID=<uid>]")
    _check_pod_identity(args)
    network = _decode_config(config, command)
    if command != "VERSION":
        check_network_config(network, command)
    return CniRequest(command=command, container_id=container_id, netns=netns, ifname=ifname, args=args,
                      config=network, path=env.get("CNI_PATH", ""))


def parse_cni_args(text: str) -> dict[str, str]:
    """CNI_ARGS "K=V;K=V" as a dict; a pair without '=', an empty or repeated key is an error."""
    args: dict[str, str] = {}
    if not text:
        return args
    for pair in text.split(";"):
        key, sep, value = pair.partition("=")
        if not sep or not _CNI_ARGS_KEY.fullmatch(key):
            raise CniError(INVALID_ENV, f"CNI_ARGS pair {pair!r} is not KEY=VALUE",
                           "write CNI_ARGS as KEY=VALUE pairs separated by ';' (keys: letters, digits, '_'), "
                           "e.g. K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0")
        if key in args:
            raise CniError(INVALID_ENV, f"CNI_ARGS names {key} twice", "give each key once")
        args[key] = value
    return args


def is_valid_ifname(name: str) -> bool:
    """Linux's rule for interface names (net/core/dev.c dev_valid_name), which CNI_IFNAME must follow;
    control characters are refused as well."""
    return (0 < len(name.encode()) <= 15 and name not in (".", "..")
            and not any(c in "/:" or c.isspace() or c < " " for c in name))


def check_network_config(config: Any, command: str = "ADD") -> None:
    """The network configuration's well-known fields and pyngress-cni's own (see DESIGN.md)."""
    if not isinstance(config, dict):
        raise _invalid(f"network configuration must be a JSON object, got {type(config).__name__}", _EXAMPLE)
    version = config.get("cniVersion")
    if not isinstance(version, str) or not version:
        raise _invalid('network configuration lacks "cniVersion"', f"set it to one of {_versions()}")
    if version not in SUPPORTED_VERSIONS:
        raise CniError(INCOMPATIBLE_VERSION, f"cniVersion {version!r} is not supported",
                       f"pyngress-cni supports {_versions()}")
    name = config.get("name")
    if not isinstance(name, str) or not _CONTAINER_ID.fullmatch(name):
        raise _invalid(f"network name {name!r} is not valid",
                       "give \"name\" starting with a letter or digit, then letters, digits, '_', '.' or '-'")
    plugin_type = config.get("type")
    if not isinstance(plugin_type, str) or not plugin_type:
        raise _invalid('network configuration lacks "type"', 'set "type": "pyngress-cni"')
    bridge = config.get("bridge", "pyngress0")
    if not isinstance(bridge, str) or not is_valid_ifname(bridge):
        raise _invalid(f"bridge {bridge!r} is not a valid interface name",
                       "use 1-15 bytes without '/', ':' or whitespace (default pyngress0)")
    mtu = config.get("mtu")
    if mtu is not None and (isinstance(mtu, bool) or not isinstance(mtu, int) or not 68 <= mtu <= 65535):
        raise _invalid(f"mtu {mtu!r} is out of range", "give an integer from 68 to 65535, or leave it out")
    if not isinstance(config.get("ipMasq", False), bool):
        raise _invalid(f"ipMasq {config['ipMasq']!r} must be true or false", 'e.g. "ipMasq": true')
    for key in ("prevResult", "dns", "runtimeConfig", "args"):
        if key in config and not isinstance(config[key], dict):
            raise _invalid(f"{key} must be a JSON object", f"give {key} as {{...}} or leave it out")
    socket_path = config.get("serverSocket")
    if socket_path is not None and (not isinstance(socket_path, str) or not socket_path.startswith("/")):
        raise _invalid(f"serverSocket {socket_path!r} must be an absolute path",
                       "e.g. /var/run/pyngress/cni/cni-server.sock, or leave it out")
    if "ipam" in config:
        _check_ipam(config["ipam"])
    if command == "GC":
        _check_valid_attachments(config.get("cni.dev/valid-attachments", []))


def cni_version_for_reply(body: bytes) -> str:
    """The cniVersion to answer a failed request with: the caller's, when it is one we speak."""
    try:
        version = json.loads(binascii.a2b_base64(json.loads(body)["config"])).get("cniVersion")
    except Exception:  # whatever made the request fail may make this fail too; the default is then right
        return NEWEST_VERSION
    return version if version in SUPPORTED_VERSIONS else NEWEST_VERSION


def version_result(request: CniRequest) -> dict[str, Any]:
    """The VERSION output: the caller's cniVersion echoed and every version this plugin speaks."""
    version = request.config.get("cniVersion")
    return {"cniVersion": version if isinstance(version, str) and version else NEWEST_VERSION,
            "supportedVersions": list(SUPPORTED_VERSIONS)}


def _command(env: Mapping[str, str]) -> str:
    command = env.get("CNI_COMMAND")
    if not command:
        raise CniError(INVALID_ENV, "CNI_COMMAND not set", f"set CNI_COMMAND to one of {', '.join(COMMANDS)}")
    if command not in REQUIRED_ENV:
        raise CniError(INVALID_ENV, f"CNI_COMMAND {command!r} is not a known command",
                       f"use one of {', '.join(COMMANDS)}")
    return command


def _check_container_id(container_id: str) -> None:
    if not _CONTAINER_ID.fullmatch(container_id) or len(container_id) > _MAX_CONTAINER_ID:
        raise CniError(INVALID_ENV, f"CNI_CONTAINERID {container_id!r} is not a valid container ID",
                       f"start with a letter or digit, then only letters, digits, '_', '.' or '-' "
                       f"(at most {_MAX_CONTAINER_ID} characters)")


def _check_pod_identity(args: Mapping[str, str]) -> None:
    checks = (("K8S_POD_NAMESPACE", _NAMESPACE, 63, "a DNS-1123 label such as kube-system"),
              ("K8S_POD_NAME", _POD_NAME, 253, "a DNS-1123 subdomain such as web-0"),
              ("K8S_POD_UID", _POD_UID, 64, "the pod's UID, e.g. 0b7f2c1e-...-9a4d"))
    for key, pattern, limit, hint in checks:
        value = args.get(key)
        if value and (len(value) > limit or not pattern.fullmatch(value)):
            raise CniError(INVALID_ENV, f"CNI_ARGS {key} {value!r} is not valid", f"pass {hint}")


def _decode_config(config: bytes, command: str) -> dict[str, Any]:
    if command == "VERSION" and not config.strip():
        return {}  # runtimes may probe VERSION without a configuration
    try:
        network = json.loads(config)
    except (UnicodeDecodeError, ValueError) as err:
        raise CniError(DECODE_FAILURE, f"network configuration is not JSON ({err})",
                       "pass the network configuration (a JSON object) on the plugin's stdin")
    if not isinstance(network, dict):
        raise _invalid(f"network configuration must be a JSON object, got {type(network).__name__}", _EXAMPLE)
    return network


def _check_ipam(ipam: Any) -> None:
    if not isinstance(ipam, dict):
        raise _invalid("ipam must be a JSON object", 'e.g. "ipam": {"subnet": "10.88.0.0/24"}')
    for key, value in ipam.items():
        if key not in _IPAM_KEYS:
            raise CniError(UNSUPPORTED_FIELD, f"ipam field {key}={json.dumps(value)} is not supported",
                           f"ipam takes {', '.join(_IPAM_KEYS[1:])}")
    subnet = None
    if "subnet" in ipam:
        text = ipam["subnet"]
        try:
            subnet = ipaddress.IPv4Network(text if isinstance(text, str) else "")
        except ValueError as err:
            raise _invalid(f"ipam.subnet {text!r} is not an IPv4 network in CIDR form ({err})",
                           "give the network address and prefix length, e.g. 10.88.0.0/24") from None
        if subnet.prefixlen > 30:
            raise _invalid(f"ipam.subnet {subnet} is too small", "it needs room for a gateway and pods: /30 or larger")
    addresses = {key: _address(ipam, key, subnet) for key in ("gateway", "rangeStart", "rangeEnd") if key in ipam}
    start, end = addresses.get("rangeStart"), addresses.get("rangeEnd")
    if start and end and start > end:
        raise _invalid(f"ipam.rangeStart {start} is after ipam.rangeEnd {end}", "swap them")


def _address(ipam: dict[str, Any], key: str, subnet: ipaddress.IPv4Network | None) -> ipaddress.IPv4Address:
    text = ipam[key]
    try:
        address = ipaddress.IPv4Address(text if isinstance(text, str) else "")
    except ValueError:
        raise _invalid(f"ipam.{key} {text!r} is not an IPv4 address", "give a single address, e.g. 10.88.0.1") from None
    if subnet is not None:
        if address not in subnet:
            raise _invalid(f"ipam.{key} {address} is outside ipam.subnet {subnet}", "pick an address inside it")
        if address in (subnet.network_address, subnet.broadcast_address):
            raise _invalid(f"ipam.{key} {address} is the network or broadcast address of {subnet}",
                           "pick an address strictly inside the subnet")
    return address


def _check_valid_attachments(attachments: Any) -> None:
    if not isinstance(attachments, list) or not all(
            isinstance(a, dict) and isinstance(a.get("containerID"), str) for a in attachments):
        raise _invalid("cni.dev/valid-attachments must be a list of objects with a containerID string",
                       'e.g. [{"containerID": "abc", "ifname": "eth0"}]')


def _versions() -> str:
    return ", ".join(SUPPORTED_VERSIONS)


def _invalid(msg: str, details: str) -> CniError:
    return CniError(INVALID_NETWORK_CONFIG, msg, details)

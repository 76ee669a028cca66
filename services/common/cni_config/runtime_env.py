"""The runtime's half of a CNI call: the `CNI_*` environment variables, `CNI_ARGS` parsed.

Every problem is code 4 (invalid environment), an unknown command included: CNI_COMMAND is an
environment variable too. The message names the variable and says what to change.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping, NamedTuple

from proto.cni import INVALID_ENV, CniError

from .names import MAX_CONTAINER_ID, is_valid_cni_name, is_valid_ifname

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

_CNI_ARGS_KEY = re.compile(r"[A-Za-z0-9_]+")
# Kubernetes: namespaces are DNS-1123 labels, pod names DNS-1123 subdomains, UIDs UUIDs (or hashes).
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_POD_IDENTITY = (
    ("K8S_POD_NAMESPACE", re.compile(_DNS_LABEL), 63, "a DNS-1123 label such as kube-system"),
    ("K8S_POD_NAME", re.compile(rf"{_DNS_LABEL}(\.{_DNS_LABEL})*"), 253, "a DNS-1123 subdomain such as web-0"),
    ("K8S_POD_UID", re.compile(r"[A-Za-z0-9-]{1,64}"), 64, "the pod's UID, e.g. 0b7f2c1e-...-9a4d"),
)
_MAX_NETNS_PATH = 4096


class AttachmentId(NamedTuple):
    """What identifies an attachment within one network: the key the CNI specification asks stateful
    plugins to use, and what GC's `cni.dev/valid-attachments` lists."""
    container_id: str
    ifname: str


@dataclass(frozen=True, kw_only=True)
class RuntimeEnv:
    command: str                 # ADD, DEL, CHECK, UPDATE, STATUS, GC or VERSION
    container_id: str = ""       # CNI_CONTAINERID ("" for STATUS, GC and VERSION)
    netns: str = ""              # CNI_NETNS, an absolute path ("" when absent, e.g. DEL)
    ifname: str = ""             # CNI_IFNAME
    args: Mapping[str, str]      # CNI_ARGS; ADD and UPDATE have K8S_POD_NAMESPACE and K8S_POD_NAME
    path: str = ""               # CNI_PATH

    @property
    def attachment(self) -> AttachmentId:
        return AttachmentId(self.container_id, self.ifname)


def parse_runtime_env(env: Mapping[str, str]) -> RuntimeEnv:
    """Validate the CNI environment of one call (only the CNI_* variables are read)."""
    for name, value in env.items():
        if name.startswith("CNI_") and not _is_utf8(value):
            # JSON can carry a lone surrogate that no process could put in its environment; it would only
            # fail later, when the request is packed for a worker.
            raise CniError(INVALID_ENV, f"{name} is not valid UTF-8 text",
                           details="pass the runtime's CNI_* variables as UTF-8 strings")
    command = _command(env)
    missing = [name for name in REQUIRED_ENV[command] if not env.get(name)]
    if missing:
        raise CniError(INVALID_ENV, f"{', '.join(missing)} not set; {command} requires "
                                    f"{', '.join(REQUIRED_ENV[command])}",
                       details="set them in the plugin's environment as a container runtime does, e.g. "
                               "CNI_CONTAINERID=<id> CNI_NETNS=/var/run/netns/<name> CNI_IFNAME=eth0")
    container_id = env.get("CNI_CONTAINERID", "")
    if container_id and (not is_valid_cni_name(container_id) or len(container_id) > MAX_CONTAINER_ID):
        raise CniError(INVALID_ENV, f"CNI_CONTAINERID {container_id!r} is not a valid container ID",
                       details=f"start with a letter or digit, then only letters, digits, '_', '.' or '-' "
                               f"(at most {MAX_CONTAINER_ID} characters)")
    ifname = env.get("CNI_IFNAME", "")
    if ifname and not is_valid_ifname(ifname):
        raise CniError(INVALID_ENV, f"CNI_IFNAME {ifname!r} is not a valid interface name",
                       details="use 1-15 bytes, not '.' or '..', without '/', ':' or whitespace (e.g. eth0)")
    netns = env.get("CNI_NETNS", "")
    if netns and (not netns.startswith("/") or "\0" in netns or len(netns) > _MAX_NETNS_PATH):
        raise CniError(INVALID_ENV, f"CNI_NETNS {netns!r} is not an absolute path",
                       details="pass the network namespace as a path such as /var/run/netns/NAME or "
                               "/proc/PID/ns/net")
    args = parse_cni_args(env.get("CNI_ARGS", ""))
    if command in POD_COMMANDS:
        absent = [key for key in ("K8S_POD_NAMESPACE", "K8S_POD_NAME") if not args.get(key)]
        if absent:
            raise CniError(INVALID_ENV, f"CNI_ARGS lacks {' and '.join(absent)}; {command} needs the pod's identity",
                           details="pass CNI_ARGS=K8S_POD_NAMESPACE=<namespace>;K8S_POD_NAME=<name>[;K8S_POD_UID=<uid>]")
    _check_pod_identity(args)
    return RuntimeEnv(command=command, container_id=container_id, netns=netns, ifname=ifname, args=args,
                      path=env.get("CNI_PATH", ""))


def _is_utf8(text: str) -> bool:
    try:
        text.encode()
        return True
    except UnicodeEncodeError:
        return False


def parse_cni_args(text: str) -> dict[str, str]:
    """CNI_ARGS "K=V;K=V" as a dict; a pair without '=', an empty or repeated key is an error."""
    args: dict[str, str] = {}
    if not text:
        return args
    for pair in text.split(";"):
        key, sep, value = pair.partition("=")
        if not sep or not _CNI_ARGS_KEY.fullmatch(key):
            raise CniError(INVALID_ENV, f"CNI_ARGS pair {pair!r} is not KEY=VALUE",
                           details="write CNI_ARGS as KEY=VALUE pairs separated by ';' (keys: letters, digits, "
                                   "'_'), e.g. K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0")
        if key in args:
            raise CniError(INVALID_ENV, f"CNI_ARGS names {key} twice", details="give each key once")
        args[key] = value
    return args


def _command(env: Mapping[str, str]) -> str:
    command = env.get("CNI_COMMAND")
    if not command:
        raise CniError(INVALID_ENV, "CNI_COMMAND not set", details=f"set CNI_COMMAND to one of {', '.join(COMMANDS)}")
    if command not in REQUIRED_ENV:
        raise CniError(INVALID_ENV, f"CNI_COMMAND {command!r} is not a known command",
                       details=f"use one of {', '.join(COMMANDS)}")
    return command


def _check_pod_identity(args: Mapping[str, str]) -> None:
    for key, pattern, limit, hint in _POD_IDENTITY:
        value = args.get(key)
        if value and (len(value) > limit or not pattern.fullmatch(value)):
            raise CniError(INVALID_ENV, f"CNI_ARGS {key} {value!r} is not valid", details=f"pass {hint}")

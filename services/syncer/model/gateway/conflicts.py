"""Listeners of one Gateway that are not distinct (the spec's "Conflicted"), and why.

The spec: listeners sharing a protocol must differ in port or hostname; pyngress also cannot serve HTTP and TLS
(HTTPS, or TLS passthrough) on one port, and tells the HTTPS and passthrough listeners of one port apart only by
hostname (SNI). Every listener of a conflict is refused, none picked as the winner (the spec's rule), and the
Gateway's other listeners are served. Read from the listeners as written, before any other check, so a conflict is
reported the same whichever of its listeners is otherwise wrong.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Iterable

from .reasons import Reason

# The protocols that take the same socket: HTTP alone; HTTPS and TLS passthrough together, told apart by SNI.
_SOCKET_KIND = {"HTTP": "cleartext", "HTTPS": "tls", "TLS": "tls"}


@dataclass(frozen=True)
class Conflict:
    reason: Reason
    message: str


def listener_conflicts(listeners: Iterable[Any]) -> dict[int, Conflict]:
    """The conflicted listeners of one Gateway's spec.listeners, by their index."""
    by_port: dict[int, list[tuple[int, str, str | None, str]]] = defaultdict(list)
    for index, raw in enumerate(listeners):
        if not isinstance(raw, dict) or raw.get("protocol") not in _SOCKET_KIND:
            continue  # a protocol pyngress does not serve takes no port (the spec's rule for TCP does not apply)
        port, hostname = raw.get("port"), raw.get("hostname")
        if isinstance(port, int) and not isinstance(port, bool):
            by_port[port].append((index, str(raw.get("name")), hostname.lower() if isinstance(hostname, str)
                                  else None, raw["protocol"]))
    found: dict[int, Conflict] = {}
    for port, sharing in by_port.items():
        kinds = {_SOCKET_KIND[protocol] for _, _, _, protocol in sharing}
        if len(kinds) > 1:
            names = ", ".join(f"{name} ({protocol})" for _, name, _, protocol in sharing)
            for index, name, _, _ in sharing:
                found[index] = Conflict(Reason.PROTOCOL_CONFLICT, (
                    f"listener {name}: listeners {names} share port {port} with protocols that cannot share one "
                    f"socket (reason ProtocolConflict); give HTTP and HTTPS or TLS listeners different ports"))
            continue
        hosts: dict[str | None, list[str]] = defaultdict(list)
        for _, name, hostname, _ in sharing:
            hosts[hostname].append(name)
        for index, name, hostname, _ in sharing:
            if len(hosts[hostname]) > 1:
                found[index] = Conflict(Reason.HOSTNAME_CONFLICT, (
                    f"listener {name}: listeners {', '.join(hosts[hostname])} on port {port} have the same hostname "
                    f"{hostname or '(any host)'} (reason HostnameConflict); give each a different hostname or port"))
    return found

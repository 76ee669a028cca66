"""TCP and UDP services: the ConfigMaps that --tcp-services-configmap and --udp-services-configmap name, as
ingress-nginx reads them.

Each entry maps a port nginx listens on to a Service port: `"9000": "NAMESPACE/SERVICE:PORT[:PROXY[:PROXY]]"`.
The first PROXY makes the listener expect the PROXY protocol from its clients, the second sends it to the
endpoints (either may be left empty: `ns/svc:53::PROXY`). nginx forwards each connection (each UDP client)
to one of the Service's endpoints, read per connection from a file the syncer rewrites when they change
(templates/njs/stream.js): endpoints move without a reload; a new or changed entry reloads.

A bad entry, or a port that nginx or the controller already uses, is reported and left out; the other
entries are served.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal, Mapping

from services.common.settings import Settings
from services.nginxconf.config import StreamServer

from .backends import BackendResolver, ServiceRef
from .problems import Problem

Protocol = Literal["tcp", "udp"]

_ENTRY = re.compile(r"([a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?)/([a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?)"
                    r":([0-9]{1,5}|[a-z0-9](?:[-a-z0-9]{0,13}[a-z0-9])?)(?::(PROXY)?(?::(PROXY)?)?)?")
_PORT = re.compile(r"[1-9][0-9]{0,4}")


@dataclass
class StreamServices:
    servers: list[StreamServer] = field(default_factory=list)
    endpoints: dict[str, list[str]] = field(default_factory=dict)  # backend → "ip:port"
    problems: list[Problem] = field(default_factory=list)


def reserved_ports(settings: Settings) -> dict[int, str]:
    """The ports a stream server may not take (TCP), each with what uses it."""
    ports = settings.ports
    return {ports.http: "the HTTP port", ports.https: "the HTTPS port", ports.healthz: "the healthz port",
            ports.status: "the status port", ports.ssl_passthrough_proxy: "the passthrough proxy's port"}


def stream_services(store: Mapping[str, dict[str, Any]], settings: Settings,
                    resolver: BackendResolver) -> StreamServices:
    """The stream servers of both ConfigMaps, in port order, with their endpoints and the entries refused."""
    found = StreamServices()
    configmaps: tuple[tuple[Protocol, str | None], ...] = (("tcp", settings.ingress.tcp_services_configmap),
                                                           ("udp", settings.ingress.udp_services_configmap))
    for protocol, reference in configmaps:
        if reference:
            _read(found, store, reference, protocol, settings=settings, resolver=resolver)
    found.servers.sort(key=lambda server: (server.port, server.protocol))
    return found


def _read(found: StreamServices, store: Mapping[str, dict[str, Any]], reference: str, protocol: Protocol, *,
          settings: Settings, resolver: BackendResolver) -> None:
    source = f"--{protocol}-services-configmap {reference}"
    namespace, _, name = reference.partition("/")
    configmap = store.get(f"ConfigMap/{namespace}/{name}")
    if configmap is None:
        found.problems.append(Problem.warning(source, "ConfigMap not found; no such services are served until it "
                                                      "exists"))
        return
    data = configmap.get("data") or {}
    if not isinstance(data, dict):
        found.problems.append(Problem.error(source, "data must be a map of port → NAMESPACE/SERVICE:PORT"))
        return
    reserved = reserved_ports(settings) if protocol == "tcp" else {}
    for key, value in sorted(data.items(), key=lambda item: str(item[0])):
        where = f"{source}: entry {str(key)!r}"
        problem = _entry_problem(key, value, reserved, protocol)
        if problem:
            found.problems.append(Problem.error(where, problem))
            continue
        match = _ENTRY.fullmatch(value)
        assert match, "_entry_problem refuses what _ENTRY does not match"
        port, service_port = int(key), match[3]
        ref = ServiceRef(namespace=match[1], service=match[2],
                         port=int(service_port) if service_port.isdigit() else service_port)
        resolved = resolver.resolve(ref)
        if resolved.name is None:
            found.problems.append(Problem.warning(where, f"{resolved.problem}; connections to port {port} are "
                                                         "closed until it is fixed"))
        elif resolved.problem:
            found.problems.append(Problem.warning(where, resolved.problem))
        backend = f"{protocol}-{ref.namespace}-{ref.service}-{ref.port}"  # ingress-nginx's $proxy_upstream_name
        found.endpoints[backend] = list(resolved.endpoints) if resolved.name else []
        found.servers.append(StreamServer(port=port, protocol=protocol, backend=backend,
                                          proxy_protocol_in=match[4] == "PROXY",
                                          proxy_protocol_out=match[5] == "PROXY"))


def _entry_problem(key: Any, value: Any, reserved: Mapping[int, str], protocol: Protocol) -> str | None:
    if not isinstance(key, str) or not _PORT.fullmatch(key) or int(key) > 65535:
        return "the key must be the port to listen on, 1-65535"
    if int(key) in reserved:
        return f"port {key} is {reserved[int(key)]}; choose another port"
    if not isinstance(value, str) or not _ENTRY.fullmatch(value):
        return ("the value must be NAMESPACE/SERVICE:PORT, optionally followed by :PROXY (clients send the PROXY "
                "protocol) and :PROXY (it is sent to the endpoints), such as default/db:5432 or default/db:5432::PROXY")
    if protocol == "udp" and "PROXY" in value:
        return "the PROXY protocol is for TCP services only (nginx reads and sends it on TCP connections); remove it"
    return None

"""Ingress service backends → backend names and their ready endpoints.

A backend is named "<namespace>-<service>-<port>" with the port as the Ingress gives it (number or name),
as ingress-nginx names its upstreams. Its endpoints come from the EndpointSlices labelled
`kubernetes.io/service-name=<service>` in the namespace: the Ingress port is resolved to the Service port
(by `port` number or by `name`), whose name ("" when unnamed) selects the slice port that carries the
target port number. Endpoints whose `conditions.ready` is false are left out (a missing condition means
ready, per the API).

An ExternalName Service resolves to the single endpoint "<externalName>:<port>": a host name, not an
address, so whatever balances on these endpoints must resolve it (Lua's balancer takes addresses only).
"""
from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

SERVICE_NAME_LABEL = "kubernetes.io/service-name"
_DNS_NAME = re.compile(r"(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\.?",
                       re.IGNORECASE)


@dataclass(frozen=True)
class ServiceRef:
    """An Ingress backend: `port` is the Service port number (int) or name (str)."""
    namespace: str
    service: str
    port: int | str

    @property
    def backend_name(self) -> str:
        return f"{self.namespace}-{self.service}-{self.port}"


@dataclass(frozen=True)
class ResolvedBackend:
    """`name` None means no such Service or port: the route answers 503, and `problem` says why."""
    name: str | None
    endpoints: tuple[str, ...] = ()
    problem: str | None = None


def index_endpoint_slices(slices: Iterable[tuple[str, dict[str, Any]]]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """(namespace, slice) pairs → {(namespace, service name): [slices]}, once per build."""
    index: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for namespace, eps in slices:
        service = ((eps.get("metadata") or {}).get("labels") or {}).get(SERVICE_NAME_LABEL)
        if service:
            index.setdefault((namespace, service), []).append(eps)
    return index


def format_endpoint(address: str, port: int) -> str | None:
    """"ip:port", "[ipv6]:port" (normalised, so equal addresses deduplicate), or None if not an address."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return None
    return f"[{ip}]:{port}" if ip.version == 6 else f"{ip}:{port}"


def ready_endpoints(slices: Iterable[dict[str, Any]], port_name: str) -> tuple[str, ...]:
    """The ready endpoints of `slices` on the slice port named `port_name`, deduplicated and sorted."""
    found: set[str] = set()
    for eps in slices:
        if eps.get("addressType", "IPv4") not in ("IPv4", "IPv6"):
            continue  # FQDN slices are deprecated and unused by Services
        port = next((p.get("port") for p in eps.get("ports") or () if (p.get("name") or "") == port_name), None)
        if not _is_port(port):
            continue
        for endpoint in eps.get("endpoints") or ():
            if (endpoint.get("conditions") or {}).get("ready") is False:
                continue
            for address in endpoint.get("addresses") or ():
                formatted = format_endpoint(address, port)
                if formatted:
                    found.add(formatted)
    return tuple(sorted(found))


def _is_port(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value < 65536


class BackendResolver:
    """Resolves ServiceRefs against one store snapshot, each distinct ref once."""

    def __init__(self, services: Mapping[tuple[str, str], dict[str, Any]],
                 slices: Mapping[tuple[str, str], list[dict[str, Any]]]) -> None:
        self._services = services
        self._slices = slices
        self._cache: dict[ServiceRef, ResolvedBackend] = {}

    def resolve(self, ref: ServiceRef) -> ResolvedBackend:
        resolved = self._cache.get(ref)
        if resolved is None:
            try:
                resolved = self._resolve(ref)
            except (AttributeError, TypeError):  # a manifest that does not have the API's shape
                resolved = ResolvedBackend(None, problem=f"Service {ref.namespace}/{ref.service} or its "
                                                         "EndpointSlices are malformed")
            self._cache[ref] = resolved
        return resolved

    def _resolve(self, ref: ServiceRef) -> ResolvedBackend:
        where = f"Service {ref.namespace}/{ref.service}"
        service = self._services.get((ref.namespace, ref.service))
        if service is None:
            return ResolvedBackend(None, problem=f"{where} not found")
        spec = service.get("spec") or {}
        ports = spec.get("ports") or ()
        if isinstance(ref.port, int):
            service_port = next((p for p in ports if p.get("port") == ref.port), None)
        else:
            service_port = next((p for p in ports if p.get("name") == ref.port), None)
        if spec.get("type") == "ExternalName":
            return self._external_name(ref, spec.get("externalName"), service_port, where)
        if service_port is None:
            return ResolvedBackend(None, problem=f"{where} has no port {ref.port!r}")
        slices = self._slices.get((ref.namespace, ref.service), ())
        return ResolvedBackend(ref.backend_name, ready_endpoints(slices, service_port.get("name") or ""))

    @staticmethod
    def _external_name(ref: ServiceRef, host: Any, service_port: dict[str, Any] | None,
                       where: str) -> ResolvedBackend:
        if not isinstance(host, str) or not _DNS_NAME.fullmatch(host):
            return ResolvedBackend(None, problem=f"{where} has type ExternalName but externalName {host!r} "
                                                 "is not a DNS name")
        # A number may name any port of an external host; a port name needs the Service to define it.
        port = ref.port if isinstance(ref.port, int) else (service_port or {}).get("port")
        if not _is_port(port):
            return ResolvedBackend(None, problem=f"{where} has no port {ref.port!r}")
        return ResolvedBackend(ref.backend_name, (f"{host.rstrip('.').lower()}:{port}",))

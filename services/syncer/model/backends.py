"""Ingress service backends → backend names and their ready endpoints.

A backend is named "<namespace>-<service>-<port>" with the port as the Ingress gives it (number or name),
as ingress-nginx names its upstreams. Its endpoints come from the EndpointSlices labelled
`kubernetes.io/service-name=<service>` in the namespace: the Ingress port is resolved to the Service port
(by `port` number or by `name`), whose name ("" when unnamed) selects the slice port that carries the
target port number. Endpoints whose `conditions.ready` is false are left out (a missing condition means
ready, per the API).

With service-upstream, a backend is the Service's cluster IP and port, one endpoint, and kube-proxy picks
the Pod (a backend name of its own: "<namespace>-<service>-<port>-cluster-ip").

An ExternalName Service resolves to the single endpoint "<externalName>:<port>": a host name, not an
address, so whatever balances on these endpoints must resolve it (Lua's balancer takes addresses only).
An ExternalName that names this node itself (localhost, a loopback, unspecified or link-local address, in
any spelling the resolver takes, such as "127.1" or "2130706433") is refused, as ingress-nginx refuses
localhost: through it a tenant's Ingress would reach the controller's own ports or the cloud metadata
service. Names that only resolve to such addresses are left out again after resolution
(`forbidden_address`). `--disable-svc-external-name` refuses every ExternalName Service.
"""
from __future__ import annotations

import ipaddress
import re
import socket
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, TypeGuard

SERVICE_NAME_LABEL = "kubernetes.io/service-name"
# The --default-backend-service backend, under ingress-nginx's name (access logs show it).
DEFAULT_BACKEND = "upstream-default-backend"
_DNS_NAME = re.compile(r"(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\.?",
                       re.IGNORECASE | re.ASCII)  # ASCII: no Unicode case folding (the Kelvin sign is not a "k")


@dataclass(frozen=True, kw_only=True, slots=True)
class ServiceRef:
    """An Ingress backend: `port` is the Service port number (int) or name (str)."""
    namespace: str
    service: str
    port: int | str
    cluster_ip: bool = False  # service-upstream: the Service's cluster IP and port, not its endpoints

    @property
    def backend_name(self) -> str:
        # Another Ingress may use the same Service without service-upstream: a name of its own.
        name = f"{self.namespace}-{self.service}-{self.port}" + ("-cluster-ip" if self.cluster_ip else "")
        # Namespace "upstream", Service "default", port "backend" must not take the default backend's place.
        return name + "-service" if name == DEFAULT_BACKEND else name


@dataclass(frozen=True)
class ResolvedBackend:
    """`name` None means no such Service or port: the route answers 503, and `problem` says why.

    `refused` means the backend may not be served at all (a forbidden ExternalName): the Ingress naming it
    is rejected rather than routed.
    """
    name: str | None
    endpoints: tuple[str, ...] = ()
    problem: str | None = None
    refused: bool = False
    app_protocol: str | None = None  # the Service port's appProtocol ("kubernetes.io/h2c"): HTTPRoutes speak it
    port_name: str | None = None  # the Service port's name (a BackendTLSPolicy's sectionName names it)


def forbidden_address(address: str) -> bool:
    """Whether `address` (an IP address in any form inet_aton or inet_pton takes) is this node itself or
    link-local: loopback, unspecified, link-local (169.254.0.0/16 holds cloud metadata services)."""
    try:
        ip = ipaddress.ip_address(socket.inet_aton(address))  # also "127.1", "2130706433", "0x7f.1"
    except OSError:
        try:
            ip = ipaddress.ip_address(address.split("%", 1)[0])
        except ValueError:
            return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    return ip.is_loopback or ip.is_unspecified or ip.is_link_local


def _names_this_node(host: str) -> bool:
    name = host.rstrip(".").lower()
    return name == "localhost" or name.endswith(".localhost") or forbidden_address(name)


def index_endpoint_slices(slices: Iterable[tuple[str, dict[str, Any]]]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """(namespace, slice) pairs → {(namespace, service name): [slices]}, once per build."""
    index: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for namespace, eps in slices:
        service = ((eps.get("metadata") or {}).get("labels") or {}).get(SERVICE_NAME_LABEL)
        if service:
            index.setdefault((namespace, service), []).append(eps)
    return index


def _packed_address(address: Any) -> bytes | None:
    """The address in binary (4 or 16 bytes), or None if it is not an IP address. inet_pton is strict
    (no leading zeros, zone ids or spaces) and far faster than the ipaddress module at 10,000s of endpoints."""
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            return socket.inet_pton(family, address)
        except (OSError, TypeError, ValueError):  # ValueError: a NUL in the text
            continue
    return None


def _endpoint(packed: bytes, port: int) -> str:
    if len(packed) == 4:
        return f"{socket.inet_ntop(socket.AF_INET, packed)}:{port}"
    return f"[{socket.inet_ntop(socket.AF_INET6, packed)}]:{port}"


def ready_endpoints(slices: Iterable[dict[str, Any]], port_name: str) -> tuple[str, ...]:
    """The ready endpoints of `slices` on the slice port named `port_name`: "ip:port" or "[ipv6]:port",
    normalised, deduplicated and sorted by address."""
    found: set[tuple[bytes, int]] = set()
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
                packed = _packed_address(address)
                if packed is not None:  # else not an address: only a hand-written manifest can hold one
                    found.add((packed, port))
    # IPv4 before IPv6, then by address: the order a person reading the table expects.
    return tuple(_endpoint(packed, port) for packed, port in sorted(found, key=lambda e: (len(e[0]), e)))


def _is_port(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value < 65536


class BackendResolver:
    """Resolves ServiceRefs against one store snapshot, each distinct ref once."""

    def __init__(self, services: Mapping[tuple[str, str], dict[str, Any]], *,
                 slices: Mapping[tuple[str, str], list[dict[str, Any]]], allow_external_name: bool = True) -> None:
        self._services = services
        self._slices = slices
        self._allow_external_name = allow_external_name
        self._cache: dict[ServiceRef, ResolvedBackend] = {}
        # One Service port is often named by number in one Ingress and by name in another.
        self._endpoints: dict[tuple[str, str, str], tuple[str, ...]] = {}

    def first_port(self, namespace: str, name: str) -> ResolvedBackend:
        """A Service on its first port, as ingress-nginx takes a default backend."""
        service = self._services.get((namespace, name))
        ports = ((service or {}).get("spec") or {}).get("ports") or ()
        if service is None or not ports or not isinstance(ports[0].get("port"), int):
            return ResolvedBackend(None, problem=f"Service {namespace}/{name} not found, or without a port")
        return self.resolve(ServiceRef(namespace=namespace, service=name, port=ports[0]["port"]))

    def default_backend(self, reference: str) -> ResolvedBackend:
        """The --default-backend-service Service ("NAMESPACE/NAME") on its first port, as ingress-nginx takes it."""
        namespace, _, name = reference.partition("/")
        resolved = self.first_port(namespace, name)
        return ResolvedBackend(DEFAULT_BACKEND, resolved.endpoints, problem=resolved.problem) if resolved.name \
            else resolved

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
            if not self._allow_external_name:
                return ResolvedBackend(None, problem=f"{where} has type ExternalName, and ExternalName backends "
                                                     "are disabled (--disable-svc-external-name)", refused=True)
            return self._external_name(ref, host=spec.get("externalName"), service_port=service_port, where=where)
        if service_port is None:
            return ResolvedBackend(None, problem=f"{where} has no port {ref.port!r}")
        if ref.cluster_ip:
            return self._cluster_ip(ref, spec=spec, service_port=service_port, where=where)
        key = (ref.namespace, ref.service, service_port.get("name") or "")
        if key not in self._endpoints:
            self._endpoints[key] = ready_endpoints(self._slices.get(key[:2], ()), key[2])
        return ResolvedBackend(ref.backend_name, self._endpoints[key], app_protocol=service_port.get("appProtocol"),
                               port_name=service_port.get("name") or None)

    @staticmethod
    def _cluster_ip(ref: ServiceRef, *, spec: dict[str, Any], service_port: dict[str, Any],
                    where: str) -> ResolvedBackend:
        address = spec.get("clusterIP")
        try:
            ip = ipaddress.ip_address(address) if isinstance(address, str) else None
        except ValueError:
            ip = None
        port = service_port.get("port")
        if ip is None or isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
            return ResolvedBackend(None, problem=f"{where} has no cluster IP (headless, or not assigned yet), which "
                                                 "service-upstream proxies to; remove the annotation to use its endpoints")
        host = f"[{ip}]" if ip.version == 6 else str(ip)
        return ResolvedBackend(ref.backend_name, (f"{host}:{port}",))

    @staticmethod
    def _external_name(ref: ServiceRef, *, host: Any, service_port: dict[str, Any] | None,
                       where: str) -> ResolvedBackend:
        if not isinstance(host, str) or not _DNS_NAME.fullmatch(host):
            return ResolvedBackend(None, problem=f"{where} has type ExternalName but externalName {host!r} "
                                                 "is not a DNS name")
        if _names_this_node(host):
            return ResolvedBackend(None, problem=f"{where} has type ExternalName with externalName {host!r}, "
                                                 "which names the node itself (localhost, a loopback, unspecified "
                                                 "or link-local address); point it at a host outside the node",
                                   refused=True)
        # A number may name any port of an external host; a port name needs the Service to define it.
        port = ref.port if isinstance(ref.port, int) else (service_port or {}).get("port")
        if not _is_port(port):
            return ResolvedBackend(None, problem=f"{where} has no port {ref.port!r}")
        return ResolvedBackend(ref.backend_name, (f"{host.rstrip('.').lower()}:{port}",))

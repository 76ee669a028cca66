"""The listeners of our Gateways that pyngress serves, and why the others are not.

An HTTP listener on the controller's HTTP port (--http-port) or on 80, which a Service in front maps to it, is
served there, beside the Ingresses; an HTTPS listener likewise on the HTTPS port or 443. An HTTP or HTTPS listener on
any other port gets that port of its own (`own_port`): nginx listens on it in a server of its own, which serves only
the routes of the listeners on that port, never an Ingress (the extra ports' server in templates/nginx.conf.j2). Its
socket is opened by nginx as it reloads, then held by the nginx-listeners program like the controller's own
(services/nginx/listeners.py), so a master that is killed or restarted loses no connection on it. A port the
controller uses for something else (the healthz port, --status-port, --ssl-passthrough-proxy-port, the webhook's, the
other protocol's port) is not available (the spec's reason PortUnavailable), nor is a port another listener serves
with the other protocol (ProtocolConflict). Gateways claim what they share oldest first (creation.py), as the spec
resolves conflicts: a port's protocol is that of its oldest Gateway's listener, whatever the namespaces are called, and
the ports of their own go first to each namespace's first OWN_PORTS_PER_NAMESPACE, then oldest first (own_port_grants).
A TLS listener in Passthrough mode is served on the HTTPS port by the passthrough proxy (by SNI, for TLSRoutes:
tlsroutes.py), and only with --enable-ssl-passthrough, which starts that proxy; so is a TLS listener in Terminate mode
(the proxy ends TLS with its certificate). TCP and UDP listeners are not served.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from services.common.settings import Settings

from ..creation import creation_order
from ..problems import Problem
from ..stream_services import reserved_ports as stream_reserved_ports
from ..tls import TlsSecrets
from ..types import ClientAuth
from . import fields
from .client_validation import with_client_validation
from .conflicts import Conflict, listener_conflicts
from .fields import RouteRejected
from .gateways import gateway_refusal
from .objects import GATEWAY_GROUP, GatewayObjects
from .reasons import Reason
from .reference_grants import ReferenceGrants

HTTP_ROUTE = (GATEWAY_GROUP, "HTTPRoute")
# The route kinds each protocol takes (allowedRoutes.kinds narrows them; by default all of them).
ROUTE_KINDS = {"HTTP": ("HTTPRoute", "GRPCRoute"), "HTTPS": ("HTTPRoute", "GRPCRoute"), "TLS": ("TLSRoute",)}
# The most ports listeners may have to themselves: nginx-listeners hands every socket to a new nginx master in one
# message, and Linux passes at most 253 descriptors in one (SCM_MAX_FD): two per port (IPv4, IPv6; more with several
# bind-address hosts of a family) and a few of the controller's own must fit.
MAX_OWN_PORTS = 100
# Of those, the ports each namespace is sure of: a namespace's Gateways hold more only while no other namespace's
# listener needs one, so that one namespace, however old its Gateways, cannot take every port from the others.
OWN_PORTS_PER_NAMESPACE = 10


@dataclass(frozen=True)
class NamespacePolicy:
    """allowedRoutes.namespaces: "Same", "All", or "Selector" with its matchLabels and matchExpressions."""
    source: str
    match_labels: tuple[tuple[str, str], ...] = ()
    expressions: tuple[tuple[str, str, frozenset[str]], ...] = ()  # (key, operator, values)

    def allows(self, namespace: str, *, gateway_namespace: str, labels: Mapping[str, str]) -> bool:
        if self.source == "All":
            return True
        if self.source == "Same":
            return namespace == gateway_namespace
        return all(labels.get(k) == v for k, v in self.match_labels) and all(
            _expression_holds(labels, key, operator, values) for key, operator, values in self.expressions)


def _expression_holds(labels: Mapping[str, str], key: str, operator: str, values: frozenset[str]) -> bool:
    if operator == "In":
        return labels.get(key) in values
    if operator == "NotIn":
        return labels.get(key) not in values
    if operator == "Exists":
        return key in labels
    return key not in labels  # DoesNotExist


@dataclass(frozen=True)
class Listener:
    gateway: str  # "namespace/name"
    gateway_namespace: str
    name: str  # the sectionName routes name it by
    port: int
    scheme: str  # "http", "https" or "tls" (passthrough)
    hostname: str | None  # None: any host
    namespaces: NamespacePolicy
    certificate: str | None = None  # "namespace/name" of its TLS Secret (https)
    kinds: tuple[str, ...] = ("HTTPRoute", "GRPCRoute")  # the route kinds it takes
    own_port: int | None = None  # the port it has to itself (not the controller's HTTP or HTTPS port): `port`
    client_validation: ClientAuth | None = None  # spec.tls.frontend's check for its port (client_validation.py)

    @property
    def port_key(self) -> tuple[str, int | None]:
        """Where its routes answer: its scheme on the controller's port (None), or on its own port."""
        return self.scheme, self.own_port

    @property
    def where(self) -> str:
        return f"Gateway {self.gateway} listener {self.name}"


def served_listeners(objects: GatewayObjects, *, classes: frozenset[str], settings: Settings,
                     grants: ReferenceGrants, secrets: TlsSecrets) -> tuple[list[Listener], list[Problem]]:
    """The listeners of the Gateways of our classes that are served, and a problem for each that is not."""
    found: list[Listener | Problem] = []  # in the order of the Gateways, oldest first, and of their listeners
    for (namespace, name), gateway in gateways_oldest_first(objects.gateways):
        spec = gateway.get("spec") or {}
        if spec.get("gatewayClassName") not in classes:
            continue
        ref = f"Gateway {namespace}/{name}"
        if refusal := gateway_refusal(gateway, objects.classes.get(spec["gatewayClassName"])):
            found.append(Problem.error(ref, f"{refusal.message}; its listeners are not served"))
            continue
        conflicts = listener_conflicts(spec.get("listeners") or ())
        seen: set[str] = set()
        for index, raw in enumerate(spec.get("listeners") or ()):
            if index in conflicts:
                found.append(Problem.error(ref, f"{conflicts[index].message}; the listener is not served"))
                continue
            try:
                listener = with_client_validation(
                    _listener(raw, namespace=namespace, name=name, index=index, settings=settings, grants=grants,
                              secrets=secrets), gateway, config_maps=objects.config_maps, grants=grants)
            except RouteRejected as err:
                found.append(Problem.error(ref, f"{err}; the listener is not served"))
                continue
            if listener.name in seen:
                found.append(Problem.error(ref, f"listener name {listener.name} is used twice; the second is "
                                                "not served"))
                continue
            seen.add(listener.name)
            found.append(listener)
    return _claimed(found)


def _claimed(found: list[Listener | Problem]) -> tuple[list[Listener], list[Problem]]:
    """The valid listeners (oldest Gateway first) that keep their port: within the ports of their own granted
    (own_port_grants), and not of the other protocol than the port's first; the problems in the same order."""
    granted = own_port_grants(listener for listener in found if isinstance(listener, Listener))
    listeners: list[Listener] = []
    refused: dict[int, Conflict | None] = {}  # None: beyond the ports granted
    for index, listener in enumerate(found):
        if not isinstance(listener, Listener):
            continue
        if listener.own_port is not None and listener.own_port not in granted:
            refused[index] = None
        elif conflict := protocol_conflict(listener, listeners):
            refused[index] = conflict
        else:
            listeners.append(listener)
    problems: list[Problem] = []
    for index, listener in enumerate(found):  # told once every port's holder is known
        if isinstance(listener, Problem):
            problems.append(listener)
        elif index in refused:
            why = refused[index] or beyond_own_ports(listener, listeners)
            problems.append(Problem.error(f"Gateway {listener.gateway}",
                                          f"{why.message if isinstance(why, Conflict) else why}; the listener is "
                                          "not served"))
    return listeners, problems


def gateways_oldest_first(gateways: Mapping[tuple[str, str], dict[str, Any]]) -> list[tuple[tuple[str, str],
                                                                                            dict[str, Any]]]:
    """The Gateways in the order they claim what they share (a port's protocol, the ports of their own, a route's
    client certificate): oldest first (creationTimestamp, then "namespace/name"), as the spec resolves conflicts, so
    a tenant cannot take what an older Gateway of another namespace has by the name of its namespace."""
    return sorted(gateways.items(), key=lambda item: creation_order(item[1], namespace=item[0][0], name=item[0][1]))


def own_port_grants(listeners: Iterable[Listener]) -> set[int]:
    """The ports of their own that are served, of those `listeners` (oldest Gateway first) ask for. A port belongs to
    the namespace of its first listener (the others of its protocol share it, of the other protocol are conflicted);
    each namespace gets its first OWN_PORTS_PER_NAMESPACE ports, then the ports left go in order, up to
    MAX_OWN_PORTS in all."""
    holders: dict[int, str] = {}
    for listener in listeners:
        if listener.own_port is not None:
            holders.setdefault(listener.own_port, listener.gateway_namespace)
    granted: dict[int, None] = {}
    held: Counter[str] = Counter()
    for port, namespace in holders.items():
        if len(granted) < MAX_OWN_PORTS and held[namespace] < OWN_PORTS_PER_NAMESPACE:
            granted[port] = None
            held[namespace] += 1
    for port in holders:
        if len(granted) >= MAX_OWN_PORTS:
            break
        granted.setdefault(port, None)
    return set(granted)


def beyond_own_ports(listener: Listener, served: list[Listener]) -> RouteRejected | None:
    """Why `listener` cannot have a port of its own (PortUnavailable): the MAX_OWN_PORTS are held by the `served`
    listeners (own_port_grants), and what to change: its namespace's ports when it holds more than its share."""
    holders: dict[int, str] = {}
    for other in served:
        if other.own_port is not None:
            holders.setdefault(other.own_port, other.gateway_namespace)
    if listener.own_port is None or listener.own_port in holders or len(holders) < MAX_OWN_PORTS:
        return None
    namespace = listener.gateway_namespace
    held = sum(holder == namespace for holder in holders.values())
    if OWN_PORTS_PER_NAMESPACE <= held < len(holders):
        return port_unavailable(listener, f"pyngress serves at most {MAX_OWN_PORTS} ports of their own and all are "
                                          f"in use; namespace {namespace} holds {held} of them, each namespace is sure "
                                          f"of {OWN_PORTS_PER_NAMESPACE} only, and other namespaces hold the rest; "
                                          f"free one of {namespace}'s ports or use one of them")
    return port_unavailable(listener, f"pyngress serves at most {MAX_OWN_PORTS} ports of their own, and other "
                                      "listeners have them; use one of their ports")


def port_unavailable(listener: Listener, why: str) -> RouteRejected:
    """The refusal of a listener whose port nginx cannot listen on, `why` saying what holds it and what to do."""
    return RouteRejected(f"listener {listener.name}: port {listener.port} is not available (reason PortUnavailable): "
                         f"{why}", reason=Reason.PORT_UNAVAILABLE)


def protocol_conflict(listener: Listener, served: list[Listener]) -> Conflict | None:
    """Why `listener` cannot have its own port: a listener served before it (of an older Gateway, or before it in its
    own Gateway: gateways_oldest_first) takes that port with the other protocol, and nginx serves one protocol on a
    port."""
    if listener.own_port is None:
        return None
    other = next((s for s in served if s.own_port == listener.own_port and s.scheme != listener.scheme), None)
    if other is None:
        return None
    return Conflict(Reason.PROTOCOL_CONFLICT, f"listener {listener.name}: port {listener.port} is served with "
                    f"{other.scheme.upper()} for {other.where} (reason ProtocolConflict); use another port")


def reserved_ports(settings: Settings) -> dict[int, str]:
    """The ports the controller uses for something else than an HTTP or HTTPS listener of its own, and for what: those
    a TCP service may not take either (stream_services.py), and the admission webhook's."""
    reserved = stream_reserved_ports(settings)
    if settings.webhook.address:
        reserved[int(settings.webhook.address.rpartition(":")[2])] = "the admission webhook's port"
    return reserved


def ports_beside_streams(own_ports: Mapping[int, str], stream_ports: Iterable[int]) -> tuple[dict[int, str],
                                                                                             list[Problem]]:
    """The ports listeners have to themselves that no TCP service (--tcp-services-configmap) takes, and a problem for
    each one that does: the service keeps it (nginx cannot listen on one port twice)."""
    taken = set(stream_ports) & set(own_ports)
    return ({port: scheme for port, scheme in own_ports.items() if port not in taken},
            [Problem.error(f"Gateway listener port {port}", f"{TCP_SERVICE_PORT}: the Gateway listeners on that port "
                           "serve nothing; move them or the service to another port") for port in sorted(taken)])


# Why nginx does not listen on a listener's own port that a TCP service takes (ports_beside_streams): the problem's
# words, and the listener's status's.
TCP_SERVICE_PORT = "a TCP service of --tcp-services-configmap listens on it"


def unavailable_own_ports(stream_ports: Iterable[int], taken: Mapping[int, str]) -> dict[int, str]:
    """The ports listeners may have to themselves that nginx does not listen on, each with why and what to do: those a
    TCP service takes (ports_beside_streams), and `taken` (port → why), those another program on the node listens on,
    as the syncer found them when it last applied (it tries to bind a new port before nginx.conf names it)."""
    unavailable = {port: f"{why}; stop that program or move the listener to another port"
                   for port, why in taken.items()}
    unavailable.update(dict.fromkeys(stream_ports, f"{TCP_SERVICE_PORT}; move the listener or the service to "
                                                   "another port"))
    return unavailable


_PORTS = {"HTTP": ("http", 80), "HTTPS": ("https", 443), "TLS": ("tls", 443)}


def _listener(raw: Any, *, namespace: str, name: str, index: int, settings: Settings, grants: ReferenceGrants,
              secrets: TlsSecrets | None) -> Listener:
    """One listener as served; RouteRejected when it is not. `secrets` None: as routes attach to it, its certificate
    not resolved (status.py counts the routes of a listener whose certificate does not resolve)."""
    raw = fields.mapping(raw, where=f"listener {index}")
    section = fields.object_name(raw.get("name"), where=f"listener {index}")
    where = f"listener {section}"
    protocol = raw.get("protocol")
    if protocol not in _PORTS:
        raise RouteRejected(f"{where}: protocol {protocol!r} is not supported (reason UnsupportedProtocol); "
                            "use HTTP, HTTPS or TLS", reason=Reason.UNSUPPORTED_PROTOCOL)
    scheme, standard = _PORTS[protocol]
    port = fields.port(raw.get("port"), where=where)
    own_port = _own_port(port, scheme=scheme, standard=standard, where=where, settings=settings)
    hostname = raw.get("hostname")
    host = fields.hostname(hostname, where=where) if hostname is not None else None
    allowed = fields.mapping(raw.get("allowedRoutes"), where=f"{where} allowedRoutes")
    kinds = fields.listing(allowed.get("kinds"), where=f"{where} allowedRoutes.kinds")
    served_kinds = ROUTE_KINDS[protocol]
    if kinds:
        named = {k.get("kind") for k in kinds
                 if isinstance(k, dict) and (k.get("group") or GATEWAY_GROUP) == GATEWAY_GROUP}
        served_kinds = tuple(kind for kind in served_kinds if kind in named)
    if not served_kinds:
        raise RouteRejected(f"{where}: allowedRoutes.kinds names no kind pyngress serves on a {protocol} listener "
                            f"(reason InvalidRouteKinds); use {' or '.join(ROUTE_KINDS[protocol])}",
                            reason=Reason.INVALID_ROUTE_KINDS)
    certificate = None
    if scheme == "tls" and _tls_mode(fields.mapping(raw.get("tls"), where=f"{where} tls"), where=where,
                                     settings=settings) == "Terminate" and secrets is not None:
        certificate = _certificate(fields.mapping(raw.get("tls"), where=f"{where} tls"), namespace=namespace,
                                   where=where, grants=grants, secrets=secrets)
    if scheme == "https" and secrets is not None:
        certificate = _certificate(fields.mapping(raw.get("tls"), where=f"{where} tls"), namespace=namespace,
                                   where=where, grants=grants, secrets=secrets)
    return Listener(gateway=f"{namespace}/{name}", gateway_namespace=namespace, name=section, port=port,
                    scheme=scheme, hostname=host, certificate=certificate, kinds=served_kinds, own_port=own_port,
                    namespaces=_namespaces(fields.mapping(allowed.get("namespaces"), where=where), where=where))


def _own_port(port: int, *, scheme: str, standard: int, where: str, settings: Settings) -> int | None:
    """None when the listener is served on the controller's port of its protocol; else the port it has to itself.
    Raises RouteRejected (PortUnavailable) for a port the controller uses otherwise."""
    ours = settings.ports.http if scheme == "http" else settings.ports.https
    if port in (standard, ours):
        return None
    if scheme == "tls":
        raise RouteRejected(f"{where}: port {port} is not available (reason PortUnavailable): TLS Passthrough "
                            f"listeners are served by the passthrough proxy on port 443 or the controller's HTTPS "
                            f"port {ours}", reason=Reason.PORT_UNAVAILABLE)
    clash = reserved_ports(settings)  # with the controller's HTTP and HTTPS ports: the other protocol's, here
    clash.setdefault(*((443, "the standard HTTPS port") if scheme == "http" else (80, "the standard HTTP port")))
    if port in clash:
        raise RouteRejected(f"{where}: port {port} is not available (reason PortUnavailable): it is {clash[port]}; "
                            "use another port", reason=Reason.PORT_UNAVAILABLE)
    return port


def _certificate(tls: dict[str, Any], *, namespace: str, where: str, grants: ReferenceGrants,
                 secrets: TlsSecrets) -> str:
    mode = tls.get("mode") or "Terminate"
    if mode != "Terminate":
        raise RouteRejected(f"{where}: an HTTPS listener terminates TLS; tls.mode {mode} needs protocol TLS (reason "
                            "UnsupportedProtocol)", reason=Reason.UNSUPPORTED_PROTOCOL)
    refs = fields.listing(tls.get("certificateRefs"), where=f"{where} tls.certificateRefs")
    if not refs:
        raise RouteRejected(f"{where}: a listener that terminates TLS needs tls.certificateRefs naming a TLS Secret")
    ref = fields.mapping(refs[0], where=f"{where} tls.certificateRefs[0]")
    if (ref.get("group") or "", ref.get("kind") or "Secret") != ("", "Secret"):
        raise RouteRejected(f"{where}: tls.certificateRefs[0] must be a Secret (reason InvalidCertificateRef)",
                            reason=Reason.INVALID_CERTIFICATE_REF)
    secret_name = fields.object_name(ref.get("name"), where=f"{where} tls.certificateRefs[0]")
    secret_namespace = ref.get("namespace") or namespace
    if not grants.allows(source=(GATEWAY_GROUP, "Gateway", namespace),
                         target=("", "Secret", secret_namespace, secret_name)):
        raise RouteRejected(f"{where}: Secret {secret_namespace}/{secret_name} is in another namespace and no "
                            f"ReferenceGrant in {secret_namespace} allows it (reason RefNotPermitted)",
                            reason=Reason.REF_NOT_PERMITTED)
    secret = f"{secret_namespace}/{secret_name}"
    if problem := secrets.problem(secret):
        raise RouteRejected(f"{where}: TLS Secret {secret} {problem} (reason InvalidCertificateRef)",
                            reason=Reason.INVALID_CERTIFICATE_REF)
    return secret


def _tls_mode(tls: dict[str, Any], *, where: str, settings: Settings) -> str:
    """A TLS listener's mode: Passthrough, or Terminate (the proxy ends TLS with the listener's certificate and sends
    the plain stream to the route's backend: services/proxy/terminate.py). Both are the passthrough proxy's, by SNI,
    so listeners of both modes share the port (mixed termination)."""
    mode = tls.get("mode") or "Terminate"
    if mode not in ("Passthrough", "Terminate"):
        raise RouteRejected(f"{where}: tls.mode {mode!r} must be Passthrough or Terminate (reason UnsupportedValue)",
                            reason=Reason.UNSUPPORTED_VALUE)
    if not settings.ingress.enable_ssl_passthrough:
        raise RouteRejected(f"{where}: TLS {mode} needs the passthrough proxy, which the controller runs only "
                            "with --enable-ssl-passthrough (reason UnsupportedProtocol); start it with that flag",
                            reason=Reason.UNSUPPORTED_PROTOCOL)
    return str(mode)


def _namespaces(raw: dict[str, Any], *, where: str) -> NamespacePolicy:
    source = raw.get("from") or "Same"
    if source in ("Same", "All"):
        return NamespacePolicy(source)
    if source != "Selector":
        raise RouteRejected(f"{where}: allowedRoutes.namespaces.from {source!r} must be Same, All or Selector")
    selector = fields.mapping(raw.get("selector"), where=f"{where} allowedRoutes.namespaces.selector")
    labels = fields.mapping(selector.get("matchLabels"), where=f"{where} matchLabels")
    expressions = []
    for item in fields.listing(selector.get("matchExpressions"), where=f"{where} matchExpressions"):
        item = fields.mapping(item, where=f"{where} matchExpressions")
        operator = item.get("operator")
        if operator not in ("In", "NotIn", "Exists", "DoesNotExist"):
            raise RouteRejected(f"{where}: matchExpressions operator {operator!r} must be In, NotIn, Exists or "
                                "DoesNotExist")
        expressions.append((str(item.get("key")), operator, frozenset(map(str, item.get("values") or ()))))
    return NamespacePolicy("Selector", tuple(sorted((str(k), str(v)) for k, v in labels.items())),
                           tuple(expressions))

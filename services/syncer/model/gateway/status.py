"""The Gateway API status pyngress owes: GatewayClass, Gateway (its listeners, addresses) and each route's parents.

Pure: it decides with the same functions that build the routes (listeners.py, httproutes.py, attachment.py), so the
status says what is served. The conditions carry the spec's reasons and `observedGeneration`, no
`lastTransitionTime`: the writer (services/syncer/ingress_status/gateway_status.py) stamps it, keeping the one the
object shows while a condition's status stays the same. The reasons come from the "(reason X)" the model writes in
its messages, so a user reads the same words in the log, the problems and the status.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Mapping

from services.common.settings import Settings

from ..backends import BackendResolver, index_endpoint_slices
from ..build import StoreIndex
from ..tls import TlsSecrets
from .attachment import attach
from .classes import our_classes
from .fields import RouteRejected
from .grpcroutes import plan_grpc_route
from .httproutes import BackendChoice, RoutePlan, plan_route
from .listeners import ROUTE_KINDS, Listener, _listener, served_listeners
from .objects import GATEWAY_GROUP, GatewayObjects
from .reference_grants import ReferenceGrants
from .tlsroutes import plan_tls_route

Condition = dict[str, Any]
_REASON = re.compile(r"\(reason (\w+)\)")
_MAX_MESSAGE = 32768  # metav1.Condition's message limit
# A listener whose port or protocol is not served is not accepted; one whose references do not resolve is accepted
# and not programmed (the spec's split between the Accepted and the ResolvedRefs conditions).
_NOT_ACCEPTED = ("PortUnavailable", "UnsupportedProtocol")
_UNRESOLVED = ("InvalidCertificateRef", "RefNotPermitted", "InvalidRouteKinds")
# Of the reasons a parentRef attached to none of a Gateway's listeners, the one the status names: the spec's order.
_NOT_ATTACHED = ("NotAllowedByListeners", "NoMatchingListenerHostname", "NoMatchingParent")
_UNRESOLVED_BACKEND = ("RefNotPermitted", "InvalidKind")


@dataclass
class GatewayStatuses:
    """What pyngress writes: each of our GatewayClasses' and Gateways' status, and each route's parent entries for
    our Gateways (a route that names none of them has no entry here)."""
    classes: dict[str, dict[str, Any]] = field(default_factory=dict)  # name → status
    gateways: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)  # (namespace, name) → status
    # (kind, namespace, name) → status.parents entries; kind is HTTPRoute, GRPCRoute or TLSRoute
    routes: dict[tuple[str, str, str], list[dict[str, Any]]] = field(default_factory=dict)


def route_kinds(objects: GatewayObjects) -> tuple[tuple[str, dict[tuple[str, str], dict[str, Any]]], ...]:
    """Each route kind with the store's routes of that kind, by (namespace, name)."""
    return (("HTTPRoute", objects.routes), ("GRPCRoute", objects.grpc_routes), ("TLSRoute", objects.tls_routes))


def condition(kind: str, ok: bool, reason: str, message: str, *, generation: int) -> Condition:
    return {"type": kind, "status": "True" if ok else "False", "reason": reason, "message": message[:_MAX_MESSAGE],
            "observedGeneration": generation}


def reason_in(message: str, choices: Iterable[str]) -> str | None:
    """The first of `choices` (in their order) that `message` names as "(reason X)"."""
    named = set(_REASON.findall(message))
    return next((choice for choice in choices if choice in named), None)


def _generation(obj: Mapping[str, Any]) -> int:
    generation = (obj.get("metadata") or {}).get("generation")
    return generation if isinstance(generation, int) and not isinstance(generation, bool) else 0


def status_addresses(addresses: Iterable[Mapping[str, str]]) -> list[dict[str, str]]:
    """Ingress status addresses ({"ip"} or {"hostname"}) as a Gateway's status.addresses."""
    return [{"type": "IPAddress", "value": a["ip"]} if a.get("ip") else {"type": "Hostname", "value": a["hostname"]}
            for a in addresses]


def store_statuses(store: Mapping[str, dict[str, Any]], *, settings: Settings,
                   addresses: Iterable[Mapping[str, str]] = ()) -> GatewayStatuses:
    """gateway_statuses of the watcher's store ("Kind/namespace/name" → object), Services and Secrets as the model
    reads them."""
    index = StoreIndex.of(store)
    resolver = BackendResolver(index.services, slices=index_endpoint_slices(index.endpoint_slices),
                               allow_external_name=not settings.ingress.disable_svc_external_name)
    return gateway_statuses(GatewayObjects.of(store), settings=settings, resolver=resolver,
                            secrets=TlsSecrets(index.secrets, settings.ingress.default_ssl_certificate),
                            addresses=addresses)


def gateway_statuses(objects: GatewayObjects, *, settings: Settings, resolver: BackendResolver, secrets: TlsSecrets,
                     addresses: Iterable[Mapping[str, str]] = ()) -> GatewayStatuses:
    """The statuses of the store's Gateway API objects (GatewayObjects.of) that pyngress serves."""
    found = GatewayStatuses()
    controller = settings.ingress.gateway_controller_name
    classes = our_classes(objects.classes, controller)
    for name in sorted(classes):
        found.classes[name] = {"conditions": [condition(
            "Accepted", True, "Accepted", f"served by {controller}", generation=_generation(objects.classes[name]))]}
    if not objects.gateways:
        return found
    grants = ReferenceGrants(objects.grants)
    listeners, _ = served_listeners(objects, classes=classes, settings=settings, grants=grants, secrets=secrets)
    ours = {key: gateway for key, gateway in objects.gateways.items()
            if (gateway.get("spec") or {}).get("gatewayClassName") in classes}
    our_gateways = frozenset(f"{namespace}/{name}" for namespace, name in ours)
    attached: dict[tuple[str, str], set[str]] = {}  # (gateway "namespace/name", listener) → routes attached
    for kind, routes in route_kinds(objects):
        kind_listeners = [listener for listener in listeners if kind in listener.kinds]
        other_listeners = [listener for listener in listeners if kind not in listener.kinds]
        for order, namespace, name, route in objects.routes_oldest_first(routes):
            parents = _route_parents(kind, route, namespace=namespace, name=name, order=order, ours=our_gateways,
                                     controller=controller, grants=grants,
                                     listeners=(kind_listeners, other_listeners),
                                     objects=objects, resolver=resolver, attached=attached)
            if parents:
                found.routes[kind, namespace, name] = parents
    served = {(listener.gateway, listener.name): listener for listener in listeners}
    gateway_addresses = status_addresses(addresses)
    for (namespace, name), gateway in sorted(ours.items()):
        found.gateways[namespace, name] = _gateway_status(
            gateway, namespace=namespace, name=name, served=served, attached=attached, settings=settings,
            grants=grants, secrets=secrets, addresses=gateway_addresses)
    return found


def _gateway_status(gateway: dict[str, Any], *, namespace: str, name: str,
                    served: Mapping[tuple[str, str], Listener], attached: Mapping[tuple[str, str], set[str]],
                    settings: Settings, grants: ReferenceGrants, secrets: TlsSecrets,
                    addresses: list[dict[str, str]]) -> dict[str, Any]:
    generation = _generation(gateway)
    ref = f"{namespace}/{name}"
    statuses: list[dict[str, Any]] = []
    accepted = programmed = 0
    for index, raw in enumerate((gateway.get("spec") or {}).get("listeners") or ()):
        section = raw.get("name") if isinstance(raw, dict) else None
        if not isinstance(section, str) or any(s["name"] == section for s in statuses):
            continue  # the CRD refuses both; status.listeners is keyed by name
        listener = served.get((ref, section))
        problem = None
        if listener is None:
            try:
                _listener(raw, namespace=namespace, name=name, index=index, settings=settings, grants=grants,
                          secrets=secrets)
            except RouteRejected as err:
                problem = str(err)
        status = _listener_status(raw, listener, problem, routes=len(attached.get((ref, section), ())),
                                  generation=generation)
        accepted += status["conditions"][0]["status"] == "True"
        programmed += listener is not None
        statuses.append(status)
    count = len(statuses)
    if accepted == count:
        acceptance = condition("Accepted", True, "Accepted", "every listener is accepted", generation=generation)
    else:
        acceptance = condition("Accepted", accepted > 0, "ListenersNotValid",
                               f"{count - accepted} of {count} listeners are not accepted", generation=generation)
    programming = (condition("Programmed", True, "Programmed", f"{programmed} of {count} listeners are served",
                             generation=generation) if programmed else
                   condition("Programmed", False, "Invalid", "no listener is served", generation=generation))
    return {"addresses": addresses, "conditions": [acceptance, programming], "listeners": statuses}


def _listener_status(raw: dict[str, Any], listener: Listener | None, problem: str | None, *, routes: int,
                     generation: int) -> dict[str, Any]:
    def make(kind: str, ok: bool, reason: str, message: str) -> Condition:
        return condition(kind, ok, reason, message, generation=generation)
    kinds = _supported_kinds(raw, listener)
    reason = reason_in(problem or "", (*_NOT_ACCEPTED, *_UNRESOLVED)) if problem else None
    if problem is None:
        accepted = make("Accepted", True, "Accepted", "the listener is accepted")
    elif reason in _UNRESOLVED:
        accepted = make("Accepted", True, "Accepted", "the listener is accepted; its references do not resolve")
    else:
        accepted = make("Accepted", False, reason or "UnsupportedValue", problem)
    resolved = make("ResolvedRefs", True, "ResolvedRefs", "every reference resolves")
    if reason in _UNRESOLVED:
        resolved = make("ResolvedRefs", False, reason, problem or "")
    elif kinds.unsupported:
        resolved = make("ResolvedRefs", False, "InvalidRouteKinds",
                        f"route kinds {', '.join(kinds.unsupported)} are not served on this listener")
    programmed = (make("Programmed", True, "Programmed", "the listener is served") if problem is None else
                  make("Programmed", False, "Invalid", problem))
    return {"name": raw["name"], "supportedKinds": kinds.supported, "attachedRoutes": routes,
            "conditions": [accepted, programmed, resolved,
                           make("Conflicted", False, "NoConflicts", "no other listener conflicts with it")]}


@dataclass(frozen=True)
class _Kinds:
    supported: list[dict[str, str]]
    unsupported: tuple[str, ...]


def _supported_kinds(raw: dict[str, Any], listener: Listener | None) -> _Kinds:
    """The route kinds a listener takes (those of allowedRoutes.kinds pyngress serves on its protocol, all of them
    when it names none), and the names of those it does not serve."""
    served = ROUTE_KINDS.get(str(raw.get("protocol")), ())
    allowed = raw.get("allowedRoutes")
    kinds = allowed.get("kinds") if isinstance(allowed, dict) else None
    named = [(k.get("group") or GATEWAY_GROUP, str(k.get("kind"))) if isinstance(k, dict) else ("", str(k))
             for k in kinds] if isinstance(kinds, list) and kinds else [(GATEWAY_GROUP, kind) for kind in served]
    taken = listener.kinds if listener is not None else tuple(k for g, k in named if g == GATEWAY_GROUP and k in served)
    return _Kinds([{"group": GATEWAY_GROUP, "kind": kind} for kind in taken],
                  tuple(f"{kind} ({group})" for group, kind in named if group != GATEWAY_GROUP or kind not in served))


def _planned(kind: str, route: dict[str, Any], *, namespace: str, name: str, order: Any,
             grants: ReferenceGrants) -> tuple[RoutePlan, tuple[BackendChoice, ...]]:
    """A route of `kind` validated as build.py does (RouteRejected when it is not served), and its backendRefs (a
    TLSRoute's: those with a weight)."""
    if kind == "TLSRoute":
        tls = plan_tls_route(route, namespace=namespace, name=name, order=order, grants=grants)
        return tls.route, tls.backends
    plan = (plan_route if kind == "HTTPRoute" else plan_grpc_route)(route, namespace=namespace, name=name,
                                                                     order=order, grants=grants)
    return plan, tuple(choice for rule in plan.rules for choice in rule.action.backends)


def _route_parents(kind: str, route: dict[str, Any], *, namespace: str, name: str, order: Any, ours: frozenset[str],
                   controller: str, grants: ReferenceGrants, listeners: tuple[list[Listener], list[Listener]],
                   objects: GatewayObjects, resolver: BackendResolver,
                   attached: dict[tuple[str, str], set[str]]) -> list[dict[str, Any]]:
    """The route's status.parents entries for the parentRefs naming one of our Gateways; `listeners`: the served
    listeners that take the route's kind, and those that do not."""
    raw_parents = [(i, p) for i, p in enumerate(_listing((route.get("spec") or {}).get("parentRefs")))
                   if isinstance(p, dict) and (p.get("group") or GATEWAY_GROUP, p.get("kind") or "Gateway")
                   == (GATEWAY_GROUP, "Gateway") and f"{p.get('namespace') or namespace}/{p.get('name')}" in ours]
    if not raw_parents:
        return []
    generation = _generation(route)
    plan: RoutePlan | None = None
    try:
        plan, backends = _planned(kind, route, namespace=namespace, name=name, order=order, grants=grants)
        resolved = _resolved_refs(backends, resolver, generation=generation)
        rejected = None
    except RouteRejected as err:
        rejected = f"{err}; the route is not served"
        resolved = condition("ResolvedRefs", True, "ResolvedRefs", "the route is not served", generation=generation)
    entries = []
    for index, raw in raw_parents:
        if plan is None:
            accepted = condition("Accepted", False, "UnsupportedValue", rejected or "", generation=generation)
        else:
            accepted = _accepted(plan, index, listeners=listeners, ours=ours, objects=objects, attached=attached,
                                 generation=generation)
        entries.append({"parentRef": _echo(raw), "controllerName": controller, "conditions": [accepted, resolved]})
    return entries


def _accepted(plan: RoutePlan, index: int, *, listeners: tuple[list[Listener], list[Listener]],
              ours: frozenset[str], objects: GatewayObjects, attached: dict[tuple[str, str], set[str]],
              generation: int) -> Condition:
    parent = replace(plan, parents=(plan.parents[index],))
    taking, others = listeners
    attachments, refusals = attach(parent, listeners=taking, our_gateways=ours, labels_of=objects.labels_of)
    if not attachments and attach(parent, listeners=others, our_gateways=ours, labels_of=objects.labels_of)[0]:
        # The spec's reason when only the route's kind keeps it off the listeners it names.
        return condition("Accepted", False, "NotAllowedByListeners", "no listener it names allows its kind",
                         generation=generation)
    if attachments:
        for attachment in attachments:
            attached.setdefault((attachment.listener.gateway, attachment.listener.name), set()).add(plan.ref)
        return condition("Accepted", True, "Accepted", "attached to "
                         + ", ".join(sorted({a.listener.name for a in attachments})), generation=generation)
    message = "; ".join(refusals)
    return condition("Accepted", False, reason_in(message, _NOT_ATTACHED) or "NoMatchingParent", message,
                     generation=generation)


def _resolved_refs(backends: Iterable[BackendChoice], resolver: BackendResolver, *, generation: int) -> Condition:
    """ResolvedRefs: False with the reason of the first backendRef that does not resolve."""
    for choice in backends:
        if choice.problem is not None:
            return condition("ResolvedRefs", False, reason_in(choice.problem, _UNRESOLVED_BACKEND) or "InvalidKind",
                             choice.problem, generation=generation)
        if choice.service is not None:
            backend = resolver.resolve(choice.service)
            if backend.name is None or backend.refused:
                return condition("ResolvedRefs", False, "BackendNotFound", backend.problem or "no such backend",
                                 generation=generation)
    return condition("ResolvedRefs", True, "ResolvedRefs", "every backendRef resolves", generation=generation)


def _echo(raw: Mapping[str, Any]) -> dict[str, Any]:
    """A parentRef as status.parents[].parentRef repeats it: as written, group and kind with their defaults."""
    echoed = {"group": raw.get("group") or GATEWAY_GROUP, "kind": raw.get("kind") or "Gateway"}
    echoed.update({k: raw[k] for k in ("namespace", "name", "sectionName", "port") if raw.get(k) is not None})
    return echoed


def _listing(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []

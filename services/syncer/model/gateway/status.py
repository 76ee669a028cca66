"""The Gateway API status pyngress owes: GatewayClass, Gateway (its listeners, addresses) and each route's parents.

Pure: it decides with the same functions that build the routes (listeners.py, httproutes.py, attachment.py), so the
status says what is served. The conditions carry the spec's reasons and `observedGeneration`, no
`lastTransitionTime`: the writer (services/syncer/ingress_status/gateway_status.py) stamps it, keeping the one the
object shows while a condition's status stays the same. The reasons are those the model decides with
(RouteRejected.reason, a backendRef's, an attachment refusal's, a listener conflict's: reasons.py), and the
messages are its messages, so a user reads the same words in the log, the problems and the status.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Mapping

from services.common.settings import Settings

from ..backends import BackendResolver, index_endpoint_slices
from ..build import StoreIndex
from ..stream_services import stream_services
from ..tls import TlsSecrets
from ..types import CATCH_ALL_HOST
from .attachment import Attachment, attach
from .attachment import Refusal as AttachRefusal
from .classes import our_classes
from .tls_status import ConditionSpec, gateway_tls_conditions, policy_statuses
from .client_validation import ValidationRejected
from .fields import RouteRejected
from .gateways import Refusal, class_refusal, gateway_addresses, gateway_refusal
from .grpcroutes import plan_grpc_route
from .httproutes import BackendChoice, RoutePlan, plan_route
from .listener_verdicts import ListenerVerdict, listener_verdicts
from .conflicts import Conflict
from .listeners import ROUTE_KINDS, Listener, served_listeners, unavailable_own_ports
from .objects import GATEWAY_GROUP, GatewayObjects
from .reasons import UNRESOLVED_LISTENER_REFS, Reason
from .reference_grants import ReferenceGrants
from .tables import (HostPort, claims_weighed, gateway_orders, host_gateways, host_owner, ingress_lost_host,
                     lost_host, lost_listeners)
from .tlsroutes import plan_tls_route

Condition = dict[str, Any]
_MAX_MESSAGE = 32768  # metav1.Condition's message limit


@dataclass
class GatewayStatuses:
    """What pyngress writes: each of our GatewayClasses' and Gateways' status, and each route's parent entries for
    our Gateways (a route that names none of them has no entry here)."""
    classes: dict[str, dict[str, Any]] = field(default_factory=dict)  # name → status
    gateways: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)  # (namespace, name) → status
    # (kind, namespace, name) → status.parents entries; kind is HTTPRoute, GRPCRoute or TLSRoute
    routes: dict[tuple[str, str, str], list[dict[str, Any]]] = field(default_factory=dict)
    # (namespace, name) → a BackendTLSPolicy's status.ancestors entries for our Gateways (tls_status.py)
    policies: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=dict)


def route_kinds(objects: GatewayObjects) -> tuple[tuple[str, dict[tuple[str, str], dict[str, Any]]], ...]:
    """Each route kind with the store's routes of that kind, by (namespace, name)."""
    return (("HTTPRoute", objects.routes), ("GRPCRoute", objects.grpc_routes), ("TLSRoute", objects.tls_routes))


def condition(kind: str, ok: bool, reason: str, message: str, *, generation: int) -> Condition:
    return {"type": kind, "status": "True" if ok else "False", "reason": str(reason),  # a Reason: its plain value
            "message": message[:_MAX_MESSAGE], "observedGeneration": generation}


def _generation(obj: Mapping[str, Any]) -> int:
    generation = (obj.get("metadata") or {}).get("generation")
    return generation if isinstance(generation, int) and not isinstance(generation, bool) else 0


def status_addresses(addresses: Iterable[Mapping[str, str]]) -> list[dict[str, str]]:
    """Ingress status addresses ({"ip"} or {"hostname"}) as a Gateway's status.addresses."""
    return [{"type": "IPAddress", "value": a["ip"]} if a.get("ip") else {"type": "Hostname", "value": a["hostname"]}
            for a in addresses]


def store_statuses(store: Mapping[str, dict[str, Any]], *, settings: Settings,
                   addresses: Iterable[Mapping[str, str]] = (),
                   taken_ports: Mapping[int, str] | None = None,
                   ingress_owners: Mapping[str, str] | None = None) -> GatewayStatuses:
    """gateway_statuses of the watcher's store ("Kind/namespace/name" → object), Services and Secrets as the model
    reads them. `taken_ports`: the ports of their own that the syncer found another program listening on when it last
    applied (port → why; services/syncer/nginx_apply/taken_ports.py); the TCP services' ports are read here.
    `ingress_owners`: the last model's host → the namespace whose Ingress owns it (build.IngressOwners)."""
    index = StoreIndex.of(store)
    resolver = BackendResolver(index.services, slices=index_endpoint_slices(index.endpoint_slices),
                               allow_external_name=not settings.ingress.disable_svc_external_name)
    streams = stream_services(store, settings, resolver)
    return gateway_statuses(GatewayObjects.of(store), settings=settings, resolver=resolver,
                            secrets=TlsSecrets(index.secrets, settings.ingress.default_ssl_certificate),
                            addresses=addresses, unavailable_ports=unavailable_own_ports(
                                (server.port for server in streams.servers if server.protocol == "tcp"),
                                taken_ports or {}), ingress_owners=ingress_owners)


def gateway_statuses(objects: GatewayObjects, *, settings: Settings, resolver: BackendResolver, secrets: TlsSecrets,
                     addresses: Iterable[Mapping[str, str]] = (),
                     unavailable_ports: Mapping[int, str] | None = None,
                     ingress_owners: Mapping[str, str] | None = None) -> GatewayStatuses:
    """The statuses of the store's Gateway API objects (GatewayObjects.of) that pyngress serves. `unavailable_ports`:
    the ports of their own nginx does not listen on, with why (listeners.unavailable_own_ports); their listeners are
    not accepted (PortUnavailable). `ingress_owners`: host → the namespace whose Ingress owns it, as the model has it
    (read host by host): a route of another namespace does not serve that host."""
    found = GatewayStatuses()
    controller = settings.ingress.gateway_controller_name
    owners: Mapping[str, str] = {} if ingress_owners is None else ingress_owners
    classes = our_classes(objects.classes, controller)
    for name in sorted(classes):
        refused = class_refusal(objects.classes[name])
        found.classes[name] = {"conditions": [condition(
            "Accepted", refused is None, refused.reason if refused else "Accepted",
            refused.message if refused else f"served by {controller}", generation=_generation(objects.classes[name]))]}
    if not objects.gateways:
        return found
    grants = ReferenceGrants(objects.grants)
    served_list, _ = served_listeners(objects, classes=classes, settings=settings, grants=grants, secrets=secrets)
    served = {(listener.gateway, listener.name): listener for listener in served_list}
    ours = {key: gateway for key, gateway in objects.gateways.items()
            if (gateway.get("spec") or {}).get("gatewayClassName") in classes}
    our_gateways = frozenset(f"{namespace}/{name}" for namespace, name in ours)
    refusals = {key: _refusal(gateway, objects) for key, gateway in ours.items()}
    verdicts = {(namespace, name): listener_verdicts(
        gateway, namespace=namespace, name=name, refused=refusals[namespace, name] is not None, served=served,
        served_list=served_list, settings=settings, grants=grants, secrets=secrets, config_maps=objects.config_maps,
        unavailable_ports=unavailable_ports or {}) for (namespace, name), gateway in ours.items()}
    # The listeners routes attach to: those served, and those that take routes without serving them.
    listeners = [v.attachable for found_verdicts in verdicts.values() for v in found_verdicts if v.attachable]
    # Those that take routes without serving them ((gateway, listener) → why): a route's parent entry says so.
    unserved = {(v.unprogrammed.gateway, v.name): str(v.rejected) for found_verdicts in verdicts.values()
                for v in found_verdicts if v.unprogrammed is not None}
    taking = {kind: [listener for listener in listeners if kind in listener.kinds] for kind, _ in route_kinds(objects)}
    others = {kind: [listener for listener in listeners if kind not in listener.kinds] for kind in taking}
    # (kind, namespace, name) and the route, each kind oldest first: made as they are told, unless the host claims
    # need them all first (Gateways of several namespaces), as holding every route costs garbage collection.
    our_routes: Iterable[tuple[tuple[str, str, str], _OurRoute]] = (
        ((kind, namespace, name), _our_route(kind, route, parents, namespace=namespace, name=name, order=order,
                                             grants=grants, resolver=resolver, listeners=taking[kind],
                                             ours=our_gateways, objects=objects))
        for kind, routes in route_kinds(objects) for order, namespace, name, route in objects.routes_oldest_first(routes)
        if (parents := _our_parents(route, namespace=namespace, ours=our_gateways)))
    claimed: dict[HostPort, str] = {}
    if claims_weighed(served_list):
        our_routes = list(our_routes)
        claimed = _host_claims([route for _, route in our_routes], served=served_list, attachable=listeners,
                               objects=objects, ours=our_gateways, owners=owners)
    # The served listeners whose own hostname an older Gateway of another namespace has: they serve nothing.
    lost = {(listener.gateway, listener.name): Conflict(Reason.HOSTNAME_CONFLICT, why)
            for listener, why in lost_listeners(served_list, claimed)}
    attached: dict[tuple[str, str], set[str]] = {}  # (gateway "namespace/name", listener) → routes attached
    for (kind, namespace, name), our_route in our_routes:
        found.routes[kind, namespace, name] = _route_parents(
            our_route, ours=our_gateways, controller=controller, unserved=unserved, claimed=claimed, owners=owners,
            objects=objects, other_listeners=others[kind], attached=attached)
    controller_addresses = status_addresses(addresses)
    for (namespace, name), gateway in sorted(ours.items()):
        found.gateways[namespace, name] = _gateway_status(
            gateway, verdicts[namespace, name], namespace=namespace, attached=attached, lost=lost,
            refusal=refusals[namespace, name], addresses=controller_addresses, name=name,
            tls=gateway_tls_conditions(gateway, namespace=namespace, grants=grants, secrets=secrets))
    for key, (ancestors, conditions) in policy_statuses(objects, ours=our_gateways).items():
        generation = _generation(objects.tls_policies[key])
        found.policies[key] = [{"ancestorRef": ancestor, "controllerName": controller, "conditions": [
            condition(*spec, generation=generation) for spec in conditions]} for ancestor in ancestors]
    return found


def _refusal(gateway: Mapping[str, Any], objects: GatewayObjects) -> Refusal | None:
    return gateway_refusal(gateway, objects.classes.get(str((gateway.get("spec") or {}).get("gatewayClassName"))))


def _gateway_status(gateway: dict[str, Any], verdicts: list[ListenerVerdict], *, namespace: str, name: str,
                    attached: Mapping[tuple[str, str], set[str]], lost: Mapping[tuple[str, str], Conflict],
                    refusal: Refusal | None, addresses: list[dict[str, str]],
                    tls: list[ConditionSpec]) -> dict[str, Any]:
    """`lost`: the served listeners ((gateway, listener) → why) whose hostname another namespace's Gateway has."""
    generation = _generation(gateway)
    ref = f"{namespace}/{name}"

    def make(kind: str, ok: bool, reason: str, message: str) -> Condition:
        return condition(kind, ok, reason, message, generation=generation)
    statuses = [_listener_status(verdict, refused=refusal is not None, lost=lost.get((ref, verdict.name)),
                                 routes=len(attached.get((ref, verdict.name), ())), generation=generation)
                for verdict in verdicts]
    count = len(statuses)
    accepted = sum(status["conditions"][0]["status"] == "True" for status in statuses)
    programmed = sum(verdict.served is not None and (ref, verdict.name) not in lost for verdict in verdicts)
    conflicted = [verdict.name for verdict in verdicts if verdict.conflict is not None]
    if refusal is not None:
        acceptance = make("Accepted", False, refusal.reason, refusal.message)
    elif accepted == count:
        acceptance = make("Accepted", True, "Accepted", "every listener is accepted")
    else:
        acceptance = make("Accepted", accepted > 0, "ListenersNotValid",
                          f"{count - accepted} of {count} listeners are not accepted"
                          + (f"; listeners {', '.join(conflicted)} are conflicted" if conflicted else ""))
    shown = gateway_addresses(gateway, addresses)
    if refusal is not None:
        programming = make("Programmed", False, "Invalid", "the Gateway is not accepted")
    elif not programmed:
        programming = make("Programmed", False, "Invalid", "no listener is served")
    elif shown.refusal is not None:
        programming = make("Programmed", False, shown.refusal.reason, shown.refusal.message)
    else:
        programming = make("Programmed", True, "Programmed", f"{programmed} of {count} listeners are served")
    return {"addresses": shown.shown, "conditions": [acceptance, programming, *(make(*spec) for spec in tls)],
            "listeners": statuses}


def _listener_status(verdict: ListenerVerdict, *, refused: bool, lost: Conflict | None, routes: int,
                     generation: int) -> dict[str, Any]:
    """`lost`: why the served listener's hostname is another namespace's (HostnameConflict). Such a listener is valid
    and its routes attach (it serves them as soon as that Gateway gives the host up, as the spec has a route attach to
    a conflicted listener): Accepted, not Programmed, Conflicted. A listener with a wildcard that loses only some names
    under it stays Programmed: its routes' statuses name those hosts."""
    def make(kind: str, ok: bool, reason: str, message: str) -> Condition:
        return condition(kind, ok, reason, message, generation=generation)
    kinds = _supported_kinds(verdict.raw, verdict.served)
    rejected, conflict = verdict.rejected, verdict.conflict
    unresolved = rejected is not None and rejected.reason in UNRESOLVED_LISTENER_REFS
    if conflict is not None:
        accepted = make("Accepted", False, conflict.reason, conflict.message)
        programmed = make("Programmed", False, conflict.reason, conflict.message)
    elif rejected is not None and not unresolved:
        accepted = make("Accepted", False, rejected.reason or Reason.UNSUPPORTED_VALUE, str(rejected))
        programmed = make("Programmed", False, "Invalid", str(rejected))
    else:
        accepted = make("Accepted", True, "Accepted", "the listener is accepted; its references do not resolve"
                        if unresolved else "the listener is accepted")
        programmed = (make("Programmed", False, lost.reason, lost.message) if lost is not None else
                      make("Programmed", True, "Programmed", "the listener is served") if verdict.served else
                      make("Programmed", False, "Invalid", str(rejected) if rejected is not None else
                           "the Gateway is not accepted" if refused else "the listener is not served"))
    resolved = make("ResolvedRefs", True, "ResolvedRefs", "every reference resolves")
    if unresolved and rejected is not None and rejected.reason is not None:
        resolved = make("ResolvedRefs", False, rejected.reason, str(rejected))
    elif isinstance(rejected, ValidationRejected):  # its client-certificate validation's references
        resolved = make("ResolvedRefs", False, rejected.refs_reason, str(rejected))
    elif kinds.unsupported:
        resolved = make("ResolvedRefs", False, "InvalidRouteKinds",
                        f"route kinds {', '.join(kinds.unsupported)} are not served on this listener")
    conflict = conflict or lost
    conflicted = (make("Conflicted", True, conflict.reason, conflict.message) if conflict is not None else
                  make("Conflicted", False, "NoConflicts", "no other listener conflicts with it"))
    return {"name": verdict.name, "supportedKinds": kinds.supported, "attachedRoutes": routes,
            "conditions": [accepted, programmed, resolved, conflicted]}


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


@dataclass(frozen=True)
class _OurRoute:
    """A route naming our Gateways, planned and attached once: for the host claims of every route, then for its own
    status. Its plan keeps no rules: 10,000 routes' rules alive at once made garbage collection cost a third more."""
    kind: str
    route: dict[str, Any]
    parents: list[tuple[int, dict[str, Any]]]  # its parentRefs naming our Gateways, with their index
    plan: RoutePlan | RouteRejected  # without its rules, or why it is not served
    resolved: Condition  # its ResolvedRefs
    # Each of `parents` attached (attach()) to the listeners routes attach to that take its kind
    attached: tuple[tuple[list[Attachment], list[AttachRefusal]], ...] = ()


def _our_route(kind: str, route: dict[str, Any], parents: list[tuple[int, dict[str, Any]]], *, namespace: str,
               name: str, order: Any, grants: ReferenceGrants, resolver: BackendResolver, listeners: list[Listener],
               ours: frozenset[str], objects: GatewayObjects) -> _OurRoute:
    generation = _generation(route)
    try:
        plan, backends = _planned(kind, route, namespace=namespace, name=name, order=order, grants=grants)
    except RouteRejected as err:
        return _OurRoute(kind, route, parents, err, condition("ResolvedRefs", True, "ResolvedRefs",
                                                              "the route is not served", generation=generation))
    plan = RoutePlan(ref=plan.ref, namespace=plan.namespace, order=plan.order, parents=plan.parents,
                     hostnames=plan.hostnames, rules=(), kind=plan.kind)
    return _OurRoute(kind, route, parents, plan, _resolved_refs(backends, resolver, generation=generation), tuple(
        attach(replace(plan, parents=(plan.parents[index],)), listeners=listeners, our_gateways=ours,
               labels_of=objects.labels_of) for index, _ in parents))


def _host_claims(routes: Iterable[_OurRoute], *, served: list[Listener], attachable: list[Listener],
                 objects: GatewayObjects, ours: frozenset[str], owners: Mapping[str, str]) -> dict[HostPort, str]:
    """The Gateway each host of the `served` listeners (the model's) and of the routes attached to them belongs to on
    each port, as build.py's tables decide it (tables.host_gateways). The routes' attachments are those to the
    `attachable` listeners, of which the served; those attached to a listener served but not attachable (its port
    unavailable) are found here. `owners`: the Ingresses' (gateway_statuses), whose hosts other namespaces' routes do
    not claim."""
    keys = {(listener.gateway, listener.name) for listener in served}
    taking = {(listener.gateway, listener.name) for listener in attachable}
    apart = [listener for listener in served if (listener.gateway, listener.name) not in taking]
    attached = [(route.plan, [attachment for attachments, _ in route.attached for attachment in attachments
                              if (attachment.listener.gateway, attachment.listener.name) in keys]
                 + (attach(route.plan, listeners=[listener for listener in apart if route.kind in listener.kinds],
                           our_gateways=ours, labels_of=objects.labels_of)[0] if apart else []))
                for route in routes if isinstance(route.plan, RoutePlan)]
    hosts = {listener.hostname for listener in served if listener.hostname is not None}
    hosts.update(host for _, attachments in attached for attachment in attachments for host in attachment.hosts)
    return host_gateways(attached, hosts, listeners=served, gateway_orders=gateway_orders(objects.gateways),
                         ingress_owners=owners)


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


def _our_parents(route: dict[str, Any], *, namespace: str, ours: frozenset[str]) -> list[tuple[int, dict[str, Any]]]:
    """The route's parentRefs (with their index) that name one of our Gateways."""
    return [(i, p) for i, p in enumerate(_listing((route.get("spec") or {}).get("parentRefs")))
            if isinstance(p, dict) and (p.get("group") or GATEWAY_GROUP, p.get("kind") or "Gateway")
            == (GATEWAY_GROUP, "Gateway") and f"{p.get('namespace') or namespace}/{p.get('name')}" in ours]


def _route_parents(route: _OurRoute, *, ours: frozenset[str], controller: str,
                   other_listeners: list[Listener], unserved: Mapping[tuple[str, str], str],
                   claimed: Mapping[HostPort, str], owners: Mapping[str, str], objects: GatewayObjects,
                   attached: dict[tuple[str, str], set[str]]) -> list[dict[str, Any]]:
    """The route's status.parents entries for its parentRefs naming one of our Gateways; `other_listeners`: the
    listeners routes attach to that do not take the route's kind; `unserved`: of the listeners routes attach to, the
    ones that serve none of their routes, with why; `claimed`: which Gateway each host belongs to (_host_claims);
    `owners`: which namespace's Ingress owns a host (gateway_statuses)."""
    generation = _generation(route.route)
    plan = route.plan
    entries = []
    for position, (index, raw) in enumerate(route.parents):
        if isinstance(plan, RouteRejected):
            accepted = condition("Accepted", False, plan.reason or Reason.UNSUPPORTED_VALUE,
                                 f"{plan}; the route is not served", generation=generation)
        else:
            accepted = _accepted(plan, index, route.attached[position], others=other_listeners, unserved=unserved,
                                 claimed=claimed, owners=owners, ours=ours, objects=objects, attached=attached,
                                 generation=generation)
        entries.append({"parentRef": _echo(raw), "controllerName": controller,
                        "conditions": [accepted, route.resolved]})
    return entries


def _accepted(plan: RoutePlan, index: int, attached_here: tuple[list[Attachment], list[AttachRefusal]], *,
              others: list[Listener], unserved: Mapping[tuple[str, str], str], claimed: Mapping[HostPort, str],
              owners: Mapping[str, str], ours: frozenset[str], objects: GatewayObjects, attached: dict[tuple[str, str], set[str]],
              generation: int) -> Condition:
    """The Accepted of the route's parentRef `index`, attached as `attached_here` to the listeners that take its kind
    (`others`: those that do not). A route whose hosts there all belong to other namespaces' Gateways or Ingresses
    (`owners`), as tables.gateway_tables decides, is not: NoMatchingListenerHostname, the spec's reason for a parent with no listener whose hostname it may serve
    (the listeners that match it serve those hosts for no route of this namespace)."""
    attachments, refusals = attached_here
    if not attachments and attach(replace(plan, parents=(plan.parents[index],)), listeners=others, our_gateways=ours,
                                  labels_of=objects.labels_of)[0]:
        # The spec's reason when only the route's kind keeps it off the listeners it names.
        return condition("Accepted", False, "NotAllowedByListeners", "no listener it names allows its kind",
                         generation=generation)
    if attachments:
        lost = [why for attachment in attachments for host in attachment.hosts
                if (why := _lost(host, attachment.listener, plan.namespace, claimed=claimed, owners=owners))]
        if lost and len(lost) == sum(len(attachment.hosts) for attachment in attachments):
            return condition("Accepted", False, Reason.NO_MATCHING_LISTENER_HOSTNAME, (
                f"not attached to Gateway {plan.parents[index].namespace}/{plan.parents[index].name}: no host it names "
                "there is served (reason NoMatchingListenerHostname): " + "; ".join(lost)), generation=generation)
        for attachment in attachments:
            attached.setdefault((attachment.listener.gateway, attachment.listener.name), set()).add(plan.ref)
        return condition("Accepted", True, "Accepted", "; ".join([_attached_message(attachments, unserved), *lost]),
                         generation=generation)
    [refusal] = refusals  # one parentRef, of one of our Gateways
    return condition("Accepted", False, refusal.reason, refusal.message, generation=generation)


def _lost(host: str, listener: Listener, namespace: str, *, claimed: Mapping[HostPort, str],
          owners: Mapping[str, str]) -> str | None:
    """Why `listener` does not serve `host` for a route of `namespace`, in tables.gateway_tables' order: another
    namespace's Ingress owns it, or another namespace's Gateway claimed it first there; None when it serves it."""
    if host == CATCH_ALL_HOST:
        return None
    if (ingress := owners.get(host)) is not None and ingress != namespace:
        return ingress_lost_host(host, ingress)
    gateway = host_owner(claimed, host, listener) if claimed else None
    return lost_host(host, listener, gateway) if gateway is not None else None


def _attached_message(attachments: Iterable[Attachment], unserved: Mapping[tuple[str, str], str]) -> str:
    """"attached to <listeners>", and which of them do not serve its hosts, and why. Accepted stays True (the spec
    accepts a route on a listener whose certificate does not resolve: conformance GatewayWithAttachedRoutes), so the
    message is where a user reads that those hosts are not served there."""
    names = sorted({a.listener.name for a in attachments})
    why = {a.listener.name: unserved[key] for a in attachments
           if (key := (a.listener.gateway, a.listener.name)) in unserved}
    if not why:
        return f"attached to {', '.join(names)}"
    where = "its hosts are not served" if len(why) == len(names) else f"not served on {', '.join(sorted(why))}"
    return f"attached to {', '.join(names)}; {where}: " + "; ".join(why[name] for name in sorted(why))


def _resolved_refs(backends: Iterable[BackendChoice], resolver: BackendResolver, *, generation: int) -> Condition:
    """ResolvedRefs: False with the reason of the first backendRef that does not resolve."""
    for choice in backends:
        if choice.problem is not None:
            return condition("ResolvedRefs", False, choice.reason or Reason.INVALID_KIND, choice.problem,
                             generation=generation)
        if choice.service is not None:
            backend = resolver.resolve(choice.service)
            if backend.name is None or backend.refused:
                return condition("ResolvedRefs", False, Reason.BACKEND_NOT_FOUND, backend.problem or "no such backend",
                                 generation=generation)
    return condition("ResolvedRefs", True, "ResolvedRefs", "every backendRef resolves", generation=generation)


def _echo(raw: Mapping[str, Any]) -> dict[str, Any]:
    """A parentRef as status.parents[].parentRef repeats it: as written, group and kind with their defaults."""
    echoed = {"group": raw.get("group") or GATEWAY_GROUP, "kind": raw.get("kind") or "Gateway"}
    echoed.update({k: raw[k] for k in ("namespace", "name", "sectionName", "port") if raw.get(k) is not None})
    return echoed


def _listing(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []

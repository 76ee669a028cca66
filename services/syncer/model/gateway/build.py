"""The store's Gateway API objects → what they add to the Model: Gateway rules per host (HTTPRoutes and GRPCRoutes),
passthrough hosts (TLSRoutes), backends, certificates, location profiles (timeouts, gRPC) and problems. Pure: no
I/O, the same store always gives the same result.

A caller that keeps a GatewayKept (incremental.py) and says which store keys changed since the last build gets a
build that costs work for the routes sharing the changed routes' host names only (kept_routes.py): at 10,000
HTTPRoutes a pass over every route (plans checked, attachment, each host's candidates compared, each action's
Services resolved again) took 0.4-0.6 s of each new route. Its result is the same as a whole build's, which the
same code makes with every route changed."""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Collection, Iterable, Mapping

from services.common.settings import Settings
from services.nginxconf.config import LocationProfile

from ..backends import BackendResolver, ResolvedBackend, ServiceRef
from ..creation import creation_order
from ..problems import Problem
from ..tls import TlsSecrets
from ..types import HostRoutes
from .attachment import Attachment, attach
from .classes import our_classes
from .fields import RouteRejected
from .grpcroutes import plan_grpc_route
from .httproutes import RoutePlan, plan_route
from .kept_routes import ROUTE_KINDS, Frame, GatewayKept, RouteKey, RouteRecord
from .listeners import served_listeners
from .objects import GatewayObjects
from .reference_grants import ReferenceGrants
from .tables import TablesKept, claims_weighed, gateway_orders, gateway_tables, host_gateways, lost_listeners
from .tlsroutes import TlsPassthrough, TlsRoutePlan, plan_tls_route, tls_passthrough
from .backend_tls_policies import BackendTlsPolicies
from .upstream_tls import UpstreamTls, upstream_tls


@dataclass
class GatewayModel:
    routes: dict[str, dict[str, Any]] = field(default_factory=dict)  # host → gateway_routes JSON
    backends: dict[str, list[str]] = field(default_factory=dict)
    profiles: dict[str, LocationProfile] = field(default_factory=dict)
    tls_secrets: dict[str, str] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    passthrough: TlsPassthrough = field(default_factory=TlsPassthrough)  # TLSRoutes' hosts, before the Ingresses'
    # The ports HTTP and HTTPS listeners have to themselves (listeners.py), with their scheme: nginx listens there.
    own_ports: dict[int, str] = field(default_factory=dict)
    ssl_files: dict[str, bytes] = field(default_factory=dict)  # the backends' CAs, client certificates (upstream_tls)
    resolved: dict[ServiceRef, ResolvedBackend] = field(default_factory=dict)  # the Services its tables' rules use
    # The hosts whose `routes` entry may differ from the previous build's (given as `previous`); None: any host.
    changed_hosts: frozenset[str] | None = field(default=None, compare=False)
    # The problems of the listeners whose hostname another namespace's Gateway has (among `problems`), kept for the
    # next build that changes no route tabled for a listener's hostname.
    lost_listeners: list[Problem] = field(default_factory=list)


def build_gateway(objects: GatewayObjects, *, settings: Settings, resolver: BackendResolver,
                  secrets: TlsSecrets, ingress_owners: Mapping[str, str] | None = None,
                  kept: GatewayKept | None = None, changed: Collection[str] | None = None,
                  previous: GatewayModel | None = None) -> GatewayModel:
    """What the Gateway API objects of the store (GatewayObjects.of) add to the Model. `ingress_owners`: host → the
    namespace whose Ingress owns it (the oldest); routes of other namespaces do not serve that host. `kept`: what the
    last build kept (kept_routes.py); none when not given. `changed`: the store keys that changed since that build,
    when nothing else it read did (no Service, Secret or EndpointSlice it resolved, no host owner it asked about),
    and `previous` its result as the caller keeps it (its backends' endpoints brought up to date); without them, or
    when a key is not a route's, the part is built whole."""
    kept = GatewayKept() if kept is None else kept
    owners: Mapping[str, str] = {} if ingress_owners is None else ingress_owners
    keys = _changed_routes(changed) if previous is not None and kept.frame is not None else None
    whole = keys is None
    if keys is None:
        if not objects.gateways:
            kept.start_whole(None)
            kept.plans.forget_unseen()
            return GatewayModel()
        kept.start_whole(_frame(objects, settings=settings, secrets=secrets))
        keys = [(kind, namespace, name) for kind in ROUTE_KINDS for namespace, name in _routes(objects, kind)]
    elif previous is not None:
        kept.backends.values.update(previous.backends)  # the endpoints the caller resolved again since
    frame = kept.frame
    assert frame is not None
    changed_hosts: set[str] = set()
    tls_changed = whole
    for key in keys:
        if (old := kept.records.get(key)) is not None and not whole:
            _forget_actions(kept.tables, old)
        changed_hosts |= kept.forget(key) | _claims_over_tls(old, kept)
        tls_changed = tls_changed or key[0] == "TLSRoute"
        route = _routes(objects, key[0]).get((key[1], key[2]))
        if route is None:
            kept.plans.forget(key)
            continue
        record = _record(key, route, frame=frame, kept=kept, objects=objects)
        changed_hosts |= kept.add(record) | _claims_over_tls(record, kept)
    if whole:
        kept.plans.forget_unseen()
    made_hosts = _tables(kept, frame, None if whole else changed_hosts, resolver=resolver, owners=owners,
                         secrets=secrets)
    listener_hosts = {listener.hostname for listener in frame.listeners if listener.hostname is not None}
    lost = (previous.lost_listeners if previous is not None and not (whole or tls_changed)
            and made_hosts.isdisjoint(listener_hosts) else _lost_listeners(kept, frame, listener_hosts, owners))
    if tls_changed:
        kept.passthrough = tls_passthrough([(record.tls_plan, record.attachments) for record in kept.tls_routes()
                                            if record.tls_plan is not None and record.attachments],
                                           resolver=resolver, secrets=secrets,
                                           upstream=UpstreamTls(BackendTlsPolicies.of(objects.tls_policies,
                                                                                      objects.config_maps)))
    return GatewayModel(routes=dict(kept.routes), backends=dict(kept.backends.values),
                        profiles=dict(kept.profiles.values), tls_secrets=dict(kept.tls_secrets),
                        problems=kept.problems() + lost + kept.passthrough.problems, passthrough=kept.passthrough,
                        ssl_files=dict(kept.ssl_files.values), resolved=dict(kept.resolved.values),
                        own_ports={listener.own_port: listener.scheme for listener in frame.listeners
                                   if listener.own_port is not None},
                        changed_hosts=None if whole else frozenset(made_hosts), lost_listeners=lost)


def _changed_routes(changed: Collection[str] | None) -> list[RouteKey] | None:
    """The routes among the changed store keys; None when another key changed (a Gateway, a ReferenceGrant...)."""
    if changed is None:
        return None
    keys: list[RouteKey] = []
    for key in changed:
        kind, namespace, name = key.split("/", 2)
        if kind not in ROUTE_KINDS:
            return None
        keys.append((kind, namespace, name))
    return keys


def _claims_over_tls(record: RouteRecord | None, kept: GatewayKept) -> set[str]:
    """A TLSRoute's hosts that routes are tabled for: their entries change with its Gateway's claim on them
    (tables.host_gateways)."""
    if record is None or record.key[0] != "TLSRoute":
        return set()
    return {host for attachment in record.attachments for host in attachment.hosts if kept.routes_of((host,))}


def _routes(objects: GatewayObjects, kind: str) -> dict[tuple[str, str], dict[str, Any]]:
    return {"HTTPRoute": objects.routes, "GRPCRoute": objects.grpc_routes, "TLSRoute": objects.tls_routes}[kind]


def _frame(objects: GatewayObjects, *, settings: Settings, secrets: TlsSecrets) -> Frame:
    grants = ReferenceGrants(objects.grants)
    classes = our_classes(objects.classes, settings.ingress.gateway_controller_name)
    listeners, problems = served_listeners(objects, classes=classes, settings=settings, grants=grants, secrets=secrets)
    our_gateways = frozenset(f"{namespace}/{name}" for (namespace, name), gateway in objects.gateways.items()
                             if (gateway.get("spec") or {}).get("gatewayClassName") in classes)
    # The Gateways' backend client certificates: their problems are the Gateways' (the routes' part is _tables').
    _, tls_problems = upstream_tls(objects, (), our_gateways=our_gateways, grants=grants, secrets=secrets)
    problems += [Problem.error(ref, message) for ref, message in tls_problems]
    return Frame(objects=objects, grants=grants, listeners=listeners, our_gateways=our_gateways, problems=problems)


def _record(key: RouteKey, route: dict[str, Any], *, frame: Frame, kept: GatewayKept,
            objects: GatewayObjects) -> RouteRecord:
    """A route planned (or its plan kept) and attached."""
    kind, namespace, name = key
    order = creation_order(route, namespace=namespace, name=name)
    rank = (ROUTE_KINDS.index(kind), order)
    kept.work.attached += 1
    tls_plan: TlsRoutePlan | None = None
    try:
        if kind == "TLSRoute":
            tls_plan = kept.plans.plan(plan_tls_route, route, kind=kind, namespace=namespace, name=name, order=order,
                                       grants=frame.grants)
            plan, warnings = tls_plan.route, tls_plan.warnings
        else:
            plan = kept.plans.plan(plan_route if kind == "HTTPRoute" else plan_grpc_route, route, kind=kind,
                                   namespace=namespace, name=name, order=order, grants=frame.grants)
            warnings = plan.warnings
    except RouteRejected as err:
        return RouteRecord(key, rank, None, None, [Problem.error(f"{kind} {namespace}/{name}",
                                                                 f"{err}; the route is not served")], [])
    listeners = [listener for listener in frame.listeners if kind in listener.kinds]
    attachments, refusals = attach(plan, listeners=listeners, our_gateways=frame.our_gateways,
                                   labels_of=objects.labels_of)
    where = f"{kind} {namespace}/{name}"
    problems = [Problem.error(where, refusal.message) for refusal in refusals]
    if attachments:
        problems += [Problem.warning(where, warning) for warning in warnings]
    return RouteRecord(key, rank, plan, tls_plan, problems, attachments)


def _tables(kept: GatewayKept, frame: Frame, changed_hosts: set[str] | None, *, resolver: BackendResolver,
            owners: Mapping[str, str], secrets: TlsSecrets) -> set[str]:
    """Make again the entries of the hosts a change reaches (`changed_hosts`: those the changed routes were or are
    tabled for; None: every host), from the routes tabled for them, and what those routes' rules make. Returns the
    hosts made again."""
    reached = None if changed_hosts is None else kept.hosts_reached(changed_hosts)
    if reached is None:
        records, scratch = kept.tabled_routes(), kept.tables  # gateway_tables keeps this build's hosts only
        reached = kept.tabled_hosts() | (changed_hosts or set())  # with those no route is tabled for any more
    else:
        if not reached:
            return set()
        records = kept.routes_of(reached)
        # The routes' other hosts are made too, from only some of their routes: those entries are not kept.
        scratch = TablesKept()
        scratch.hosts = {host: kept.tables.hosts[host] for host in reached if host in kept.tables.hosts}
        scratch.actions = kept.tables.actions
    kept.work.routes_tabled += len(records)
    kept.work.hosts_tabled += len(reached)
    attached: list[tuple[RoutePlan, list[Attachment]]] = [(record.plan, record.attachments) for record in records
                                                   if record.plan is not None]
    backend_tls, _ = upstream_tls(frame.objects, attached, our_gateways=frame.our_gateways, grants=frame.grants,
                                  secrets=secrets)
    # Which Gateway each host of these routes belongs to, from every route tabled for it (these are not all of them
    # when only some hosts are made again).
    hosts = {host for record in records for host in record.hosts}
    claimants = [*(records if changed_hosts is None else kept.routes_of(hosts)), *kept.tls_routes()]
    claimed = host_gateways([(record.plan, record.attachments) for record in claimants if record.plan is not None],
                            hosts, listeners=frame.listeners, ingress_owners=owners,
                            gateway_orders=gateway_orders(frame.objects.gateways))
    made = gateway_tables(attached, listeners=frame.listeners, resolver=resolver, ingress_owners=owners,
                          kept=scratch, upstream_tls=backend_tls, claimed=claimed)
    if scratch is not kept.tables:
        for record in records:
            _forget_actions(kept.tables, record)
        kept.tables.actions.update(scratch.actions)
    for host in reached:
        entry = scratch.hosts.get(host)
        if entry is None:
            kept.tables.hosts.pop(host, None)
        else:
            kept.tables.hosts[host] = entry
        _put(kept.routes, host, made.routes.get(host))
        _put(kept.tls_secrets, host, made.tls_secrets.get(host))
    warnings: dict[str, list[Problem]] = {}
    for ref, message in made.warnings:
        warnings.setdefault(ref, []).append(Problem.warning(ref, message))
    for record in records:
        kept.drop_outputs(record)
        actions = [action for rule in range(len(record.plan.rules) if record.plan else 0)
                   if (action := scratch.actions.get((record.key[0], f"{record.key[1]}/{record.key[2]}", rule)))]
        resolved = {ref: backend for action in actions for ref, backend in action.resolved}
        # Sorted: which host first made an action, so the order of its warnings, depends on the hosts made.
        kept.set_outputs(record, table_problems=sorted(warnings.get(record.ref, ()), key=lambda p: p.message),
                         backends={backend.name: list(backend.endpoints) for backend in resolved.values()
                                   if backend.name is not None and not backend.refused},
                         profiles={name: profile for action in actions for name, profile in action.profiles.items()},
                         ssl_files={name: data for action in actions for name, data in action.ssl_files.items()},
                         resolved=resolved)
    return reached


def _lost_listeners(kept: GatewayKept, frame: Frame, hosts: set[str], owners: Mapping[str, str]) -> list[Problem]:
    """The warnings of the served listeners whose own hostname (`hosts`) a Gateway of another namespace has, in their
    status's words (tables.lost_listeners): they serve nothing, and without routes no route's warning says so. The
    claims on those names are the routes' tabled for them and the TLSRoutes', as _tables weighs them."""
    if not hosts or not claims_weighed(frame.listeners):
        return []
    claimants = [*kept.routes_of(hosts), *kept.tls_routes()]
    claimed = host_gateways([(record.plan, record.attachments) for record in claimants if record.plan is not None],
                            hosts, listeners=frame.listeners, ingress_owners=owners,
                            gateway_orders=gateway_orders(frame.objects.gateways))
    return [Problem.warning(f"Gateway {listener.gateway}", why)
            for listener, why in lost_listeners(frame.listeners, claimed)]


def _forget_actions(tables: TablesKept, record: RouteRecord) -> None:
    if record.plan is not None:
        for rule in range(len(record.plan.rules)):
            tables.actions.pop((record.key[0], f"{record.key[1]}/{record.key[2]}", rule), None)


def _put(table: dict[str, Any], host: str, value: Any) -> None:
    if value is None:
        table.pop(host, None)
    else:
        table[host] = value


def with_gateway_routes(routes: Mapping[str, HostRoutes], gateway: Mapping[str, dict[str, Any]], *,
                        redirect_code: int, no_tls_redirect: tuple[str, ...]) -> dict[str, HostRoutes]:
    """The Ingresses' host routes with each host's Gateway rules added (new HostRoutes: those given are shared
    with the incremental model's groups and never changed)."""
    joined = dict(routes)
    joined.update(joined_entries(gateway.keys(), routes, gateway, redirect_code=redirect_code,  # type: ignore[arg-type]
                                 no_tls_redirect=no_tls_redirect))  # a host of `gateway` always has an entry
    return joined


def joined_entries(hosts: Iterable[str], routes: Mapping[str, HostRoutes], gateway: Mapping[str, dict[str, Any]], *,
                   redirect_code: int, no_tls_redirect: tuple[str, ...]) -> dict[str, HostRoutes | None]:
    """The entries of `hosts` as with_gateway_routes makes them, from the Ingresses' host routes and the Gateway
    rules (None: the host has neither). A caller that keeps the joined table (incremental.py) asks for the hosts
    whose Ingress or Gateway entries changed: at 10,000 routes, laying them all over again took 17-20 ms a change."""
    entries: dict[str, HostRoutes | None] = {}
    for host in hosts:
        existing, table = routes.get(host), gateway.get(host)
        entries[host] = existing if table is None else (
            replace(existing, gateway=table) if existing is not None else
            HostRoutes(gateway=table, redirect_code=redirect_code, no_tls_redirect=no_tls_redirect))
    return entries

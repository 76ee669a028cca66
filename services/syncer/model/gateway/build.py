"""The store's Gateway API objects → what they add to the Model: Gateway rules per host (HTTPRoutes and GRPCRoutes),
passthrough hosts (TLSRoutes), backends, certificates, location profiles (timeouts, gRPC) and problems. Pure: no
I/O, the same store always gives the same result."""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping

from services.common.settings import Settings
from services.nginxconf.config import LocationProfile

from ..backends import BackendResolver
from ..problems import Problem
from ..tls import TlsSecrets
from ..types import HostRoutes
from .attachment import Attachment, attach
from .classes import our_classes
from .fields import RouteRejected
from .grpcroutes import plan_grpc_route
from .httproutes import RoutePlan, plan_route
from .listeners import served_listeners
from .objects import GatewayObjects
from .reference_grants import ReferenceGrants
from .route_plans import RoutePlans
from .tables import TablesKept, gateway_tables
from .tlsroutes import TlsPassthrough, TlsRoutePlan, plan_tls_route, tls_passthrough
from .upstream_tls import upstream_tls


@dataclass
class GatewayModel:
    routes: dict[str, dict[str, Any]] = field(default_factory=dict)  # host → gateway_routes JSON
    backends: dict[str, list[str]] = field(default_factory=dict)
    profiles: dict[str, LocationProfile] = field(default_factory=dict)
    tls_secrets: dict[str, str] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    passthrough: TlsPassthrough = field(default_factory=TlsPassthrough)  # TLSRoutes' hosts, before the Ingresses'
    ssl_files: dict[str, bytes] = field(default_factory=dict)  # the backends' CAs, client certificates (upstream_tls)
    # The ports HTTP and HTTPS listeners have to themselves (listeners.py), with their scheme: nginx listens there.
    own_ports: dict[int, str] = field(default_factory=dict)


def build_gateway(objects: GatewayObjects, *, settings: Settings, resolver: BackendResolver,
                  secrets: TlsSecrets, ingress_owners: Mapping[str, str] | None = None,
                  plans: RoutePlans | None = None, tables_kept: TablesKept | None = None) -> GatewayModel:
    """What the Gateway API objects of the store (GatewayObjects.of) add to the Model. `ingress_owners`: host → the
    namespace whose Ingress owns it (the oldest); routes of other namespaces do not serve that host. `plans`: the
    route plans kept from the last build (route_plans.py), `tables_kept` its actions and host entries (tables.py); none
    kept when not given."""
    plans = RoutePlans() if plans is None else plans
    if not objects.gateways:
        plans.forget_unseen()
        return GatewayModel()
    problems: list[Problem] = []
    grants = ReferenceGrants(objects.grants)
    classes = our_classes(objects.classes, settings.ingress.gateway_controller_name)
    listeners, listener_problems = served_listeners(objects, classes=classes, settings=settings, grants=grants,
                                                    secrets=secrets)
    our_gateways = frozenset(f"{namespace}/{name}" for (namespace, name), gateway in objects.gateways.items()
                             if (gateway.get("spec") or {}).get("gatewayClassName") in classes)
    problems += listener_problems
    attached: list[tuple[RoutePlan, list[Attachment]]] = []
    attached_tls: list[tuple[TlsRoutePlan, list[Attachment]]] = []
    for kind, routes in (("HTTPRoute", objects.routes), ("GRPCRoute", objects.grpc_routes),
                         ("TLSRoute", objects.tls_routes)):
        kind_listeners = [listener for listener in listeners if kind in listener.kinds]
        for order, namespace, name, route in objects.routes_oldest_first(routes):
            where = f"{kind} {namespace}/{name}"
            try:
                if kind == "TLSRoute":
                    tls_plan = plans.plan(plan_tls_route, route, kind=kind, namespace=namespace, name=name,
                                          order=order, grants=grants)
                    plan, warnings = tls_plan.route, tls_plan.warnings
                else:
                    plan = plans.plan(plan_route if kind == "HTTPRoute" else plan_grpc_route, route, kind=kind,
                                      namespace=namespace, name=name, order=order, grants=grants)
                    warnings = plan.warnings
            except RouteRejected as err:
                problems.append(Problem.error(where, f"{err}; the route is not served"))
                continue
            attachments, refusals = attach(plan, listeners=kind_listeners, our_gateways=our_gateways,
                                           labels_of=objects.labels_of)
            problems += [Problem.error(where, refusal.message) for refusal in refusals]
            if attachments:
                problems += [Problem.warning(where, warning) for warning in warnings]
                if kind == "TLSRoute":
                    attached_tls.append((tls_plan, attachments))
                else:
                    attached.append((plan, attachments))
    plans.forget_unseen()
    # Not `ingress_owners or {}`: its truth would count every host the Ingresses own.
    backend_tls, tls_problems = upstream_tls(objects, attached, our_gateways=our_gateways, grants=grants,
                                             secrets=secrets)
    problems += [Problem.error(ref, message) for ref, message in tls_problems]
    tables = gateway_tables(attached, listeners=listeners, resolver=resolver,
                            ingress_owners={} if ingress_owners is None else ingress_owners, kept=tables_kept,
                            upstream_tls=backend_tls)
    problems += [Problem.warning(ref, message) for ref, message in tables.warnings]
    passthrough = tls_passthrough(attached_tls, resolver=resolver, secrets=secrets)
    return GatewayModel(routes=tables.routes, backends=tables.backends, profiles=tables.profiles,
                        tls_secrets=tables.tls_secrets, problems=problems + passthrough.problems,
                        ssl_files=tables.ssl_files,
                        passthrough=passthrough, own_ports={listener.own_port: listener.scheme for listener in listeners
                                                            if listener.own_port is not None})


def with_gateway_routes(routes: Mapping[str, HostRoutes], gateway: Mapping[str, dict[str, Any]], *,
                        redirect_code: int, no_tls_redirect: tuple[str, ...]) -> dict[str, HostRoutes]:
    """The Ingresses' host routes with each host's Gateway rules added (new HostRoutes: those given are shared
    with the incremental model's groups and never changed)."""
    joined = dict(routes)
    for host, table in gateway.items():
        existing = joined.get(host)
        joined[host] = (replace(existing, gateway=table) if existing is not None else
                        HostRoutes(gateway=table, redirect_code=redirect_code, no_tls_redirect=no_tls_redirect))
    return joined

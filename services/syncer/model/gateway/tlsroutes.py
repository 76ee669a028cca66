"""TLSRoutes: host names passed through by SNI, untouched, to a Service, by the passthrough proxy.

A TLSRoute attaches like an HTTPRoute (attachment.py: parentRefs, allowedRoutes, hostname intersection) to a
listener of protocol TLS in Passthrough mode (listeners.py; they need --enable-ssl-passthrough). Each host name of
the intersection goes into the passthrough table the proxy processes read (SNI host → endpoints), beside the hosts
of Ingresses with ssl-passthrough. What that table cannot carry is said, not approximated:

- it is looked up by exact SNI name: a wildcard host name is not served (warned);
- it holds one list of endpoints per host, tried round robin: the first backendRef with a weight above 0 is served,
  and the other backendRefs of the route are not (warned);
- a host has one owner: the oldest TLSRoute (then "namespace/name"); an Ingress that names the host (by HTTP
  routing or ssl-passthrough) and a host an HTTPS listener's routes serve come first (passthrough_beside).

A backendRef that cannot be resolved (another kind, another namespace without a ReferenceGrant, a Service without
the port) leaves the host with no endpoints: the proxy closes its connections, as the spec asks of a route without
a usable backend.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Collection, Iterable

from ..backends import BackendResolver
from ..problems import Problem
from ..types import CATCH_ALL_HOST
from . import fields
from .attachment import Attachment
from .httproutes import BackendChoice, RoutePlan, _backend, parents_and_hostnames
from .reference_grants import ReferenceGrants

TLS_ROUTE = "TLSRoute"


@dataclass(frozen=True)
class TlsRoutePlan:
    route: RoutePlan  # what attaches it: parents and hostnames (no HTTP rules)
    backend: BackendChoice | None  # the one served: the first with a weight above 0
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class PassthroughHost:
    endpoints: list[str]  # "ip:port"; empty: the proxy closes the host's connections
    owner: str  # "TLSRoute namespace/name"


@dataclass
class TlsPassthrough:
    hosts: dict[str, PassthroughHost] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)


def plan_tls_route(route: dict[str, Any], *, namespace: str, name: str, order: tuple[datetime, str],
                   grants: ReferenceGrants) -> TlsRoutePlan:
    """Validate a TLSRoute (v1alpha2 or v1: the same fields); raise RouteRejected saying what to change."""
    spec = fields.mapping(route.get("spec"), where="spec")
    parents, hostnames = parents_and_hostnames(spec, namespace=namespace)
    warnings: list[str] = []
    choices: list[BackendChoice] = []
    for i, rule in enumerate(fields.listing(spec.get("rules"), where="spec.rules")):
        refs = fields.listing(fields.mapping(rule, where=f"spec.rules[{i}]").get("backendRefs"),
                              where=f"spec.rules[{i}].backendRefs")
        choices += [_backend(fields.mapping(ref, where=f"spec.rules[{i}].backendRefs[{j}]"), namespace=namespace,
                             where=f"spec.rules[{i}].backendRefs[{j}]", grants=grants, warnings=warnings,
                             kind=TLS_ROUTE) for j, ref in enumerate(refs)]
    weighted = [choice for choice in choices if choice.weight > 0]
    if len(weighted) > 1:
        warnings.append(f"{len(weighted)} backendRefs have a weight: the passthrough proxy sends a host's connections "
                        "to one Service, the first of them; the others get none")
    plan = RoutePlan(ref=f"{namespace}/{name}", namespace=namespace, order=order, parents=parents,
                     hostnames=hostnames, rules=(), kind=TLS_ROUTE)
    return TlsRoutePlan(route=plan, backend=weighted[0] if weighted else None, warnings=tuple(warnings))


def tls_passthrough(attached: Iterable[tuple[TlsRoutePlan, list[Attachment]]], *,
                    resolver: BackendResolver) -> TlsPassthrough:
    """The passthrough hosts of the attached TLSRoutes, oldest route first (`attached` is in that order)."""
    found = TlsPassthrough()
    for plan, attachments in attached:
        where = f"{TLS_ROUTE} {plan.route.ref}"
        endpoints = _endpoints(plan, resolver=resolver, found=found)
        for host in dict.fromkeys(host for attachment in attachments for host in attachment.hosts):
            if host == CATCH_ALL_HOST:
                found.problems.append(Problem.warning(where, "a TLSRoute needs a host name (its own or its "
                                                             "listener's) to match the TLS SNI; not served"))
            elif host.startswith("*."):
                found.problems.append(Problem.warning(where, f"wildcard host {host} is not served: the passthrough "
                                                             "proxy matches exact SNI names; list the names"))
            elif host in found.hosts:
                found.problems.append(Problem.warning(where, f"host {host} is already passed through for "
                                                             f"{found.hosts[host].owner}, an older route; not "
                                                             "served here"))
            else:
                found.hosts[host] = PassthroughHost(endpoints, where)
    return found


def _endpoints(plan: TlsRoutePlan, *, resolver: BackendResolver, found: TlsPassthrough) -> list[str]:
    where = f"{TLS_ROUTE} {plan.route.ref}"
    choice = plan.backend
    if choice is None:
        found.problems.append(Problem.warning(where, "no backendRef with a weight above 0: its connections are "
                                                     "closed"))
        return []
    if choice.service is None:
        return []  # the reason is among the plan's warnings
    resolved = resolver.resolve(choice.service)
    if resolved.name is None or resolved.refused:
        found.problems.append(Problem.warning(where, f"{resolved.problem}; its connections are closed (reason "
                                                     "BackendNotFound)"))
        return []
    return list(resolved.endpoints)


def passthrough_beside(routes: TlsPassthrough, *, ingress_hosts: Collection[str],
                       https_hosts: Collection[str]) -> tuple[dict[str, list[str]], list[Problem]]:
    """The TLSRoutes' passthrough hosts that no Ingress names and no HTTPS listener's route serves: those come
    first, so that a TLSRoute never takes the TLS traffic of a host that is already served."""
    table: dict[str, list[str]] = {}
    problems: list[Problem] = []
    for host, entry in routes.hosts.items():
        if host in ingress_hosts:
            problems.append(Problem.warning(entry.owner, f"host {host} is served by an Ingress, which comes first; "
                                                         "not passed through"))
        elif host in https_hosts:
            problems.append(Problem.warning(entry.owner, f"host {host} is served by an HTTPS listener's routes, "
                                                         "which come first; not passed through"))
        else:
            table[host] = entry.endpoints
    return table, problems


"""TLSRoutes: host names routed by SNI by the passthrough proxy, passed through untouched or with TLS ended there.

A TLSRoute attaches like an HTTPRoute (attachment.py: parentRefs, allowedRoutes, hostname intersection) to a
listener of protocol TLS (listeners.py; they need --enable-ssl-passthrough, which starts the proxy). Each host name
of the intersection, exact or wildcard, goes into the passthrough table the proxy processes read (services/proxy/
table.py says its format), beside the hosts of Ingresses with ssl-passthrough:

- the route's backendRefs with a weight above 0 share its connections by weight, each connection to one of them;
- on a listener in Passthrough mode the connection is passed through untouched; in Terminate mode the proxy ends
  TLS with the listener's certificate and sends the plain stream to the backend, over TLS again when the backend's
  Service has a BackendTLSPolicy (upstream_tls.py decides which applies, as for HTTPRoutes): the table carries the
  policy's CA certificates (or none: the system's) and host name, and the proxy verifies the backend's certificate
  for that name; a backend whose policy is refused gets no connections (its share is closed). A Passthrough
  listener's policies have no part: the client's TLS goes through to the backend untouched;
- a host has one owner: the oldest TLSRoute (then "namespace/name"); an Ingress that names the host (by HTTP
  routing or ssl-passthrough) and a host an HTTPS listener's routes serve come first (passthrough_beside), also
  when a route's wildcard covers them: the table then sends them to nginx by name.

A backendRef that cannot be resolved (another kind, another namespace without a ReferenceGrant, a Service without
the port) keeps its share of connections and has no endpoints: the proxy closes them, as the spec asks of a route
without a usable backend (its share only, as for an HTTPRoute's 500s).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Collection, Iterable

from ..backends import BackendResolver
from ..problems import Problem
from ..tls import TlsSecrets
from ..types import CATCH_ALL_HOST
from . import fields
from .attachment import Attachment
from .httproutes import BackendChoice, RoutePlan, _backend, parents_and_hostnames
from .reference_grants import ReferenceGrants
from .upstream_tls import UpstreamTls, policy_refusal

TLS_ROUTE = "TLSRoute"


@dataclass(frozen=True)
class TlsRoutePlan:
    route: RoutePlan  # what attaches it: parents and hostnames (no HTTP rules)
    backends: tuple[BackendChoice, ...]  # those with a weight above 0
    warnings: tuple[str, ...] = ()


# A host's value in the passthrough table (services/proxy/table.py): ["ip:port", ...], or a map of weighted backends
# and the certificate TLS ends with.
TableEntry = list[str] | dict[str, Any]
TO_NGINX = "nginx"  # a host's value: to nginx, whatever wildcard covers it (services/proxy/table.py)


@dataclass(frozen=True)
class PassthroughHost:
    entry: TableEntry
    owner: str  # "TLSRoute namespace/name"


@dataclass(frozen=True)
class _Backend:
    weight: int
    endpoints: list[str]
    tls: dict[str, Any] | None = None  # behind a Terminate listener: TLS to it, as the table says (its policy)


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
    plan = RoutePlan(ref=f"{namespace}/{name}", namespace=namespace, order=order, parents=parents,
                     hostnames=hostnames, rules=(), kind=TLS_ROUTE)
    return TlsRoutePlan(route=plan, backends=tuple(choice for choice in choices if choice.weight > 0),
                        warnings=tuple(warnings))


def tls_passthrough(attached: Iterable[tuple[TlsRoutePlan, list[Attachment]]], *,
                    resolver: BackendResolver, secrets: TlsSecrets, upstream: UpstreamTls) -> TlsPassthrough:
    """The passthrough hosts of the attached TLSRoutes, oldest route first (`attached` is in that order)."""
    found = TlsPassthrough()
    for plan, attachments in attached:
        where = f"{TLS_ROUTE} {plan.route.ref}"
        terminated = any(attachment.listener.certificate is not None for attachment in attachments)
        backends = _backends(plan, resolver=resolver, found=found, upstream=upstream if terminated else None)
        for attachment in attachments:
            certificate = attachment.listener.certificate  # a Terminate listener's; None: Passthrough
            entry: TableEntry
            if certificate is None and len(backends) == 1:
                entry = list(backends[0].endpoints)
            elif certificate is None:
                entry = {"backends": [{"weight": b.weight, "endpoints": b.endpoints} for b in backends]}
            else:
                entry = {"backends": [{"weight": b.weight, "endpoints": b.endpoints,
                                       **({"tls": b.tls} if b.tls is not None else {})} for b in backends],
                         "terminate": secrets.pems(certificate)}
            for host in attachment.hosts:
                if host == CATCH_ALL_HOST:
                    found.problems.append(Problem.warning(where, "a TLSRoute needs a host name (its own or its "
                                                                 "listener's) to match the TLS SNI; not served"))
                elif host in found.hosts:
                    if found.hosts[host].owner != where:
                        found.problems.append(Problem.warning(where, f"host {host} is already passed through for "
                                                                     f"{found.hosts[host].owner}, an older route; not "
                                                                     "served here"))
                else:
                    found.hosts[host] = PassthroughHost(entry, where)
    return found


def _backends(plan: TlsRoutePlan, *, resolver: BackendResolver, found: TlsPassthrough,
              upstream: UpstreamTls | None) -> list[_Backend]:
    """Each backendRef with a weight; one without endpoints when none has a weight. With `upstream` (the route is
    attached to a Terminate listener), each backend's TLS from its BackendTLSPolicy."""
    where = f"{TLS_ROUTE} {plan.route.ref}"
    if not plan.backends:
        found.problems.append(Problem.warning(where, "no backendRef with a weight above 0: its connections are "
                                                     "closed"))
        return [_Backend(1, [])]
    backends = []
    for choice in plan.backends:
        endpoints: list[str] = []
        tls = None
        if choice.service is not None:  # else the reason is among the plan's warnings
            resolved = resolver.resolve(choice.service)
            policy = upstream.policy(choice.service, resolved) if upstream is not None else None
            if resolved.name is None or resolved.refused:
                found.problems.append(Problem.warning(where, f"{resolved.problem}; its share of connections is "
                                                             "closed (reason BackendNotFound)"))
            elif policy is not None and policy.tls is None:
                found.problems.append(Problem.warning(where, f"{policy_refusal(choice.service, policy)}; its share "
                                                             "of terminated connections is closed"))
            else:
                endpoints = list(resolved.endpoints)
                if policy is not None and policy.tls is not None:
                    tls = {"ca": policy.ca_pem.decode() if policy.tls.ca_file is not None else None,
                           "name": policy.tls.name}
        backends.append(_Backend(choice.weight, endpoints, tls))
    return backends


def passthrough_beside(routes: TlsPassthrough, *, ingress_hosts: Collection[str],
                       https_hosts: Collection[str]) -> tuple[dict[str, TableEntry | str], list[Problem]]:
    """The TLSRoutes' passthrough hosts that no Ingress names and no HTTPS listener's route serves: those come
    first, so that a TLSRoute never takes the TLS traffic of a host that is already served. The hosts those serve
    under a route's wildcard go to nginx by name (TO_NGINX)."""
    table: dict[str, TableEntry | str] = {}
    problems: list[Problem] = []
    for host, entry in routes.hosts.items():
        if host in ingress_hosts:
            problems.append(Problem.warning(entry.owner, f"host {host} is served by an Ingress, which comes first; "
                                                         "not passed through"))
        elif host in https_hosts:
            problems.append(Problem.warning(entry.owner, f"host {host} is served by an HTTPS listener's routes, "
                                                         "which come first; not passed through"))
        else:
            table[host] = entry.entry
    suffixes = tuple(host[1:] for host in table if host.startswith("*."))
    if suffixes:
        for host in (*ingress_hosts, *https_hosts):
            if host not in table and host.endswith(suffixes):
                table[host] = TO_NGINX
    return table, problems


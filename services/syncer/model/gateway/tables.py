"""Attached HTTPRoutes → each host's Gateway rules, in the spec's precedence, as gateway.lua reads them.

A host's entry holds layers, tried in order: the rules of routes for that very host, then of wildcard hosts that
cover it (longest first), then of routes for any host; a request goes to the first rule that matches in the first
layer that has one. Within a layer, the candidates for a path are tried in the spec's order — an Exact path, then
RegularExpression paths, then the longest PathPrefix — and for each path its matches ordered by method match,
then most header matches, then most query parameter matches, then the oldest route (then "namespace/name"), then
rule and match order; when none of a path's matches holds, the next candidate path is tried.

A rule reaches a host only from the listener that serves that host: of the listeners of one protocol on one port (the
controller's, or a port of their own), the one whose hostname matches the host most precisely (its own name, then a
wildcard, then none), as the spec sends a request to the most specific listener. A match of a listener on a port of
its own carries that port, and gateway.lua takes it only for a request that came on it.

Gateways of different namespaces share the controller's addresses, so a host name on a port belongs to one of them:
the Gateway of the oldest claim on it (host_gateways): a listener whose hostname takes it, as old as its Gateway, or a
route naming it through a listener without one, as old as the route. The listeners of Gateways of other namespaces
do not serve it, however precisely their hostname matches it (a tenant's newer Gateway cannot take a host from an
older one of another namespace, nor a tenant's route on a shared Gateway one that another namespace's listener names),
and their routes naming it are warned. Over TLS "there" is every port:
a host has one certificate, whatever the port, and its TLSRoute (TLS listeners) or its HTTPS routes take its SNI.

TablesKept keeps each rule's action and each host's entry from one build to the next: an action is made again only
when its route's plan is another object (route_plans.py keeps unchanged ones) or a Service it resolved resolves
otherwise, a host's entry only when its candidate rules or their actions changed (at 10,000 HTTPRoutes making every
host's entry again took 0.9 s of each build).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Collection, Iterable, Mapping

from services.nginxconf import table_schema
from services.nginxconf.config import DEFAULT_PROFILE, LocationProfile

from ..backends import BackendResolver, ResolvedBackend, ServiceRef
from ..creation import creation_order
from ..types import CATCH_ALL_HOST
from .attachment import Attachment
from .backend_protocols import rule_scheme
from .budgets import RequestBudget, profile_directives
from .cors import cors_json
from .httproutes import Action, HeaderChanges, Match, Redirect, RoutePlan
from .client_validation import host_validation
from .listeners import Listener
from .mirrors import mirror_locations
from .reasons import Reason
from .upstream_tls import RuleTls, UpstreamTls


# ResponseHeaderModifier: the rules that change response headers use a location profile whose header filter does it
# (the first such rule reloads nginx once for the new profile; the header changes themselves are table data).
RESPONSE_HEADERS = ("header_filter_by_lua", 'require("pyngress.gateway").response_headers()')


@dataclass
class GatewayTables:
    routes: dict[str, dict[str, Any]] = field(default_factory=dict)  # host → gateway_routes JSON
    backends: dict[str, list[str]] = field(default_factory=dict)
    profiles: dict[str, LocationProfile] = field(default_factory=dict)
    tls_secrets: dict[str, str] = field(default_factory=dict)  # host → "namespace/name" of its listener's Secret
    warnings: list[tuple[str, str]] = field(default_factory=list)  # ("HTTPRoute namespace/name", message)
    ssl_files: dict[str, bytes] = field(default_factory=dict)  # the backends' CAs and client certificates (upstream_tls)


@dataclass(frozen=True)
class _Candidate:
    listener: Listener
    plan: RoutePlan
    rule: int
    index: int  # of the match in its rule
    match: Match

    def precedence(self) -> tuple[Any, ...]:
        m = self.match
        return (m.method is None, -len(m.headers), -len(m.query), self.plan.order, self.rule, self.index)


def specificity(listener_host: str | None, host: str) -> int:
    """How precisely a listener's hostname takes `host`: 2 its own name, 1 a wildcard, 0 any host, -1 not at all."""
    if listener_host is None:
        return 0
    if listener_host == host:
        return 2
    if listener_host.startswith("*.") and host != CATCH_ALL_HOST and host.endswith(listener_host[1:]):
        return 1
    return -1


@dataclass
class _Action:
    """A rule's action JSON and what making it added beside it, replayed when it is kept."""
    plan: RoutePlan
    rule: int
    json: dict[str, Any]
    resolved: list[tuple[ServiceRef, ResolvedBackend]] = field(default_factory=list)  # its backends, its mirrors
    warnings: list[tuple[str, str]] = field(default_factory=list)
    profiles: dict[str, LocationProfile] = field(default_factory=dict)
    tls: tuple[Any, ...] = ()  # UpstreamTls.signature when it was made
    ssl_files: dict[str, bytes] = field(default_factory=dict)


@dataclass
class _Host:
    candidates: tuple[tuple[_Candidate, ...], ...]  # each layer's
    actions: tuple[_Action, ...]  # in the order the entry made them
    json: dict[str, Any] | None
    https_listeners: tuple[str, ...] = ()  # https_listener_names() when it was made


class TablesKept:
    """The actions and host entries of the last build (see the module's docstring)."""

    def __init__(self) -> None:
        self.actions: dict[tuple[str, str, int], _Action] = {}
        self.hosts: dict[str, _Host] = {}


HostPort = tuple[str, tuple[str, int | None]]  # a host name on a listener's port (_claim_port)
Order = tuple[datetime, str]  # creation.py's


def host_gateways(attached: Iterable[tuple[RoutePlan, list[Attachment]]], hosts: Collection[str], *,
                  listeners: list[Listener], gateway_orders: Mapping[str, Order],
                  ingress_owners: Mapping[str, str]) -> dict[HostPort, str]:
    """Of `hosts` (not "_"), each on each port: the Gateway ("namespace/name") it belongs to, that of the oldest claim
    on it there. A listener whose hostname takes the host claims it as old as its Gateway (`gateway_orders`:
    creation.py's); a route tabled for that very name claims it for the Gateway of its listener as old as the younger
    of the two (what counts through a listener without hostname). `attached`: every route tabled for those hosts, and
    the TLSRoutes attached with them; a route the host's Ingress owner keeps out does not claim it."""
    if not claims_weighed(listeners):
        return {}
    found: dict[HostPort, tuple[Order, str]] = {}

    def claim(host: str, listener: Listener, order: Order) -> None:
        key = (host, _claim_port(listener))
        if key not in found or (order, listener.gateway) < found[key]:
            found[key] = (order, listener.gateway)
    named: dict[str, list[Listener]] = {}  # a hostname → the listeners with it
    for listener in listeners:
        if listener.hostname is not None:
            named.setdefault(listener.hostname, []).append(listener)
    for host in hosts:
        if host == CATCH_ALL_HOST:
            continue
        labels = host.split(".")
        for name in {host, *(f"*.{'.'.join(labels[i:])}" for i in range(1, len(labels)))}:  # its name, its wildcards
            for listener in named.get(name, ()):
                if specificity(listener.hostname, host) > 0:
                    claim(host, listener, gateway_orders[listener.gateway])
    for plan, attachments in attached:
        for attachment in attachments:
            for host in attachment.hosts:
                owner = ingress_owners.get(host)
                if host != CATCH_ALL_HOST and host in hosts and (owner is None or owner == plan.namespace):
                    claim(host, attachment.listener, max(plan.order, gateway_orders[attachment.listener.gateway]))
    return {key: gateway for key, (_, gateway) in found.items()}


def claims_weighed(listeners: Iterable[Listener]) -> bool:
    """Whether host_gateways has claims to weigh: with one namespace's Gateways the most specific listener decides
    alone (and no pass over the hosts)."""
    return len({listener.gateway_namespace for listener in listeners}) > 1


def gateway_orders(gateways: Mapping[tuple[str, str], Mapping[str, Any]]) -> dict[str, Order]:
    """Each Gateway's ("namespace/name") age, as host_gateways weighs its claims."""
    return {f"{namespace}/{name}": creation_order(gateway, namespace=namespace, name=name)
            for (namespace, name), gateway in gateways.items()}


def host_owner(claimed: Mapping[HostPort, str], host: str, listener: Listener) -> str | None:
    """The Gateway ("namespace/name") of another namespace that `host` belongs to where `listener` would serve it
    (host_gateways); None when the listener may serve it."""
    gateway = claimed.get((host, _claim_port(listener)))
    return None if gateway is None or gateway.partition("/")[0] == listener.gateway_namespace else gateway


def lost_host(host: str, listener: Listener, owner: str) -> str:
    """Why `listener` does not serve `host` (host_owner gave `owner`), and what to change: the log's, the problems'
    and the route's status's words."""
    return (f"host {host} on port {listener.port} belongs to Gateway {owner}, which claimed it first there; "
            f"{listener.where}, of another namespace, does not serve it: use another host name, or ask namespace "
            f"{owner.partition('/')[0]} to give it up")


def lost_listeners(listeners: Iterable[Listener], claimed: Mapping[HostPort, str]) -> list[tuple[Listener, str]]:
    """The `listeners` whose own hostname a Gateway of another namespace has (host_owner), with why: they serve
    nothing. The words of their status (Conflicted, HostnameConflict) and of their problem."""
    return [(listener, f"listener {listener.name}: {lost_host(listener.hostname, listener, owner)} (reason "
                       f"{Reason.HOSTNAME_CONFLICT})") for listener in listeners if listener.hostname is not None
            and (owner := host_owner(claimed, listener.hostname, listener)) is not None]


def ingress_lost_host(host: str, owner: str) -> str:
    """Why a route of another namespace than `owner` (whose Ingress owns `host`: the model's ingress_owners) does not
    serve `host`, and what to change: the log's, the problems' and the route's status's words."""
    return (f"host {host} belongs to namespace {owner}, whose Ingress names it; this route, of another namespace, does "
            f"not serve it: use another host name, or ask namespace {owner} to give it up")


def _claim_port(listener: Listener) -> tuple[str, int | None]:
    """Where a listener's routes claim their hosts: its port; every port over TLS (one certificate a host)."""
    return ("tls", None) if listener.scheme in ("https", "tls") else listener.port_key


def _serves(claimed: Mapping[HostPort, str], host: str, listener: Listener) -> bool:
    """Whether `listener` may serve `host`: no Gateway of another namespace has the host on its port."""
    return host_owner(claimed, host, listener) is None


def gateway_tables(attached: Iterable[tuple[RoutePlan, list[Attachment]]], *, listeners: list[Listener],
                   resolver: BackendResolver, ingress_owners: Mapping[str, str],
                   kept: TablesKept | None = None, upstream_tls: UpstreamTls | None = None,
                   claimed: Mapping[HostPort, str] | None = None) -> GatewayTables:
    """`ingress_owners`: host → the namespace whose Ingress owns it; only that namespace's routes serve the host (as
    an Ingress of another namespace cannot take its certificate or redirects, a route cannot take its paths). `kept`:
    the last build's actions and host entries, updated to this build's. `upstream_tls`: the BackendTLSPolicies and the
    routes' backend client certificates. `claimed`: the Gateway each host of `attached` belongs to on each port
    (host_gateways, from every route tabled for it); none: any Gateway's listener serves any host."""
    claimed = {} if claimed is None else claimed
    kept = TablesKept() if kept is None else kept
    tables = GatewayTables()
    by_host: dict[str, list[_Candidate]] = {}
    for plan, attachments in attached:
        for attachment in attachments:
            for host in attachment.hosts:
                owner = ingress_owners.get(host)
                if owner is not None and owner != plan.namespace and host != CATCH_ALL_HOST:
                    tables.warnings.append((f"{plan.kind} {plan.ref}", ingress_lost_host(host, owner)))
                    continue
                if (claimant := host_owner(claimed, host, attachment.listener)) is not None:
                    tables.warnings.append((f"{plan.kind} {plan.ref}", lost_host(host, attachment.listener, claimant)))
                    continue
                if attachment.listener.certificate and host != CATCH_ALL_HOST:
                    tables.tls_secrets.setdefault(host, attachment.listener.certificate)
                by_host.setdefault(host, []).extend(
                    _Candidate(attachment.listener, plan, r, i, match)
                    for r, rule in enumerate(plan.rules) for i, match in enumerate(rule.matches))
    actions = _Actions(tables, resolver, kept.actions, UpstreamTls() if upstream_tls is None else upstream_tls)
    hosts: dict[str, _Host] = {}
    wildcards = sorted((h for h in by_host if h.startswith("*.")), key=lambda h: (-len(h), h))
    https_listeners = https_listener_names(listeners)
    for host in sorted(by_host):
        layer_hosts = [host]
        if host != CATCH_ALL_HOST:
            layer_hosts += [w for w in wildcards if w != host and host.endswith(w[1:])]
            if CATCH_ALL_HOST in by_host:
                layer_hosts.append(CATCH_ALL_HOST)
        best: dict[tuple[str, int | None], int] = {}
        for listener in listeners:
            if _serves(claimed, host, listener):
                best[listener.port_key] = max(best.get(listener.port_key, -1), specificity(listener.hostname, host))
        owner = ingress_owners.get(host) if host != CATCH_ALL_HOST else None
        # A wildcard's or any host's routes of another namespace do not serve an owned host either.
        candidates = tuple(found for layer_host in layer_hosts if (found := tuple(
            c for c in by_host[layer_host] if _serves(claimed, host, c.listener)
            and specificity(c.listener.hostname, host) == best[c.listener.port_key]
            and (owner is None or c.plan.namespace == owner))))
        entry = kept.hosts.get(host)
        # The same candidates (the same plans: equal tuples compare their members by identity first) and, made again
        # or kept in the same order, the same actions: the same entry.
        if (entry is None or entry.candidates != candidates or entry.https_listeners != https_listeners
                or any(actions.action(action.plan, action.rule) is not action for action in entry.actions)):
            entry = _host_entry(candidates, actions, https_listeners)
        hosts[host] = entry
        if entry.json is not None:
            tables.routes[host] = entry.json
    kept.hosts, kept.actions = hosts, actions.made
    return tables


def https_listener_names(listeners: Iterable[Listener]) -> tuple[str, ...]:
    """The hostnames of the HTTPS listeners on the controller's HTTPS port ("" for one without), when there are several:
    gateway.lua answers 421 to a request whose Host one of them takes and its SNI another (misdirected)."""
    names = sorted({listener.hostname or "" for listener in listeners
                    if listener.scheme == "https" and listener.own_port is None})
    return tuple(names) if len(names) > 1 else ()


def _host_entry(candidates: tuple[tuple[_Candidate, ...], ...], actions: _Actions,
                https_listeners: tuple[str, ...] = ()) -> _Host:
    host_actions: dict[tuple[str, str, int], int] = {}
    action_list: list[dict[str, Any]] = []
    made: list[_Action] = []
    layers = [_layer(list(found), host_actions, action_list, actions, made) for found in candidates]
    client_auth = host_validation([c.listener.client_validation for found in candidates for c in found
                                   if c.listener.scheme == "https"])
    return _Host(candidates=candidates, actions=tuple(made), https_listeners=https_listeners,
                 json=table_schema.GATEWAY_ROUTES.serialise(
                     layers=layers, actions=action_list, https_listeners=https_listeners,
                     client_auth=client_auth.to_json() if client_auth else None) if layers else None)


def _layer(candidates: list[_Candidate], host_actions: dict[tuple[str, str, int], int],
           action_list: list[dict[str, Any]], actions: _Actions, made: list[_Action]) -> dict[str, Any]:
    by_path: dict[tuple[str, str], list[_Candidate]] = {}
    for candidate in candidates:
        by_path.setdefault((candidate.match.path_kind, candidate.match.path), []).append(candidate)
    exact: dict[str, Any] = {}
    prefix: list[Any] = []
    regex: list[Any] = []
    for (kind, path), found in sorted(by_path.items(), key=lambda item: (-len(item[0][1]), item[0])):
        found.sort(key=_Candidate.precedence)
        matches: list[dict[str, Any]] = []
        for i, candidate in enumerate(found):
            key = (candidate.plan.kind, candidate.plan.ref, candidate.rule)
            if key not in host_actions:
                made.append(actions.action(candidate.plan, candidate.rule))
                action_list.append(made[-1].json)
                host_actions[key] = len(action_list)
            # On a port of its own the port says it all; on the controller's ports the scheme tells HTTP from HTTPS.
            port = candidate.listener.own_port
            scheme: str | None = candidate.listener.scheme if port is None else None
            twin = (found[i - 1] if i else None)
            if (twin is not None and twin.listener.own_port == port
                    and (twin.plan.kind, twin.plan.ref, twin.rule, twin.index) == key + (candidate.index,)):
                if twin.listener.scheme != candidate.listener.scheme:
                    matches[-1].pop("scheme", None)  # the same match on the HTTP and the HTTPS listener
                continue
            matches.append(_match_json(candidate.match, host_actions[key], scheme, port))
        if kind == "exact":
            exact[path] = matches
        elif kind == "prefix":
            prefix.append((path, matches))
        else:
            regex.append((path, matches))
    return table_schema.GATEWAY_LAYER.serialise(exact=exact, prefix=tuple(prefix), regex=tuple(regex))


def _match_json(match: Match, action: int, scheme: str | None, port: int | None) -> dict[str, Any]:
    def values(items: Iterable[Any]) -> tuple[dict[str, Any], ...]:
        return tuple(table_schema.GATEWAY_VALUE_MATCH.serialise(name=v.name, value=v.value, regex=v.regex)
                     for v in items)
    return table_schema.GATEWAY_MATCH.serialise(action=action, scheme=scheme, port=port, method=match.method,
                                                headers=values(match.headers), query=values(match.query))


class _Actions:
    """Each rule's action, made once whatever the number of hosts that use it, or kept from the last build (then
    what making it added beside it is added again)."""

    def __init__(self, tables: GatewayTables, resolver: BackendResolver,
                 previous: dict[tuple[str, str, int], _Action], upstream_tls: UpstreamTls) -> None:
        self._tables, self._resolver, self._previous = tables, resolver, previous
        self._upstream_tls = upstream_tls
        self.made: dict[tuple[str, str, int], _Action] = {}

    def action(self, plan: RoutePlan, rule: int) -> _Action:
        key = (plan.kind, plan.ref, rule)
        made = self.made.get(key)
        if made is None:
            made = self._previous.get(key)
            if (made is None or made.plan is not plan or not self._resolved_alike(made)
                    or made.tls != self._upstream_tls.signature(f"{plan.kind} {plan.ref}", made.resolved)):
                made = _Action(plan=plan, rule=rule, json={})
                made.json = self._action(made, plan.rules[rule].action)
            self.made[key] = made
            self._tables.warnings += made.warnings
            self._tables.backends.update((resolved.name, list(resolved.endpoints)) for _, resolved in made.resolved
                                         if resolved.name is not None and not resolved.refused)
            self._tables.profiles.update(made.profiles)
            self._tables.ssl_files.update(made.ssl_files)
        return made

    def _resolved_alike(self, made: _Action) -> bool:
        """Whether the Services of a kept action resolve as they did but for their endpoints (not in its JSON); then
        its endpoints are the new ones."""
        fresh = [(ref, self._resolver.resolve(ref)) for ref, _ in made.resolved]
        if any(now != was and replace(now, endpoints=()) != replace(was, endpoints=())
               for (_, now), (_, was) in zip(fresh, made.resolved)):
            return False
        made.resolved = fresh
        return True

    def _resolve(self, made: _Action, ref: ServiceRef) -> ResolvedBackend:
        resolved = self._resolver.resolve(ref)
        made.resolved.append((ref, resolved))
        return resolved

    def _action(self, made: _Action, action: Action) -> dict[str, Any]:
        plan, rule = made.plan, made.rule
        backends = []
        app_protocols = []
        rule_tls = RuleTls(self._upstream_tls, f"{plan.kind} {plan.ref}")
        if action.error is None and action.redirect is None:
            for choice in action.backends:
                name = None
                if choice.service is not None:
                    resolved = self._resolve(made, choice.service)
                    if resolved.name is None or resolved.refused:
                        made.warnings.append((f"{plan.kind} {plan.ref}", f"spec.rules[{rule}]: "
                                              f"{resolved.problem}; its share of requests answers 500 "
                                              "(reason BackendNotFound)"))
                    elif refusal := rule_tls.add(choice.service, resolved):
                        made.warnings.append((f"{plan.kind} {plan.ref}", f"spec.rules[{rule}]: {refusal}"))
                    else:
                        name = resolved.name
                        app_protocols.append(resolved.app_protocol)
                if choice.filters is not None and choice.filters.error is not None:
                    name = None  # an unsupported filter on the backendRef (warned by the plan)
                backends.append(table_schema.GATEWAY_BACKEND.serialise(
                    backend=name, weight=choice.weight, service=choice.service.service if choice.service else None,
                    filters=_backend_filters(choice.filters)))
        mirrors = self._mirrors(made, action) if action.error is None and action.redirect is None else ()
        profile = DEFAULT_PROFILE
        directives = list(mirror_locations(len(mirrors)))
        if action.response_headers is not None or action.cors is not None or any(
                choice.filters is not None and choice.filters.response_headers is not None
                for choice in action.backends):
            directives.append(RESPONSE_HEADERS)
        scheme = action.backend_scheme
        if scheme == "http":  # an HTTPRoute's rule: as its backends' ports say (a GRPCRoute's speaks gRPC)
            scheme, mixed = rule_scheme(app_protocols, where=f"spec.rules[{rule}]")
            if mixed:
                made.warnings.append((f"{plan.kind} {plan.ref}", mixed))
        if action.budget is not None:
            directives += profile_directives(action.budget, scheme)
        tls_settings = rule_tls.profile_settings(scheme)
        made.tls, made.ssl_files = self._upstream_tls.signature(f"{plan.kind} {plan.ref}", made.resolved), rule_tls.files
        if directives or scheme != "http" or tls_settings:
            # A rule with `retry` (its profile retries): connection errors after the last attempt answer 503.
            retried = action.budget is not None and action.budget.retry
            profile_made = LocationProfile.of(directives=tuple(sorted(directives)), **{
                "backend_scheme": scheme, "unreachable_answers_503": retried, **tls_settings})
            made.profiles[profile_made.name] = profile_made
            profile = profile_made.name
        matches = plan.rules[rule].matches
        return table_schema.GATEWAY_ACTION.serialise(
            route=plan.ref, path=matches[0].path, profile=profile, backends=tuple(backends), mirrors=mirrors,
            cors=cors_json(action.cors) if action.cors else None, budget=_budget(action.budget), **_filters_json(action))

    def _mirrors(self, made: _Action, action: Action) -> tuple[dict[str, Any], ...]:
        """The rule's mirrors that can be served (the others are warned in the plan or here)."""
        found = []
        for mirror in action.mirrors:
            if mirror.service is None:
                continue
            resolved = self._resolve(made, mirror.service)
            if resolved.name is None or resolved.refused:
                made.warnings.append((f"{made.plan.kind} {made.plan.ref}", f"spec.rules[{made.rule}]: RequestMirror: "
                                      f"{resolved.problem}; requests are not mirrored there"))
                continue
            found.append(table_schema.GATEWAY_MIRROR.serialise(
                backend=resolved.name, numerator=mirror.numerator, denominator=mirror.denominator))
        return tuple(found)


def _filters_json(action: Action) -> dict[str, Any]:
    """The fields a rule's action and a backendRef's filters share: redirect, rewrites, header changes."""
    return dict(redirect=_redirect(action.redirect), rewrite_host=action.rewrite_host,
                rewrite_path=action.rewrite_path.value if action.rewrite_path else None,
                rewrite_prefix=bool(action.rewrite_path and action.rewrite_path.prefix),
                request_headers=_changes(action.request_headers), response_headers=_changes(action.response_headers))


def _budget(budget: RequestBudget | None) -> dict[str, Any] | None:
    if budget is None:
        return None
    return table_schema.GATEWAY_BUDGET.serialise(attempts=budget.attempts, request_ms=budget.request_ms,
                                                 backend_ms=budget.backend_ms)


def _backend_filters(filters: Action | None) -> dict[str, Any] | None:
    if filters is None or filters.error is not None:
        return None
    return table_schema.GATEWAY_BACKEND_FILTERS.serialise(**_filters_json(filters))


def _redirect(redirect: Redirect | None) -> dict[str, Any] | None:
    if redirect is None:
        return None
    return table_schema.GATEWAY_REDIRECT.serialise(
        scheme=redirect.scheme, hostname=redirect.hostname, port=redirect.port,
        path=redirect.path.value if redirect.path else None, prefix=bool(redirect.path and redirect.path.prefix),
        code=redirect.code)


def _changes(changes: HeaderChanges | None) -> dict[str, Any] | None:
    if changes is None:
        return None
    return table_schema.GATEWAY_HEADER_CHANGES.serialise(set=changes.set, add=changes.add, remove=changes.remove)

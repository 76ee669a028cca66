"""Attached HTTPRoutes → each host's Gateway rules, in the spec's precedence, as gateway.lua reads them.

A host's entry holds layers, tried in order: the rules of routes for that very host, then of wildcard hosts that
cover it (longest first), then of routes for any host; a request goes to the first rule that matches in the first
layer that has one. Within a layer, the candidates for a path are tried in the spec's order — an Exact path, then
RegularExpression paths, then the longest PathPrefix — and for each path its matches ordered by method match,
then most header matches, then most query parameter matches, then the oldest route (then "namespace/name"), then
rule and match order; when none of a path's matches holds, the next candidate path is tried.

A rule reaches a host only from the listener that serves that host: of the listeners of one protocol, the one whose
hostname matches the host most precisely (its own name, then a wildcard, then none), as the spec sends a request to
the most specific listener.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from services.nginxconf import table_schema
from services.nginxconf.config import DEFAULT_PROFILE, LocationProfile

from ..backends import BackendResolver
from ..types import CATCH_ALL_HOST
from .attachment import Attachment
from .httproutes import Action, HeaderChanges, Match, RoutePlan
from .listeners import Listener
from .mirrors import mirror_locations


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


def gateway_tables(attached: Iterable[tuple[RoutePlan, list[Attachment]]], *, listeners: list[Listener],
                   resolver: BackendResolver, ingress_owners: Mapping[str, str]) -> GatewayTables:
    """`ingress_owners`: host → the namespace whose Ingress owns it; only that namespace's routes serve the host (as
    an Ingress of another namespace cannot take its certificate or redirects, a route cannot take its paths)."""
    tables = GatewayTables()
    by_host: dict[str, list[_Candidate]] = {}
    for plan, attachments in attached:
        for attachment in attachments:
            for host in attachment.hosts:
                owner = ingress_owners.get(host)
                if owner is not None and owner != plan.namespace and host != CATCH_ALL_HOST:
                    tables.warnings.append((f"{plan.kind} {plan.ref}", f"host {host} belongs to namespace {owner}, "
                                            "whose Ingress names it; this route does not serve it"))
                    continue
                if attachment.listener.certificate and host != CATCH_ALL_HOST:
                    tables.tls_secrets.setdefault(host, attachment.listener.certificate)
                by_host.setdefault(host, []).extend(
                    _Candidate(attachment.listener, plan, r, i, match)
                    for r, rule in enumerate(plan.rules) for i, match in enumerate(rule.matches))
    actions = _Actions(tables, resolver)
    wildcards = sorted((h for h in by_host if h.startswith("*.")), key=lambda h: (-len(h), h))
    for host in sorted(by_host):
        layer_hosts = [host]
        if host != CATCH_ALL_HOST:
            layer_hosts += [w for w in wildcards if w != host and host.endswith(w[1:])]
            if CATCH_ALL_HOST in by_host:
                layer_hosts.append(CATCH_ALL_HOST)
        best = {scheme: max((specificity(listener.hostname, host) for listener in listeners
                             if listener.scheme == scheme), default=-1) for scheme in ("http", "https")}
        host_actions: dict[tuple[str, str, int], int] = {}
        action_list: list[dict[str, Any]] = []
        layers = []
        owner = ingress_owners.get(host) if host != CATCH_ALL_HOST else None
        for layer_host in layer_hosts:
            # A wildcard's or any host's routes of another namespace do not serve an owned host either.
            candidates = [c for c in by_host[layer_host]
                          if specificity(c.listener.hostname, host) == best[c.listener.scheme]
                          and (owner is None or c.plan.namespace == owner)]
            if candidates:
                layers.append(_layer(candidates, host_actions, action_list, actions))
        if layers:
            tables.routes[host] = table_schema.GATEWAY_ROUTES.serialise(layers=layers, actions=action_list)
    return tables


def _layer(candidates: list[_Candidate], host_actions: dict[tuple[str, str, int], int],
           action_list: list[dict[str, Any]], actions: _Actions) -> dict[str, Any]:
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
                action_list.append(actions.json(candidate.plan, candidate.rule))
                host_actions[key] = len(action_list)
            scheme: str | None = candidate.listener.scheme
            twin = (found[i - 1] if i else None)
            if twin is not None and (twin.plan.kind, twin.plan.ref, twin.rule, twin.index) == key + (candidate.index,):
                if twin.listener.scheme != scheme:
                    matches[-1].pop("scheme", None)  # the same match on the HTTP and the HTTPS listener
                continue
            matches.append(_match_json(candidate.match, host_actions[key], scheme))
        if kind == "exact":
            exact[path] = matches
        elif kind == "prefix":
            prefix.append((path, matches))
        else:
            regex.append((path, matches))
    return table_schema.GATEWAY_LAYER.serialise(exact=exact, prefix=tuple(prefix), regex=tuple(regex))


def _match_json(match: Match, action: int, scheme: str | None) -> dict[str, Any]:
    def values(items: Iterable[Any]) -> tuple[dict[str, Any], ...]:
        return tuple(table_schema.GATEWAY_VALUE_MATCH.serialise(name=v.name, value=v.value, regex=v.regex)
                     for v in items)
    return table_schema.GATEWAY_MATCH.serialise(action=action, scheme=scheme, method=match.method,
                                                headers=values(match.headers), query=values(match.query))


class _Actions:
    """Each rule's action as JSON, made once whatever the number of hosts that use it."""

    def __init__(self, tables: GatewayTables, resolver: BackendResolver) -> None:
        self._tables, self._resolver = tables, resolver
        self._made: dict[tuple[str, str, int], dict[str, Any]] = {}

    def json(self, plan: RoutePlan, rule: int) -> dict[str, Any]:
        key = (plan.kind, plan.ref, rule)
        if key not in self._made:
            self._made[key] = self._action(plan, rule, plan.rules[rule].action)
        return self._made[key]

    def _action(self, plan: RoutePlan, rule: int, action: Action) -> dict[str, Any]:
        backends = []
        if action.error is None and action.redirect is None:
            for choice in action.backends:
                name = None
                if choice.service is not None:
                    resolved = self._resolver.resolve(choice.service)
                    if resolved.name is None or resolved.refused:
                        self._tables.warnings.append((f"{plan.kind} {plan.ref}", f"spec.rules[{rule}]: "
                                                      f"{resolved.problem}; its share of requests answers 500 "
                                                      "(reason BackendNotFound)"))
                    else:
                        name = resolved.name
                        self._tables.backends[name] = list(resolved.endpoints)
                backends.append(table_schema.GATEWAY_BACKEND.serialise(
                    backend=name, weight=choice.weight, service=choice.service.service if choice.service else None))
        mirrors = self._mirrors(plan, rule, action) if action.error is None and action.redirect is None else ()
        profile = DEFAULT_PROFILE
        directives = list(mirror_locations(len(mirrors)))
        if action.response_headers is not None:
            directives.append(RESPONSE_HEADERS)
        if action.timeout is not None:
            directives += [("proxy_read_timeout", action.timeout), ("proxy_send_timeout", action.timeout)]
        if directives or action.backend_scheme != "http":
            made = LocationProfile.of(directives=tuple(sorted(directives)), backend_scheme=action.backend_scheme)
            self._tables.profiles[made.name] = made
            profile = made.name
        redirect = action.redirect
        matches = plan.rules[rule].matches
        return table_schema.GATEWAY_ACTION.serialise(
            route=plan.ref, path=matches[0].path, profile=profile, backends=tuple(backends),
            redirect=table_schema.GATEWAY_REDIRECT.serialise(
                scheme=redirect.scheme, hostname=redirect.hostname, port=redirect.port,
                path=redirect.path.value if redirect.path else None,
                prefix=bool(redirect.path and redirect.path.prefix), code=redirect.code) if redirect else None,
            rewrite_host=action.rewrite_host,
            rewrite_path=action.rewrite_path.value if action.rewrite_path else None,
            rewrite_prefix=bool(action.rewrite_path and action.rewrite_path.prefix),
            request_headers=_changes(action.request_headers), response_headers=_changes(action.response_headers),
            mirrors=mirrors)

    def _mirrors(self, plan: RoutePlan, rule: int, action: Action) -> tuple[dict[str, Any], ...]:
        """The rule's mirrors that can be served (the others are warned in the plan or here)."""
        found = []
        for mirror in action.mirrors:
            if mirror.service is None:
                continue
            resolved = self._resolver.resolve(mirror.service)
            if resolved.name is None or resolved.refused:
                self._tables.warnings.append((f"{plan.kind} {plan.ref}", f"spec.rules[{rule}]: RequestMirror: "
                                              f"{resolved.problem}; requests are not mirrored there"))
                continue
            self._tables.backends[resolved.name] = list(resolved.endpoints)
            found.append(table_schema.GATEWAY_MIRROR.serialise(
                backend=resolved.name, numerator=mirror.numerator, denominator=mirror.denominator))
        return tuple(found)


def _changes(changes: HeaderChanges | None) -> dict[str, Any] | None:
    if changes is None:
        return None
    return table_schema.GATEWAY_HEADER_CHANGES.serialise(set=changes.set, add=changes.add, remove=changes.remove)

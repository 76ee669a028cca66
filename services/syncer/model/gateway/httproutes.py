"""One HTTPRoute read and validated: its parents, hostnames, and rules (matches → what to do).

Everything that reaches nginx or Lua passes a validator in fields.py; a field that cannot be served rejects the
whole route (RouteRejected) with a message saying what to change, and other routes are not affected. A filter
pyngress does not serve makes its rule answer 500, as the spec asks of an unsupported filter; a backendRef that
cannot be resolved (another kind, another namespace without a ReferenceGrant) answers 500 for its share of the
requests.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from services.nginxconf.config import BackendScheme

from ..backends import ServiceRef
from . import fields
from .budgets import RequestBudget, plan_budget
from .cors import CorsPolicy, cors_policy
from .fields import RouteRejected
from .mirrors import MirrorChoice, share
from .objects import GATEWAY_GROUP
from .reasons import Reason
from .reference_grants import ReferenceGrants

MAX_WEIGHT = 1_000_000
_REDIRECT_CODES = (301, 302, 303, 307, 308)
_SUPPORTED_FILTERS = ("RequestHeaderModifier", "ResponseHeaderModifier", "RequestRedirect", "URLRewrite",
                      "RequestMirror", "CORS")
# On a backendRef: the filters that change the request sent to that backend, or its answer.
_BACKEND_FILTERS = ("RequestHeaderModifier", "ResponseHeaderModifier", "RequestRedirect", "URLRewrite")


@dataclass(frozen=True)
class ParentRef:
    namespace: str
    name: str
    section: str | None
    port: int | None


@dataclass(frozen=True)
class ValueMatch:
    """A header or query parameter condition; header names are lower case (they are case-insensitive)."""
    name: str
    value: str
    regex: bool = False


@dataclass(frozen=True)
class Match:
    path_kind: str  # "exact", "prefix" or "regex"
    path: str
    method: str | None = None
    headers: tuple[ValueMatch, ...] = ()
    query: tuple[ValueMatch, ...] = ()


@dataclass(frozen=True)
class HeaderChanges:
    set: tuple[tuple[str, str], ...] = ()
    add: tuple[tuple[str, str], ...] = ()
    remove: tuple[str, ...] = ()


@dataclass(frozen=True)
class PathChange:
    value: str
    prefix: bool  # ReplacePrefixMatch: the matched prefix is replaced; else the whole path


@dataclass(frozen=True)
class Redirect:
    scheme: str | None
    hostname: str | None
    port: int | None
    path: PathChange | None
    code: int


@dataclass(frozen=True)
class BackendChoice:
    """One backendRef: its Service, or None when it answers 500 (`problem` says why), and its weight; `filters`: its
    own filters, applied after the rule's to the requests sent to it (an Action without backends)."""
    service: ServiceRef | None
    weight: int
    problem: str | None = None
    filters: Action | None = None
    reason: Reason | None = None  # the spec's reason of `problem`, for the route's ResolvedRefs


@dataclass(frozen=True)
class Action:
    backends: tuple[BackendChoice, ...] = ()
    request_headers: HeaderChanges | None = None
    response_headers: HeaderChanges | None = None
    redirect: Redirect | None = None
    rewrite_host: str | None = None
    rewrite_path: PathChange | None = None
    budget: RequestBudget | None = None  # retry and timeouts (budgets.py)
    error: str | None = None  # why the rule answers 500 (an unsupported filter)
    mirrors: tuple[MirrorChoice, ...] = ()  # RequestMirror filters (mirrors.py)
    backend_scheme: BackendScheme = "http"  # "grpc": a GRPCRoute's rule (grpcroutes.py)
    cors: CorsPolicy | None = None  # the CORS filter (cors.py)


@dataclass(frozen=True)
class Rule:
    matches: tuple[Match, ...]
    action: Action


@dataclass(frozen=True)
class RoutePlan:
    ref: str  # "namespace/name"
    namespace: str
    order: tuple[datetime, str]  # creation order: oldest first
    parents: tuple[ParentRef, ...]
    hostnames: tuple[str, ...]
    rules: tuple[Rule, ...]
    warnings: tuple[str, ...] = ()
    kind: str = "HTTPRoute"  # or GRPCRoute, TLSRoute: the same attachment and tables


def plan_route(route: dict[str, Any], *, namespace: str, name: str, order: tuple[datetime, str],
               grants: ReferenceGrants) -> RoutePlan:
    """Validate an HTTPRoute; raise RouteRejected saying what to change."""
    spec = fields.mapping(route.get("spec"), where="spec")
    parents, hostnames = parents_and_hostnames(spec, namespace=namespace)
    raw_rules = fields.listing(spec.get("rules"), where="spec.rules", most=16) or [{}]
    warnings: list[str] = []
    rules = tuple(_rule(fields.mapping(rule, where=f"spec.rules[{i}]"), namespace=namespace, where=f"spec.rules[{i}]",
                        grants=grants, warnings=warnings) for i, rule in enumerate(raw_rules))
    return RoutePlan(ref=f"{namespace}/{name}", namespace=namespace, order=order, parents=parents,
                     hostnames=hostnames, rules=rules, warnings=tuple(warnings))


def parents_and_hostnames(spec: dict[str, Any], *, namespace: str) -> tuple[tuple[ParentRef, ...], tuple[str, ...]]:
    """A route's spec.parentRefs and spec.hostnames (every route kind has both, with the CRDs' bounds: 32 parents,
    16 hostnames), the hostnames without repeats."""
    parents = tuple(_parent(p, namespace=namespace, index=i)
                    for i, p in enumerate(fields.listing(spec.get("parentRefs"), where="spec.parentRefs", most=32)))
    hostnames = tuple(dict.fromkeys(fields.hostname(h, where="spec.hostnames")
                                    for h in fields.listing(spec.get("hostnames"), where="spec.hostnames", most=16)))
    return parents, hostnames


def _parent(raw: Any, *, namespace: str, index: int) -> ParentRef:
    where = f"spec.parentRefs[{index}]"
    raw = fields.mapping(raw, where=where)
    if (raw.get("group") or GATEWAY_GROUP, raw.get("kind") or "Gateway") != (GATEWAY_GROUP, "Gateway"):
        raise RouteRejected(f"{where}: only a Gateway ({GATEWAY_GROUP}) can be a parent")
    section = raw.get("sectionName")
    port = raw.get("port")
    return ParentRef(namespace=raw.get("namespace") or namespace, name=fields.object_name(raw.get("name"), where=where),
                     section=fields.object_name(section, where=where) if section is not None else None,
                     port=fields.port(port, where=where) if port is not None else None)


def _rule(raw: dict[str, Any], *, namespace: str, where: str, grants: ReferenceGrants, warnings: list[str]) -> Rule:
    matches = tuple(_match(fields.mapping(m, where=f"{where}.matches[{i}]"), where=f"{where}.matches[{i}]")
                    for i, m in enumerate(fields.listing(raw.get("matches"), where=f"{where}.matches", most=64) or [{}]))
    action = Action(backends=tuple(_backend(fields.mapping(b, where=f"{where}.backendRefs[{i}]"), namespace=namespace,
                                            where=f"{where}.backendRefs[{i}]", grants=grants, warnings=warnings,
                                            matches=matches)
                                   for i, b in enumerate(fields.listing(raw.get("backendRefs"),
                                                                        where=f"{where}.backendRefs", most=16))),
                    budget=plan_budget(raw, where=where, warnings=warnings))
    return Rule(matches=matches, action=_filtered(action, raw.get("filters"), where=where, matches=matches,
                                                  namespace=namespace, grants=grants, warnings=warnings))


def _filtered(action: Action, raw_filters: Any, *, where: str, matches: tuple[Match, ...], namespace: str,
              grants: ReferenceGrants, warnings: list[str], supported: tuple[str, ...] = _SUPPORTED_FILTERS,
              refusal: str = "the rule answers 500") -> Action:
    """`action` with the filters of a rule (or of a backendRef: `supported`) applied in order; one not supported
    gives an Action whose `error` says so and what `refusal` follows."""
    kinds: list[str] = []
    for i, raw_filter in enumerate(fields.listing(raw_filters, where=f"{where}.filters", most=16)):
        raw_filter = fields.mapping(raw_filter, where=f"{where}.filters[{i}]")
        kind = raw_filter.get("type")
        if kind not in supported:
            message = f"{where}.filters[{i}]: filter {kind} is not supported; {refusal}"
            warnings.append(message)
            return Action(error=message)
        if kind == "RequestMirror":  # the one filter a rule may hold several times
            action = replace(action, mirrors=action.mirrors + (_mirror(
                fields.mapping(raw_filter.get("requestMirror"), where=f"{where}.filters[{i}].requestMirror"),
                namespace=namespace, where=f"{where}.filters[{i}].requestMirror", grants=grants,
                warnings=warnings),))
            continue
        if kind in kinds:
            raise RouteRejected(f"{where}.filters[{i}]: filter {kind} is given twice")
        kinds.append(kind)
        action = _with_filter(action, kind, raw_filter, where=f"{where}.filters[{i}]", matches=matches)
    if action.redirect is not None and (action.rewrite_path is not None or action.rewrite_host is not None):
        raise RouteRejected(f"{where}: RequestRedirect and URLRewrite cannot be in one list of filters")
    return action


def _match(raw: dict[str, Any], *, where: str) -> Match:
    path = fields.mapping(raw.get("path"), where=f"{where}.path")
    kind, value = path.get("type") or "PathPrefix", path.get("value") or "/"
    if kind == "Exact":
        match = Match("exact", fields.path(value, where=where))
    elif kind == "PathPrefix":
        match = Match("prefix", fields.path(value, where=where).rstrip("/") or "/")
    elif kind == "RegularExpression":
        match = Match("regex", fields.regex(value, where=where, full=True))
    else:
        raise RouteRejected(f"{where}: path type {kind!r} must be Exact, PathPrefix or RegularExpression")
    method = raw.get("method")
    headers = _value_matches(raw.get("headers"), where=f"{where}.headers", header=True)
    query = _value_matches(raw.get("queryParams"), where=f"{where}.queryParams", header=False)
    return Match(match.path_kind, match.path, fields.method(method, where=where) if method is not None else None,
                 headers, query)


def _value_matches(raw: Any, *, where: str, header: bool) -> tuple[ValueMatch, ...]:
    found: dict[str, ValueMatch] = {}
    for i, item in enumerate(fields.listing(raw, where=where, most=16)):
        item = fields.mapping(item, where=f"{where}[{i}]")
        kind = item.get("type") or "Exact"
        if kind not in ("Exact", "RegularExpression"):
            raise RouteRejected(f"{where}[{i}]: type {kind!r} must be Exact or RegularExpression")
        regex = kind == "RegularExpression"
        name = (fields.header_name(item.get("name"), where=f"{where}[{i}]").lower() if header
                else fields.query_name(item.get("name"), where=f"{where}[{i}]"))
        value = item.get("value")
        value = (fields.regex(value, where=f"{where}[{i}]", full=False) if regex
                 else fields.header_value(value, where=f"{where}[{i}]"))
        found.setdefault(name, ValueMatch(name, value, regex))  # the spec: the first of one name counts
    return tuple(found.values())


def _backend(raw: dict[str, Any], *, namespace: str, where: str, grants: ReferenceGrants,
             warnings: list[str], kind: str = "HTTPRoute", matches: tuple[Match, ...] = (),
             filter_kinds: tuple[str, ...] | None = None) -> BackendChoice:
    """One backendRef; `filter_kinds`: the filters it takes (by default an HTTPRoute's, none on other kinds)."""
    weight = raw.get("weight", 1)
    if isinstance(weight, bool) or not isinstance(weight, int) or not 0 <= weight <= MAX_WEIGHT:
        raise RouteRejected(f"{where}: weight {weight!r} must be 0-{MAX_WEIGHT}")
    name = fields.object_name(raw.get("name"), where=where)
    filters = None
    supported = filter_kinds if filter_kinds is not None else _BACKEND_FILTERS if kind == "HTTPRoute" else ()
    if raw.get("filters") and not supported:
        raise RouteRejected(f"{where}: filters on a {kind} backendRef are not supported; put them on the rule")
    if raw.get("filters"):
        # An unsupported one gives filters with an `error`: the reference still resolves, its share answers 500.
        filters = _filtered(Action(), raw.get("filters"), where=where, matches=matches, namespace=namespace,
                            grants=grants, warnings=warnings, supported=supported,
                            refusal="its share of requests answers 500")
    group, target_kind = raw.get("group") or "", raw.get("kind") or "Service"
    target_namespace = raw.get("namespace") or namespace
    if (group, target_kind) != ("", "Service"):
        problem = f"{where}: {target_kind} ({group or 'core'}) is not a kind pyngress routes to (reason " \
                  "InvalidKind); its share of requests answers 500"
        warnings.append(problem)
        return BackendChoice(None, weight, problem, reason=Reason.INVALID_KIND)
    if not grants.allows(source=(GATEWAY_GROUP, kind, namespace),
                         target=("", "Service", target_namespace, name)):
        problem = (f"{where}: Service {target_namespace}/{name} is in another namespace and no ReferenceGrant in "
                   f"{target_namespace} allows it (reason RefNotPermitted); its share of requests answers 500")
        warnings.append(problem)
        return BackendChoice(None, weight, problem, reason=Reason.REF_NOT_PERMITTED)
    if raw.get("port") is None:
        raise RouteRejected(f"{where}: a Service backendRef needs a port")
    port = fields.port(raw.get("port"), where=where)
    return BackendChoice(ServiceRef(namespace=target_namespace, service=name, port=port), weight, filters=filters)


def _mirror(raw: dict[str, Any], *, namespace: str, where: str, grants: ReferenceGrants,
            warnings: list[str]) -> MirrorChoice:
    numerator, denominator = share(raw, where=where)
    ref = fields.mapping(raw.get("backendRef"), where=f"{where}.backendRef")
    if "weight" in ref:
        raise RouteRejected(f"{where}.backendRef: a mirror's backendRef has no weight")
    refused: list[str] = []
    choice = _backend(ref, namespace=namespace, where=f"{where}.backendRef", grants=grants, warnings=refused)
    if choice.problem is not None:
        # The mirror is left out; the rule's own backends still answer.
        warnings.append(choice.problem.split("; its share")[0] + "; requests are not mirrored there")
    return MirrorChoice(choice.service, numerator, denominator, choice.problem)


def _header_changes(raw: dict[str, Any], *, where: str) -> HeaderChanges:
    def pairs(key: str) -> tuple[tuple[str, str], ...]:
        items = fields.listing(raw.get(key), where=f"{where}.{key}", most=16)
        return tuple((fields.changeable_header(fields.mapping(h, where=where).get("name"), where=f"{where}.{key}"),
                      fields.header_value(h.get("value"), where=f"{where}.{key}")) for h in items)
    remove = tuple(fields.changeable_header(h, where=f"{where}.remove")
                   for h in fields.listing(raw.get("remove"), where=f"{where}.remove", most=16))
    return HeaderChanges(set=pairs("set"), add=pairs("add"), remove=remove)


def _path_change(raw: dict[str, Any], *, where: str, matches: tuple[Match, ...]) -> PathChange | None:
    if not raw:
        return None
    kind = raw.get("type")
    if kind == "ReplaceFullPath":
        return PathChange(fields.path(raw.get("replaceFullPath"), where=where), prefix=False)
    if kind == "ReplacePrefixMatch":
        if any(m.path_kind != "prefix" for m in matches):
            raise RouteRejected(f"{where}: ReplacePrefixMatch needs every match of the rule to be a PathPrefix")
        return PathChange(fields.path(raw.get("replacePrefixMatch"), where=where), prefix=True)
    raise RouteRejected(f"{where}: path type {kind!r} must be ReplaceFullPath or ReplacePrefixMatch")


def _with_filter(action: Action, kind: str, raw: dict[str, Any], *, where: str, matches: tuple[Match, ...]) -> Action:
    if kind == "RequestHeaderModifier":
        return replace(action, request_headers=_header_changes(
            fields.mapping(raw.get("requestHeaderModifier"), where=where), where=where))
    if kind == "ResponseHeaderModifier":
        return replace(action, response_headers=_header_changes(
            fields.mapping(raw.get("responseHeaderModifier"), where=where), where=where))
    if kind == "CORS":
        return replace(action, cors=cors_policy(fields.mapping(raw.get("cors"), where=where), where=f"{where}.cors"))
    if kind == "RequestRedirect":
        spec = fields.mapping(raw.get("requestRedirect"), where=where)
        scheme, host, port = spec.get("scheme"), spec.get("hostname"), spec.get("port")
        if scheme not in (None, "http", "https"):
            raise RouteRejected(f"{where}: scheme {scheme!r} must be http or https")
        code = spec.get("statusCode", 302)
        if code not in _REDIRECT_CODES:
            raise RouteRejected(f"{where}: statusCode {code!r} must be one of {', '.join(map(str, _REDIRECT_CODES))}")
        return replace(action, redirect=Redirect(
            scheme=scheme, hostname=fields.precise_hostname(host, where=where) if host is not None else None,
            port=fields.port(port, where=where) if port is not None else None, code=code,
            path=_path_change(fields.mapping(spec.get("path"), where=where), where=where, matches=matches)))
    spec = fields.mapping(raw.get("urlRewrite"), where=where)  # URLRewrite
    host = spec.get("hostname")
    return replace(action, rewrite_host=fields.precise_hostname(host, where=where) if host is not None else None,
                   rewrite_path=_path_change(fields.mapping(spec.get("path"), where=where), where=where,
                                             matches=matches))

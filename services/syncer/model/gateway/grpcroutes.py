"""One GRPCRoute read and validated, as the HTTPRoute rules it amounts to.

A gRPC call is an HTTP/2 POST to /<package.Service>/<Method>, so a GRPCRoute is served by the same route tables as an
HTTPRoute: a method match becomes a path match (service and method: an Exact path; a service alone: the PathPrefix
/<service>, whole path elements; a method alone, or RegularExpression: a regular expression on the whole path), its
header matches stay header matches, and its backends are spoken to with gRPC (grpc_pass over HTTP/2 cleartext, as
the backend-protocol GRPC annotation does for an Ingress). Precedence between rules is the HTTPRoute one (an Exact
path, then regular expressions, then the longest prefix; then the most header matches, then the oldest route).
"""
from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from . import fields
from .fields import RouteRejected
from .httproutes import Action, Match, RoutePlan, Rule, _backend, _filtered, _value_matches, parents_and_hostnames
from .reference_grants import ReferenceGrants

GRPC_ROUTE = "GRPCRoute"
# The GRPCRoute CRD's patterns: a service is a dotted name ("helloworld.Greeter"), a method one identifier.
_SERVICE = re.compile(r"(?i)\.?[a-z_][a-z_0-9]*(?:\.[a-z_][a-z_0-9]*)*")
_METHOD = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")
_ANY_NAME = "[^/]+"  # one path element: the service or the method a RegularExpression match leaves open
_FILTERS = ("RequestHeaderModifier", "ResponseHeaderModifier")


def plan_grpc_route(route: dict[str, Any], *, namespace: str, name: str, order: tuple[datetime, str],
                    grants: ReferenceGrants) -> RoutePlan:
    """Validate a GRPCRoute into the rules of an HTTPRoute; raise RouteRejected saying what to change."""
    spec = fields.mapping(route.get("spec"), where="spec")
    parents, hostnames = parents_and_hostnames(spec, namespace=namespace)
    warnings: list[str] = []
    rules = tuple(_rule(fields.mapping(rule, where=f"spec.rules[{i}]"), namespace=namespace, where=f"spec.rules[{i}]",
                        grants=grants, warnings=warnings)
                  for i, rule in enumerate(fields.listing(spec.get("rules"), where="spec.rules") or [{}]))
    return RoutePlan(ref=f"{namespace}/{name}", namespace=namespace, order=order, parents=parents,
                     hostnames=hostnames, rules=rules, warnings=tuple(warnings), kind=GRPC_ROUTE)


def _rule(raw: dict[str, Any], *, namespace: str, where: str, grants: ReferenceGrants, warnings: list[str]) -> Rule:
    matches = tuple(_match(fields.mapping(m, where=f"{where}.matches[{i}]"), where=f"{where}.matches[{i}]")
                    for i, m in enumerate(fields.listing(raw.get("matches"), where=f"{where}.matches") or [{}]))
    # A backendRef's filters apply, after the rule's, to the calls the weighted pick sends to it (as an HTTPRoute's).
    backends = tuple(_backend(fields.mapping(b, where=f"{where}.backendRefs[{i}]"), namespace=namespace,
                              where=f"{where}.backendRefs[{i}]", grants=grants, warnings=warnings, kind=GRPC_ROUTE,
                              matches=matches, filter_kinds=_FILTERS)
                     for i, b in enumerate(fields.listing(raw.get("backendRefs"), where=f"{where}.backendRefs")))
    return Rule(matches=matches, action=_filtered(Action(backends=backends, backend_scheme="grpc"), raw.get("filters"),
                                                  where=where, matches=matches, namespace=namespace, grants=grants,
                                                  warnings=warnings, supported=_FILTERS))


def _match(raw: dict[str, Any], *, where: str) -> Match:
    headers = _value_matches(raw.get("headers"), where=f"{where}.headers", header=True)
    method = fields.mapping(raw.get("method"), where=f"{where}.method")
    if not method:
        return Match("prefix", "/", headers=headers)
    kind = method.get("type") or "Exact"
    service, name = method.get("service"), method.get("method")
    if kind == "Exact":
        if service is None and name is None:
            raise RouteRejected(f"{where}.method: an Exact match needs a service, a method or both")
        if service is not None and not (isinstance(service, str) and _SERVICE.fullmatch(service)):
            raise RouteRejected(f"{where}.method: service {service!r} must be a dotted name such as "
                                "helloworld.Greeter")
        if name is not None and not (isinstance(name, str) and _METHOD.fullmatch(name)):
            raise RouteRejected(f"{where}.method: method {name!r} must be a name such as SayHello")
        if name is None:
            return Match("prefix", f"/{service}", headers=headers)
        if service is None:
            return Match("regex", f"/{_ANY_NAME}/{name}", headers=headers)
        return Match("exact", f"/{service}/{name}", headers=headers)
    if kind != "RegularExpression":
        raise RouteRejected(f"{where}.method: type {kind!r} must be Exact or RegularExpression")
    parts = [fields.regex(part, where=f"{where}.method", full=False) if part is not None else _ANY_NAME
             for part in (service, name)]
    return Match("regex", fields.regex(f"/(?:{parts[0]})/(?:{parts[1]})", where=f"{where}.method", full=True),
                 headers=headers)

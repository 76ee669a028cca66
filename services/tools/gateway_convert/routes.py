"""One Ingress → its HTTPRoute rules by host; canary Ingresses → weights and header matches on those rules.

A rule is one Ingress path: its match, its backend (or a RequestRedirect), the filters its annotations make, and
its timeout. Hosts whose rules come out the same share one HTTPRoute (routes.py's caller groups them), since an
HTTPRoute's hostnames apply to all its rules.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Callable
from urllib.parse import urlsplit

from .annotations import CanarySettings, RouteSettings
from .paths import NotMappable, map_path

# The host of rules without one (they serve any host), as a key.
ANY_HOST = ""


@dataclass
class Rule:
    """One HTTPRoute rule, with the Ingress path it came from (for canaries, which name the same host and path)."""
    path: str
    matches: list[dict[str, Any]]
    backend_refs: list[dict[str, Any]] = field(default_factory=list)
    filters: list[dict[str, Any]] = field(default_factory=list)
    timeout: str | None = None

    def to_json(self) -> dict[str, Any]:
        rule: dict[str, Any] = {"matches": self.matches}
        if self.filters:
            rule["filters"] = self.filters
        if self.backend_refs:
            rule["backendRefs"] = self.backend_refs
        if self.timeout:
            rule["timeouts"] = {"backendRequest": self.timeout}
        return rule


@dataclass
class Backend:
    """A Service and port of an Ingress backend, as a backendRef."""
    namespace: str
    name: str
    port: int

    def ref(self, route_namespace: str, weight: int | None = None) -> dict[str, Any]:
        ref: dict[str, Any] = {"name": self.name, "port": self.port}
        if self.namespace != route_namespace:
            ref["namespace"] = self.namespace
        if weight is not None:
            ref["weight"] = weight
        return ref


# (namespace, backend of an Ingress) → a Backend, or the reason it has none in an HTTPRoute.
BackendResolver = Callable[[str, Any], "Backend | str"]


@dataclass
class IngressRules:
    """The rules of one Ingress, by host (ANY_HOST for rules without one), and what went into the report."""
    namespace: str
    name: str
    settings: RouteSettings
    by_host: dict[str, list[Rule]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def ingress_rules(ingress: dict[str, Any], settings: RouteSettings, *, regex_hosts: set[str],
                  resolve: BackendResolver, response_headers: dict[str, str] | None) -> IngressRules:
    """The rules of a (main, not canary) Ingress."""
    meta = ingress.get("metadata") or {}
    namespace = meta.get("namespace") or "default"
    result = IngressRules(namespace, meta.get("name") or "", settings)
    spec = ingress.get("spec") or {}
    filters = _filters(settings, response_headers)
    for rule in spec.get("rules") or []:
        host = rule.get("host") or ANY_HOST
        rules = result.by_host.setdefault(host, [])
        if settings.app_root:
            rules.append(Rule("app-root", [{"path": {"type": "Exact", "value": "/"}}], filters=[{
                "type": "RequestRedirect", "requestRedirect": {"path": {"type": "ReplaceFullPath",
                                                                       "replaceFullPath": settings.app_root},
                                                              "statusCode": 302}}]))
        for item in (rule.get("http") or {}).get("paths") or []:
            path, path_type = item.get("path") or "/", item.get("pathType") or "ImplementationSpecific"
            try:
                mapping = map_path(path, path_type, regex_host=host in regex_hosts,
                                   rewrite_target=settings.rewrite_target)
            except NotMappable as err:
                result.problems.append(f"host {host or '*'} path {path}: not converted: {err}")
                continue
            converted = Rule(path, [{"path": mapping.match}], timeout=settings.backend_timeout)
            if settings.redirect is not None:
                converted.filters = [_redirect(settings.redirect.url, settings.redirect.code)]
                converted.timeout = None
            else:
                backend = resolve(namespace, item.get("backend"))
                if isinstance(backend, str):
                    result.problems.append(f"host {host or '*'} path {path}: not converted: {backend}")
                    continue
                converted.backend_refs = [backend.ref(namespace)]
                converted.filters = _with_rewrite(filters, mapping.rewrite, settings.upstream_vhost)
            rules.append(converted)
        _longest_regex_first(rules)
    _add_default_backend(result, spec, filters, resolve)
    return result


def _add_default_backend(result: IngressRules, spec: dict[str, Any], filters: list[dict[str, Any]],
                         resolve: BackendResolver) -> None:
    """spec.defaultBackend: the paths of the Ingress's hosts that match nothing else, or (without rules) every
    host's, as the catch-all."""
    if spec.get("defaultBackend") is None:
        return
    backend = resolve(result.namespace, spec["defaultBackend"])
    if isinstance(backend, str):
        result.problems.append(f"defaultBackend: not converted: {backend}")
        return
    for rules in (result.by_host.values() if result.by_host else [result.by_host.setdefault(ANY_HOST, [])]):
        if not any(r.matches[0]["path"] == {"type": "PathPrefix", "value": "/"} for r in rules):
            rules.append(Rule("defaultBackend", [{"path": {"type": "PathPrefix", "value": "/"}}],
                              [backend.ref(result.namespace)], copy.deepcopy(filters), result.settings.backend_timeout))


def _longest_regex_first(rules: list[Rule]) -> None:
    """Regular expression paths in ingress-nginx's order, longest first (pyngress tries a route's in rule order)."""
    regexes = sorted((r for r in rules if r.matches[0]["path"]["type"] == "RegularExpression"),
                     key=lambda r: -len(r.path))
    positions = [i for i, r in enumerate(rules) if r.matches[0]["path"]["type"] == "RegularExpression"]
    for i, rule in zip(positions, regexes):
        rules[i] = rule


def _filters(settings: RouteSettings, response_headers: dict[str, str] | None) -> list[dict[str, Any]]:
    filters: list[dict[str, Any]] = []
    if settings.forwarded_prefix:
        filters.append({"type": "RequestHeaderModifier", "requestHeaderModifier": {
            "set": [{"name": "X-Forwarded-Prefix", "value": settings.forwarded_prefix}]}})
    if response_headers:
        filters.append({"type": "ResponseHeaderModifier", "responseHeaderModifier": {
            "set": [{"name": name, "value": value} for name, value in sorted(response_headers.items())]}})
    return filters


def _with_rewrite(filters: list[dict[str, Any]], path: dict[str, Any] | None, hostname: str | None
                  ) -> list[dict[str, Any]]:
    rewrite: dict[str, Any] = {}
    if hostname:
        rewrite["hostname"] = hostname
    if path:
        rewrite["path"] = path
    return copy.deepcopy(filters) + ([{"type": "URLRewrite", "urlRewrite": rewrite}] if rewrite else [])


def _redirect(url: str, code: int) -> dict[str, Any]:
    """permanent-redirect / temporal-redirect: every request of the path goes to `url`."""
    parts = urlsplit(url)
    redirect: dict[str, Any] = {"statusCode": code}
    if parts.scheme:
        redirect["scheme"] = parts.scheme
    if parts.hostname:
        redirect["hostname"] = parts.hostname
    if parts.port:
        redirect["port"] = parts.port
    redirect["path"] = {"type": "ReplaceFullPath", "replaceFullPath": parts.path or "/"}
    return {"type": "RequestRedirect", "requestRedirect": redirect}


def add_canary(mains: list[IngressRules], canary: dict[str, Any], settings: CanarySettings, *,
               resolve: BackendResolver) -> list[str]:
    """Send part of the traffic of the main Ingress's rule for each of the canary's hosts and paths (the oldest
    Ingress with a rule for them) to the canary's backend, as ingress-nginx does: by header first ("always" /
    "never", or the value, or the pattern), then by weight. Returns the report's reasons for the canary's paths
    that have no main rule or no backend."""
    problems = []
    meta = canary.get("metadata") or {}
    namespace = meta.get("namespace") or "default"
    for rule in (canary.get("spec") or {}).get("rules") or []:
        host = rule.get("host") or ANY_HOST
        for item in (rule.get("http") or {}).get("paths") or []:
            path = item.get("path") or "/"
            main = next((m for m in mains if any(r.path == path and r.backend_refs for r in m.by_host.get(host, ()))),
                        None)
            if main is None:
                problems.append(f"host {host or '*'} path {path}: no other Ingress has a rule for it; not converted")
                continue
            backend = resolve(namespace, item.get("backend"))
            if isinstance(backend, str):
                problems.append(f"host {host or '*'} path {path}: not converted: {backend}")
                continue
            rules = main.by_host[host]
            target = next(r for r in rules if r.path == path and r.backend_refs)
            at = rules.index(target) + 1
            rules[at:at] = _canary_rules(target, backend, settings, main.namespace)
    return problems


def _canary_rules(main: Rule, canary: Backend, settings: CanarySettings, namespace: str) -> list[Rule]:
    """The header rules for the canary; the main rule gets the weights (changed in place)."""
    primary = main.backend_refs[0]
    if settings.weight is not None:
        weight = min(settings.weight, settings.total)
        main.backend_refs = [{**primary, "weight": settings.total - weight}, canary.ref(namespace, weight)]
    added = []

    def with_header(header: dict[str, Any], backend_refs: list[dict[str, Any]]) -> Rule:
        matches = [{**match, "headers": [header]} for match in main.matches]
        return Rule(main.path, matches, backend_refs, copy.deepcopy(main.filters), main.timeout)

    if settings.header:
        if settings.header_value:
            added.append(with_header({"name": settings.header, "value": settings.header_value},
                                     [canary.ref(namespace)]))
        elif settings.header_pattern:
            added.append(with_header({"type": "RegularExpression", "name": settings.header,
                                      "value": settings.header_pattern}, [canary.ref(namespace)]))
        else:
            added.append(with_header({"name": settings.header, "value": "always"}, [canary.ref(namespace)]))
            added.append(with_header({"name": settings.header, "value": "never"}, [dict(primary)]))
    return added

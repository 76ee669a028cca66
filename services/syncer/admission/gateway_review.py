"""The admission decision on one Gateway API object: what the syncer's gateway model would make of it.

An HTTPRoute, GRPCRoute or TLSRoute is ours when a parentRef names a Gateway of one of our GatewayClasses (its
`controllerName` is --gateway-controller-name); a Gateway when its class is ours. Anything else is allowed untouched:
another controller's to judge. Ours is built with the model's own build_gateway (model/gateway/build.py) beside
its neighbours only: the route's parent Gateways and the routes that may share its host names (the same name, a
wildcard covering it or covered by it, and the routes without hostnames on the same Gateways), as the Ingress review
takes only the Ingresses sharing its hosts. The model's errors about the object deny it (a field it cannot serve, a
parentRef to one of our Gateways it cannot attach to, a listener it does not serve), its warnings are handed back
(a filter answering 500, a backend not found, a host an Ingress of another namespace owns, a TLS host an older
route passes through). GatewayClasses and ReferenceGrants decide nothing the model refuses: not reviewed.

What is not taken into account, to keep a review small: the listeners of Gateways that are not the route's parents
(a more specific listener elsewhere can take a host from the route's listener in the syncer; the review then
reports the route as served there).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from services.common.settings import Settings

from ..model.backends import BackendResolver
from ..model.gateway import GatewayObjects, build_gateway
from ..model.gateway.classes import our_classes
from ..model.gateway.objects import GATEWAY_GROUP
from ..model.gateway.tlsroutes import passthrough_beside
from ..model.problems import Problem
from ..model.tls import TlsSecrets

ROUTE_KINDS = ("HTTPRoute", "GRPCRoute", "TLSRoute")
REVIEWED_KINDS = (*ROUTE_KINDS, "Gateway")
_HOSTLESS = ""  # the index name of a route without spec.hostnames: it takes its listeners' hostnames


@dataclass(frozen=True)
class GatewayContext:
    """What a review reads beside the Gateway API objects: the Reviewer's Services, Secrets, and the host names our
    Ingresses own."""
    services: Mapping[tuple[str, str], dict[str, Any]]
    secrets: Mapping[tuple[str, str], dict[str, Any]]
    ingress_owners: Mapping[str, str]  # host → the namespace of the oldest of our Ingresses naming it
    ingress_hosts: Callable[[str], bool]  # whether one of our Ingresses names the host


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _names(route: Mapping[str, Any]) -> tuple[str, ...]:
    """The host names a route gives (lower case), or the one index name of a route without any."""
    names = tuple(dict.fromkeys(h.lower() for h in _list(_mapping(route.get("spec")).get("hostnames"))
                                if isinstance(h, str)))
    return names or (_HOSTLESS,)


def _parents(route: Mapping[str, Any], namespace: str) -> tuple[tuple[str, str], ...]:
    """The (namespace, name) of each Gateway the route's parentRefs name."""
    found = []
    for ref in _list(_mapping(route.get("spec")).get("parentRefs")):
        ref = _mapping(ref)
        if ((ref.get("group") or GATEWAY_GROUP, ref.get("kind") or "Gateway") == (GATEWAY_GROUP, "Gateway")
                and isinstance(ref.get("name"), str)):
            found.append((str(ref.get("namespace") or namespace), ref["name"]))
    return tuple(dict.fromkeys(found))


def _suffixes(name: str) -> list[str]:
    """"a.b.example.com" → ["b.example.com", "example.com", "com"] (a wildcard's own suffix first)."""
    labels = name.removeprefix("*.").split(".")
    start = 0 if name.startswith("*.") else 1
    return [".".join(labels[i:]) for i in range(start, len(labels))]


class GatewayIndex:
    """The store's Gateway API objects, kept by apply_change: routes by host name and by parent, Gateways,
    GatewayClasses, ReferenceGrants and Namespaces."""

    def __init__(self) -> None:
        self.classes: dict[str, dict[str, Any]] = {}
        self.gateways: dict[tuple[str, str], dict[str, Any]] = {}
        self.grants: dict[tuple[str, str], dict[str, Any]] = {}
        self.namespace_labels: dict[str, dict[str, str]] = {}
        self.routes: dict[tuple[str, str, str], dict[str, Any]] = {}  # (kind, namespace, name) → route
        self._indexed: dict[tuple[str, str, str], tuple[tuple[str, ...], tuple[tuple[str, str], ...]]] = {}
        self._by_name: dict[str, set[tuple[str, str, str]]] = {}  # a host name → the routes giving it
        self._by_suffix: dict[str, set[str]] = {}  # "example.com" → the names given that end in ".example.com"
        self._hostless: dict[tuple[str, str], set[tuple[str, str, str]]] = {}  # parent → its routes without hosts

    def apply_change(self, key: str, obj: dict[str, Any] | None) -> None:
        """One store object set (None: deleted); keys of other kinds are ignored."""
        kind, namespace, name = key.split("/", 2)
        if kind in ROUTE_KINDS:
            self._unindex((kind, namespace, name))
            if obj is not None:
                self._index((kind, namespace, name), obj)
        elif kind == "Namespace":
            labels = _mapping(_mapping((obj or {}).get("metadata")).get("labels"))
            self.namespace_labels.pop(name, None)
            if obj is not None:
                self.namespace_labels[name] = {str(k): str(v) for k, v in labels.items()}
        elif kind == "GatewayClass":
            _put(self.classes, name, obj)
        elif kind == "Gateway":
            _put(self.gateways, (namespace, name), obj)
        elif kind == "ReferenceGrant":
            _put(self.grants, (namespace, name), obj)

    def _index(self, key: tuple[str, str, str], route: dict[str, Any]) -> None:
        names, parents = _names(route), _parents(route, key[1])
        self.routes[key] = route
        self._indexed[key] = names, parents
        for host in names:
            self._by_name.setdefault(host, set()).add(key)
            for suffix in _suffixes(host):
                self._by_suffix.setdefault(suffix, set()).add(host)
        if names == (_HOSTLESS,):
            for parent in parents:
                self._hostless.setdefault(parent, set()).add(key)

    def _unindex(self, key: tuple[str, str, str]) -> None:
        self.routes.pop(key, None)
        names, parents = self._indexed.pop(key, ((), ()))
        for host in names:
            _discard(self._by_name, host, key)
            if host not in self._by_name:
                for suffix in _suffixes(host):
                    _discard(self._by_suffix, suffix, host)
        if names == (_HOSTLESS,):
            for parent in parents:
                _discard(self._hostless, parent, key)

    def neighbours(self, names: Iterable[str], parents: Iterable[tuple[str, str]]) -> set[tuple[str, str, str]]:
        """The routes that may share a host name with a route giving `names` (with _HOSTLESS: its listeners')
        under `parents`: the same names, the wildcards covering them, the names a wildcard covers, and the routes
        without hostnames under the same parents."""
        found: set[tuple[str, str, str]] = set()
        for host in names:
            related = {host, *(f"*.{suffix}" for suffix in _suffixes(host))}
            if host.startswith("*."):
                related |= self._by_suffix.get(host[2:], set())
            for name in related:
                found |= self._by_name.get(name, set())
        for parent in parents:
            found |= self._hostless.get(parent, set())
        return found


def _put(table: dict[Any, dict[str, Any]], key: Any, obj: dict[str, Any] | None) -> None:
    if obj is None:
        table.pop(key, None)
    else:
        table[key] = obj


def _discard(index: dict[Any, set[Any]], key: Any, member: Any) -> None:
    members = index.get(key)
    if members is not None:
        members.discard(member)
        if not members:
            del index[key]


@dataclass(frozen=True)
class GatewayDecision:
    """The model's problems about the reviewed object; None when it is not ours to judge."""
    problems: tuple[Problem, ...]


def review_gateway_object(obj: Mapping[str, Any], *, kind: str, namespace: str, name: str, index: GatewayIndex,
                          settings: Settings, context: GatewayContext) -> GatewayDecision | None:
    """What build_gateway says about `obj` (a route kind or a Gateway) among its neighbours; None when it is not
    ours."""
    classes = our_classes(index.classes, settings.ingress.gateway_controller_name)
    objects = GatewayObjects(classes={c: index.classes[c] for c in classes},
                             grants=[(ns, grant) for (ns, _), grant in index.grants.items()],
                             namespace_labels=index.namespace_labels)
    subject = dict(obj)
    if kind == "Gateway":
        if _mapping(subject.get("spec")).get("gatewayClassName") not in classes:
            return None
        objects.gateways[namespace, name] = subject
    else:
        parents = [p for p in _parents(subject, namespace) if p in index.gateways
                   and _mapping(index.gateways[p].get("spec")).get("gatewayClassName") in classes]
        if not parents:
            return None  # no parent of ours: another controller's route, or one whose Gateway is not there yet
        objects.gateways.update((p, index.gateways[p]) for p in parents)
        names = _names(subject)
        if names == (_HOSTLESS,):  # it takes its listeners' host names
            names = tuple({str(_mapping(listener).get("hostname") or _HOSTLESS).lower()
                           for p in parents for listener in _list(_mapping(index.gateways[p].get("spec"))
                                                                   .get("listeners"))})
        this = (kind, namespace, name)
        for other in index.neighbours(names, parents) - {this}:
            _routes_of(objects, other[0])[other[1], other[2]] = index.routes[other]
        _routes_of(objects, kind)[namespace, name] = subject
    resolver = BackendResolver(context.services, slices={},  # endpoints change nothing that is decided here
                               allow_external_name=not settings.ingress.disable_svc_external_name)
    model = build_gateway(objects, settings=settings, resolver=resolver,
                          secrets=TlsSecrets(context.secrets, settings.ingress.default_ssl_certificate),
                          ingress_owners=context.ingress_owners)
    problems = list(model.problems)
    if kind == "TLSRoute":
        ingress_hosts = {host for host in model.passthrough.hosts if context.ingress_hosts(host)}
        problems += passthrough_beside(model.passthrough, ingress_hosts=ingress_hosts,
                                       https_hosts=model.tls_secrets)[1]
    return GatewayDecision(tuple(p for p in problems if p.object == f"{kind} {namespace}/{name}"))


def _routes_of(objects: GatewayObjects, kind: str) -> dict[tuple[str, str], dict[str, Any]]:
    return {"HTTPRoute": objects.routes, "GRPCRoute": objects.grpc_routes, "TLSRoute": objects.tls_routes}[kind]


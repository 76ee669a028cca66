"""The store's Gateway API objects (and Namespaces, for allowedRoutes selectors), sorted by kind once per build."""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Mapping

from ..creation import creation_order

GATEWAY_KINDS = ("GatewayClass", "Gateway", "HTTPRoute", "GRPCRoute", "TLSRoute", "ReferenceGrant", "BackendTLSPolicy")
GATEWAY_GROUP = "gateway.networking.k8s.io"
# ConfigMaps: the CA certificates of client-certificate validation and of BackendTLSPolicies (ca_bundles.py).
_INPUTS = frozenset({*GATEWAY_KINDS, "Namespace", "ConfigMap"})


def is_gateway_input(key: str) -> bool:
    """Whether the store key "Kind/namespace/name" is one GatewayObjects reads."""
    return key.partition("/")[0] in _INPUTS


@dataclass(kw_only=True)
class GatewayObjects:
    classes: dict[str, dict[str, Any]] = field(default_factory=dict)  # name → GatewayClass
    gateways: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)  # (namespace, name) → Gateway
    routes: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)  # (namespace, name) → HTTPRoute
    grpc_routes: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)  # (namespace, name) → GRPCRoute
    tls_routes: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)  # (namespace, name) → TLSRoute
    grants: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (namespace, ReferenceGrant)
    tls_policies: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)  # → BackendTLSPolicy
    config_maps: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)  # (namespace, name) → ConfigMap
    namespace_labels: dict[str, dict[str, str]] = field(default_factory=dict)
    _grants: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict, repr=False, compare=False)  # put()'s, by key

    @classmethod
    def of(cls, store: Mapping[str, dict[str, Any]]) -> GatewayObjects:
        found = cls()
        for key, obj in store.items():
            if is_gateway_input(key):
                found.put(key, obj)
        return found

    def put(self, key: str, obj: dict[str, Any] | None) -> None:
        """Take the object at the store key "Kind/namespace/name" (one is_gateway_input takes; None: deleted), as the
        store took it: kept up to date this way (incremental.py), a change costs that object, not a scan of the store."""
        kind, _, rest = key.partition("/")
        namespace, _, name = rest.partition("/")
        if kind == "ReferenceGrant":
            _put(self._grants, (namespace, name), obj)
            self.grants = [(ns, grant) for (ns, _), grant in self._grants.items()]
        elif kind == "Namespace":
            labels = (obj.get("metadata") or {}).get("labels") if obj is not None else None
            _put(self.namespace_labels, name, None if obj is None else dict(labels) if isinstance(labels, dict) else {})
        elif kind == "GatewayClass":
            _put(self.classes, name, obj)
        else:
            table = {"Gateway": self.gateways, "HTTPRoute": self.routes, "GRPCRoute": self.grpc_routes,
                     "TLSRoute": self.tls_routes, "BackendTLSPolicy": self.tls_policies,
                     "ConfigMap": self.config_maps}[kind]
            _put(table, (namespace, name), obj)

    def labels_of(self, namespace: str) -> dict[str, str]:
        """A namespace's labels, with the one the API server sets on every namespace."""
        return {**self.namespace_labels.get(namespace, {}), "kubernetes.io/metadata.name": namespace}

    def routes_oldest_first(self, routes: Mapping[tuple[str, str], dict[str, Any]] | None = None
                            ) -> list[tuple[tuple[datetime, str], str, str, dict[str, Any]]]:
        """(creation order, namespace, name, route) of `routes` (default: the HTTPRoutes), oldest first, then by
        "namespace/name"."""
        return sorted(((creation_order(route, namespace=ns, name=name), ns, name, route)
                       for (ns, name), route in (self.routes if routes is None else routes).items()),
                      key=lambda item: item[0])


def _put(table: dict[Any, Any], key: Any, value: Any) -> None:
    if value is None:
        table.pop(key, None)
    else:
        table[key] = value

"""How Kubernetes objects are keyed in the store the watcher publishes.

A key is "Kind/namespace/name" ("Kind//name" for cluster-scoped kinds such as IngressClass and Node);
the value is the object as plain JSON-compatible data, exactly as the API (or the manifest) gives it.
"""
from __future__ import annotations

from typing import Any

# The kinds the watcher keeps, by apiVersion group, as the API serves them.
WATCHED_KINDS = ("Ingress", "IngressClass", "Service", "EndpointSlice", "Secret", "ConfigMap", "Node")
CLUSTER_SCOPED = frozenset({"IngressClass", "Node", "Namespace", "GatewayClass"})


def object_key(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    kind = obj["kind"]
    namespace = "" if kind in CLUSTER_SCOPED else (meta.get("namespace") or "default")
    return f"{kind}/{namespace}/{meta['name']}"


def split_key(key: str) -> tuple[str, str, str]:
    """"Kind/namespace/name" → (kind, namespace, name)."""
    kind, namespace, name = key.split("/", 2)
    return kind, namespace, name

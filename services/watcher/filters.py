"""Which objects the store keeps, and what of them: shared by every watcher source.

Keeping only what the syncer reads holds memory and publish traffic down in big clusters, where most
Secrets (service-account tokens, Helm releases) and ConfigMaps are of no use to an ingress controller.
"""
from __future__ import annotations

from typing import Any

from services.common.objects import CLUSTER_SCOPED
from services.common.settings import Settings

TLS_SECRET_TYPE = "kubernetes.io/tls"
LAST_APPLIED_ANNOTATION = "kubectl.kubernetes.io/last-applied-configuration"

# Client-certificate CAs (auth-tls-secret) are Secrets holding ca.crt, generic or TLS ones. Of a generic one
# only these keys are kept (slim): the store never holds what else it carries. Service-account token
# Secrets hold a ca.crt too (the cluster's) and are never kept.
CA_SECRET_TYPES = frozenset({"Opaque", TLS_SECRET_TYPE})
CA_KEYS = ("ca.crt", "ca.crl")

# Kinds kept whole (within --watch-namespace when they are namespaced).
_ALWAYS_KEPT = frozenset({"Ingress", "IngressClass", "Service", "EndpointSlice"})


def _namespace_and_name(obj: dict[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return meta.get("namespace") or "default", meta.get("name") or ""


def _named(reference: str | None, *, namespace: str, name: str) -> bool:
    """Whether an "NS/NAME" flag value names this object."""
    return reference is not None and reference == f"{namespace}/{name}"


def _in_watched_namespace(namespace: str, settings: Settings) -> bool:
    return not settings.source.watch_namespace or namespace == settings.source.watch_namespace


def _holds_client_ca(obj: dict[str, Any]) -> bool:
    data = obj.get("data")
    return obj.get("type", "Opaque") in CA_SECRET_TYPES and isinstance(data, dict) and "ca.crt" in data


def keep(obj: dict[str, Any], settings: Settings) -> bool:
    """Whether the store keeps `obj`.

    Objects named by a flag (--configmap, --tcp/udp-services-configmap, --default-ssl-certificate,
    --node-name) are kept whatever --watch-namespace says: they usually live in the controller's own
    namespace, not in the one whose Ingresses it serves.
    """
    kind = obj.get("kind")
    if kind == "Node":
        return settings.cni.node_name is not None and (obj.get("metadata") or {}).get("name") == settings.cni.node_name
    if kind in CLUSTER_SCOPED:
        return kind in _ALWAYS_KEPT
    namespace, name = _namespace_and_name(obj)
    if kind in _ALWAYS_KEPT:
        return _in_watched_namespace(namespace, settings)
    if kind == "Secret":
        if _named(settings.ingress.default_ssl_certificate, namespace=namespace, name=name):
            return True
        return ((obj.get("type") == TLS_SECRET_TYPE or _holds_client_ca(obj))
                and _in_watched_namespace(namespace, settings))
    if kind == "ConfigMap":
        return any(_named(ref, namespace=namespace, name=name) for ref in
                   (settings.ingress.configmap, settings.ingress.tcp_services_configmap, settings.ingress.udp_services_configmap))
    return False


def slim(obj: dict[str, Any]) -> dict[str, Any]:
    """`obj` without what the syncer never reads (managedFields, kubectl's last-applied copy, a generic
    Secret's keys other than CA_KEYS).

    Returns a new dict when something is dropped; `obj` itself is never modified.
    """
    data = obj.get("data")
    if obj.get("kind") == "Secret" and obj.get("type", "Opaque") != TLS_SECRET_TYPE and isinstance(data, dict) \
            and set(data) - set(CA_KEYS):
        obj = {**obj, "data": {k: v for k, v in data.items() if k in CA_KEYS}}
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return obj
    annotations = meta.get("annotations")
    has_last_applied = isinstance(annotations, dict) and LAST_APPLIED_ANNOTATION in annotations
    if "managedFields" not in meta and not has_last_applied:
        return obj
    new_meta = {k: v for k, v in meta.items() if k != "managedFields"}
    if has_last_applied:
        remaining = {k: v for k, v in annotations.items() if k != LAST_APPLIED_ANNOTATION}
        if remaining:
            new_meta["annotations"] = remaining
        else:
            del new_meta["annotations"]
    return {**obj, "metadata": new_meta}

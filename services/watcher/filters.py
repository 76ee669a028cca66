"""Which objects the store keeps, and what of them: shared by every watcher source.

Keeping only what the syncer reads holds memory and publish traffic down in big clusters, where most
Secrets (service-account tokens, Helm releases, docker configs) are of no use to an ingress controller.
Secrets are kept by type, TLS and Opaque (what auth-secret names): which Opaque Secrets an Ingress names
is only known once the Ingresses are read, and a Secret dropped here would have to be listed again when an
Ingress starts naming it. ConfigMaps are kept in the watched namespaces for the same reason (an Ingress's
auth-proxy-set-headers names one), but for the CA bundle the API server puts in every namespace.
Namespaces are kept only for --watch-namespace-selector (namespace_selection.py reads their labels), and with
--disable-catch-all Ingresses with a spec.defaultBackend are not kept at all, as ingress-nginx ignores them.
"""
from __future__ import annotations

from typing import Any

from services.common.objects import CLUSTER_SCOPED
from services.common.settings import Settings

TLS_SECRET_TYPE = "kubernetes.io/tls"
# Opaque Secrets hold basic authentication's htpasswd files (auth-secret) and client-certificate CAs
# (auth-tls-secret; TLS ones may too). An object without a type is Opaque: the API server fills it in so.
# Service-account token Secrets hold a ca.crt too (the cluster's) and are never kept.
_KEPT_SECRET_TYPES = frozenset({TLS_SECRET_TYPE, "Opaque", None})
# kube-controller-manager publishes the cluster's CA bundle in every namespace; no Ingress names it.
_ROOT_CA_CONFIGMAP = "kube-root-ca.crt"
LAST_APPLIED_ANNOTATION = "kubectl.kubernetes.io/last-applied-configuration"


# Kinds kept whole (within --watch-namespace when they are namespaced).
_ALWAYS_KEPT = frozenset({"Ingress", "IngressClass", "Service", "EndpointSlice",
                          "GatewayClass", "Gateway", "HTTPRoute", "GRPCRoute", "TLSRoute", "ReferenceGrant",
                          "BackendTLSPolicy"})


def _namespace_and_name(obj: dict[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return meta.get("namespace") or "default", meta.get("name") or ""


def _named(reference: str | None, *, namespace: str | None, name: str | None) -> bool:
    """Whether an "NS/NAME" flag value names this object."""
    return reference is not None and reference == f"{namespace}/{name}"


def _in_watched_namespace(namespace: str, settings: Settings) -> bool:
    return not settings.source.watch_namespace or namespace == settings.source.watch_namespace


def keep(obj: dict[str, Any], settings: Settings) -> bool:
    """Whether the store keeps `obj`.

    Objects named by a flag (--configmap, --tcp/udp-services-configmap, --default-ssl-certificate,
    --default-backend-service, --node-name) are kept whatever --watch-namespace says: they usually live in the
    controller's own namespace, not in the one whose Ingresses it serves.
    """
    kind = obj.get("kind")
    if kind == "Node":
        return settings.cni.node_name is not None and (obj.get("metadata") or {}).get("name") == settings.cni.node_name
    if kind == "Namespace":
        return bool(settings.source.watch_namespace_selector)
    if kind in CLUSTER_SCOPED:
        return kind in _ALWAYS_KEPT
    namespace, name = _namespace_and_name(obj)
    if kind == "Ingress" and settings.ingress.disable_catch_all and is_catch_all(obj):
        return False
    if kind in _ALWAYS_KEPT:
        return _in_watched_namespace(namespace, settings) or _of_default_backend(obj, namespace, name, settings)
    if kind == "Secret":
        if _named(settings.ingress.default_ssl_certificate, namespace=namespace, name=name):
            return True
        # The controller ConfigMap's own namespace too: ssl-dh-param names a Secret there.
        return obj.get("type") in _KEPT_SECRET_TYPES and (
            _in_watched_namespace(namespace, settings) or (settings.ingress.configmap or "").partition("/")[0] == namespace)
    if kind == "ConfigMap":
        # The controller ConfigMap's own namespace too: add-headers and proxy-set-headers name ConfigMaps there.
        return any(_named(ref, namespace=namespace, name=name) for ref in
                   (settings.ingress.configmap, settings.ingress.tcp_services_configmap, settings.ingress.udp_services_configmap)) \
            or (settings.ingress.configmap or "").partition("/")[0] == namespace \
            or (_in_watched_namespace(namespace, settings) and name != _ROOT_CA_CONFIGMAP)
    return False


def is_catch_all(ingress: dict[str, Any]) -> bool:
    """ingress-nginx's test for --disable-catch-all: a spec.defaultBackend, whatever the rules."""
    spec = ingress.get("spec")
    return isinstance(spec, dict) and spec.get("defaultBackend") is not None


def _of_default_backend(obj: dict[str, Any], namespace: str | None, name: str | None, settings: Settings) -> bool:
    """The --default-backend-service Service, or one of its EndpointSlices."""
    if obj.get("kind") == "EndpointSlice":
        labels = (obj.get("metadata") or {}).get("labels") or {}
        name = labels.get("kubernetes.io/service-name") if isinstance(labels, dict) else None
    return obj.get("kind") in ("Service", "EndpointSlice") and \
        _named(settings.ingress.default_backend_service, namespace=namespace, name=name)


def slim(obj: dict[str, Any]) -> dict[str, Any]:
    """`obj` without what the syncer never reads (managedFields, kubectl's last-applied copy).

    A generic Secret keeps all its keys: auth-secret-type auth-map names one key per user, whatever it is.
    Returns a new dict when something is dropped; `obj` itself is never modified.
    """
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return obj
    annotations = meta.get("annotations")
    if not isinstance(annotations, dict):
        annotations = {}
    has_last_applied = LAST_APPLIED_ANNOTATION in annotations
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

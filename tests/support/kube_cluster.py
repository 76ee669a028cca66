"""The cluster as a Kubernetes API server: the scenarios' `Cluster` protocol through the official client.

`apply` creates each object, or replaces it when it exists (as `kubectl apply` ends up doing for a whole
object); `delete` removes it. A namespace an object needs is created first, as a test author would
`kubectl create namespace` before applying into it.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable

from kubernetes import client

from services.common.objects import CLUSTER_SCOPED


@dataclass(frozen=True)
class _KindCalls:
    """The client's create/replace/delete methods for one kind, by name on its API class."""
    api_class: type
    suffix: str  # "namespaced_ingress", "ingress_class", ...

    @property
    def namespaced(self) -> bool:
        return self.suffix.startswith("namespaced_")


_KINDS: dict[str, _KindCalls] = {
    "Ingress": _KindCalls(client.NetworkingV1Api, "namespaced_ingress"),
    "IngressClass": _KindCalls(client.NetworkingV1Api, "ingress_class"),
    "Service": _KindCalls(client.CoreV1Api, "namespaced_service"),
    "EndpointSlice": _KindCalls(client.DiscoveryV1Api, "namespaced_endpoint_slice"),
    "Secret": _KindCalls(client.CoreV1Api, "namespaced_secret"),
    "ConfigMap": _KindCalls(client.CoreV1Api, "namespaced_config_map"),
    "Namespace": _KindCalls(client.CoreV1Api, "namespace"),
}

HTTP_NOT_FOUND, HTTP_CONFLICT = 404, 409


def _kind_calls(obj: dict[str, Any]) -> _KindCalls:
    try:
        return _KINDS[obj["kind"]]
    except KeyError:
        raise ValueError(f"ApiCluster cannot apply kind {obj.get('kind')!r}; it knows {', '.join(_KINDS)}") from None


class ApiCluster:
    """apply/delete against the API server `api_client` talks to."""

    def __init__(self, api_client: client.ApiClient) -> None:
        self.api_client = api_client
        self._apis = {calls.api_class: calls.api_class(api_client) for calls in _KINDS.values()}
        self._known_namespaces: set[str] = set()

    def apply(self, *objects: dict) -> None:
        for obj in objects:
            self._apply_one(obj)

    def delete(self, *objects: dict) -> None:
        for obj in objects:
            try:
                self._call(obj, "delete", obj["metadata"]["name"])
            except client.ApiException as err:
                if err.status != HTTP_NOT_FOUND:
                    raise

    def get(self, obj: dict) -> dict[str, Any] | None:
        """The object as the API serves it now (None when it does not exist)."""
        try:
            return self._call(obj, "read", obj["metadata"]["name"])
        except client.ApiException as err:
            if err.status == HTTP_NOT_FOUND:
                return None
            raise

    def create(self, obj: dict) -> dict[str, Any]:
        """Create only (an ApiException when the API refuses it)."""
        self._ensure_namespace(obj)
        return self._call(obj, "create", body=obj)

    def _apply_one(self, obj: dict) -> None:
        try:
            self.create(obj)
        except client.ApiException as err:
            if err.status != HTTP_CONFLICT:
                raise
            # No resourceVersion in the body: an unconditional replace, the last writer wins.
            body = {**obj, "metadata": {k: v for k, v in obj["metadata"].items() if k != "resourceVersion"}}
            self._call(obj, "replace", obj["metadata"]["name"], body=body)

    def _ensure_namespace(self, obj: dict) -> None:
        if obj["kind"] in CLUSTER_SCOPED:
            return
        namespace = obj["metadata"].get("namespace") or "default"
        if namespace in self._known_namespaces:
            return
        try:
            self._call({"kind": "Namespace"}, "create", body={"metadata": {"name": namespace}})
        except client.ApiException as err:
            if err.status != HTTP_CONFLICT:
                raise
        self._known_namespaces.add(namespace)

    def _call(self, obj: dict, verb: str, *args: Any, body: dict | None = None) -> dict[str, Any]:
        calls = _kind_calls(obj)
        method: Callable[..., Any] = getattr(self._apis[calls.api_class], f"{verb}_{calls.suffix}")
        positional = list(args)
        if calls.namespaced:
            positional.append(obj["metadata"].get("namespace") or "default")
        if body is not None:
            positional.append(body)
        # Raw JSON rather than the client's typed models: they rename fields, and tests compare JSON.
        response = method(*positional, _preload_content=False)
        try:
            return json.loads(response.data)
        finally:
            response.release_conn()

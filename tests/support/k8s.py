"""Factories for the Kubernetes objects the tests feed the controller, as `kubectl apply` takes them."""
from __future__ import annotations

import base64
from typing import Any


def ingress(name: str, rules: list[dict] | None = None, namespace: str = "default", *,
            class_name: str | None = "nginx", annotations: dict[str, str] | None = None,
            default_backend: tuple[str, int | str] | None = None, tls: list[dict] | None = None,
            created: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if annotations:
        meta["annotations"] = annotations
    if created:
        meta["creationTimestamp"] = created
    spec: dict[str, Any] = {}
    if class_name:
        spec["ingressClassName"] = class_name
    if rules is not None:
        spec["rules"] = rules
    if default_backend:
        spec["defaultBackend"] = service_backend(*default_backend)
    if tls:
        spec["tls"] = tls
    return {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": meta, "spec": spec}


def service_backend(service: str, port: int | str) -> dict[str, Any]:
    return {"service": {"name": service, "port": {"number": port} if isinstance(port, int) else {"name": port}}}


def rule(host: str | None, *paths: tuple[str, str, str, int | str]) -> dict[str, Any]:
    """paths: (path, pathType, service, port)."""
    r: dict[str, Any] = {"http": {"paths": [
        {"path": p, "pathType": t, "backend": service_backend(svc, port)} for p, t, svc, port in paths]}}
    if host:
        r["host"] = host
    return r


def ingress_class(name: str = "nginx", controller: str = "k8s.io/ingress-nginx") -> dict[str, Any]:
    return {"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass", "metadata": {"name": name},
            "spec": {"controller": controller}}


def service(name: str, port: int = 80, namespace: str = "default", port_name: str | None = None) -> dict[str, Any]:
    p: dict[str, Any] = {"port": port, "protocol": "TCP", "targetPort": port}
    if port_name:
        p["name"] = port_name
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": namespace},
            "spec": {"selector": {"app": name}, "ports": [p]}}


def endpoint_slice(service_name: str, ips: list[str], port: int, namespace: str = "default",
                   port_name: str | None = None, name: str | None = None,
                   not_ready: tuple[str, ...] = ()) -> dict[str, Any]:
    """One slice: every endpoint shares the slice's port, as in the API."""
    return {
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": name or f"{service_name}-slice", "namespace": namespace,
                     "labels": {"kubernetes.io/service-name": service_name}},
        "addressType": "IPv4",
        "ports": [{"name": port_name or "", "port": port, "protocol": "TCP"}],
        "endpoints": [{"addresses": [ip], "conditions": {"ready": ip not in not_ready}} for ip in ips],
    }


def config_map(name: str, data: dict[str, str], namespace: str = "default") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace}, "data": data}


def secret(name: str, data: dict[str, str], type_: str = "Opaque", namespace: str = "default") -> dict[str, Any]:
    """A Secret whose `data` is given as text (base64-encoded here, as the API stores it)."""
    return {"apiVersion": "v1", "kind": "Secret", "type": type_, "metadata": {"name": name, "namespace": namespace},
            "data": {key: base64.b64encode(value.encode()).decode() for key, value in data.items()}}

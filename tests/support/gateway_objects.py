"""Gateway API objects for the model and e2e tests, as a user writes them (gateway.networking.k8s.io/v1)."""
from __future__ import annotations

from typing import Any, Iterable

GROUP = "gateway.networking.k8s.io"
V1 = f"{GROUP}/v1"
CONTROLLER = "pyngress.io/gateway-controller"


def gateway_class(name: str = "pyngress", controller: str = CONTROLLER) -> dict[str, Any]:
    return {"apiVersion": V1, "kind": "GatewayClass", "metadata": {"name": name},
            "spec": {"controllerName": controller}}


def listener(name: str = "http", *, port: int = 80, protocol: str = "HTTP", hostname: str | None = None,
             namespaces: dict[str, Any] | None = None, certificate: str | None = None,
             certificate_namespace: str | None = None, passthrough: bool = False,
             kinds: Iterable[str] | None = None) -> dict[str, Any]:
    """A listener; `passthrough`: protocol TLS in Passthrough mode, for TLSRoutes (port 443 unless given); `kinds`:
    the route kinds it allows (allowedRoutes.kinds, in the Gateway API group)."""
    found: dict[str, Any] = {"name": name, "port": port, "protocol": protocol}
    if hostname is not None:
        found["hostname"] = hostname
    if namespaces is not None:
        found["allowedRoutes"] = {"namespaces": namespaces}
    if kinds is not None:
        found.setdefault("allowedRoutes", {})["kinds"] = [{"group": GROUP, "kind": kind} for kind in kinds]
    if certificate is not None:
        ref = {"kind": "Secret", "name": certificate}
        if certificate_namespace is not None:
            ref["namespace"] = certificate_namespace
        found["tls"] = {"mode": "Terminate", "certificateRefs": [ref]}
    if passthrough:
        found.update(protocol="TLS", port=443 if port == 80 else port, tls={"mode": "Passthrough"})
    return found


def gateway(name: str = "gw", *, ns: str = "default", listeners: Iterable[dict[str, Any]] = (),
            class_name: str = "pyngress") -> dict[str, Any]:
    return {"apiVersion": V1, "kind": "Gateway", "metadata": {"name": name, "namespace": ns},
            "spec": {"gatewayClassName": class_name, "listeners": list(listeners) or [listener()]}}


def backend_ref(service: str, port: int = 80, *, weight: int | None = None, ns: str | None = None,
                kind: str | None = None) -> dict[str, Any]:
    ref: dict[str, Any] = {"name": service, "port": port}
    if weight is not None:
        ref["weight"] = weight
    if ns is not None:
        ref["namespace"] = ns
    if kind is not None:
        ref["kind"] = kind
    return ref


def path_match(value: str = "/", kind: str = "PathPrefix", *, headers: dict[str, str] | None = None,
               query: dict[str, str] | None = None, method: str | None = None) -> dict[str, Any]:
    match: dict[str, Any] = {"path": {"type": kind, "value": value}}
    if headers:
        match["headers"] = [{"name": k, "value": v} for k, v in headers.items()]
    if query:
        match["queryParams"] = [{"name": k, "value": v} for k, v in query.items()]
    if method:
        match["method"] = method
    return match


def rule(*backends: dict[str, Any], matches: Iterable[dict[str, Any]] = (),
         filters: Iterable[dict[str, Any]] = (), timeouts: dict[str, str] | None = None) -> dict[str, Any]:
    found: dict[str, Any] = {}
    if matches:
        found["matches"] = list(matches)
    if filters:
        found["filters"] = list(filters)
    if backends:
        found["backendRefs"] = list(backends)
    if timeouts:
        found["timeouts"] = timeouts
    return found


def http_route(name: str, *, ns: str = "default", parents: Iterable[dict[str, Any]] = ({"name": "gw"},),
               hostnames: Iterable[str] = (), rules: Iterable[dict[str, Any]] = (),
               created: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns}
    if created is not None:
        meta["creationTimestamp"] = created
    spec: dict[str, Any] = {"parentRefs": list(parents), "rules": list(rules)}
    if hostnames:
        spec["hostnames"] = list(hostnames)
    return {"apiVersion": V1, "kind": "HTTPRoute", "metadata": meta, "spec": spec}


def grpc_method(service: str | None = None, method: str | None = None, kind: str = "Exact", *,
                headers: dict[str, str] | None = None) -> dict[str, Any]:
    """A GRPCRouteMatch: on the method (service and/or method name), and on headers."""
    match: dict[str, Any] = {}
    if service is not None or method is not None:
        match["method"] = {"type": kind, **({"service": service} if service else {}),
                           **({"method": method} if method else {})}
    if headers:
        match["headers"] = [{"name": k, "value": v} for k, v in headers.items()]
    return match


def grpc_route(name: str, **spec: Any) -> dict[str, Any]:
    """A GRPCRoute: the fields of an HTTPRoute (http_route's arguments), its rules with GRPCRouteMatches."""
    return {**http_route(name, **spec), "kind": "GRPCRoute"}


def tls_route(name: str, *backends: dict[str, Any], ns: str = "default",
              parents: Iterable[dict[str, Any]] = ({"name": "gw"},), hostnames: Iterable[str] = (),
              version: str = V1, created: str | None = None) -> dict[str, Any]:
    """A TLSRoute (v1, or v1alpha2 as older experimental CRDs serve it) with one rule of `backends`."""
    return {**http_route(name, ns=ns, parents=parents, hostnames=hostnames, rules=[rule(*backends)], created=created),
            "apiVersion": version, "kind": "TLSRoute"}


def reference_grant(name: str, *, ns: str, from_namespace: str, to_kind: str = "Service",
                    from_kind: str = "HTTPRoute", version: str = V1, to_name: str | None = None) -> dict[str, Any]:
    """A ReferenceGrant in `ns` to every object of `to_kind` there (or only `to_name`)."""
    to: dict[str, Any] = {"group": "", "kind": to_kind, **({"name": to_name} if to_name else {})}
    return {"apiVersion": version, "kind": "ReferenceGrant", "metadata": {"name": name, "namespace": ns},
            "spec": {"from": [{"group": GROUP, "kind": from_kind, "namespace": from_namespace}], "to": [to]}}


def backend_tls_policy(name: str, service: str, *ca_maps: str, hostname: str, ns: str = "default",
                       section: str | None = None) -> dict[str, Any]:
    """A BackendTLSPolicy (v1) for the Service `service` (its port `section` only, when given): TLS to it verified for
    `hostname` against the ca.crt of the ConfigMaps `ca_maps`, or against the system's CAs when none is named."""
    target = {"group": "", "kind": "Service", "name": service, **({"sectionName": section} if section else {})}
    validation: dict[str, Any] = {"hostname": hostname}
    if ca_maps:
        validation["caCertificateRefs"] = [{"group": "", "kind": "ConfigMap", "name": ca} for ca in ca_maps]
    else:
        validation["wellKnownCACertificates"] = "System"
    return {"apiVersion": V1, "kind": "BackendTLSPolicy", "metadata": {"name": name, "namespace": ns},
            "spec": {"targetRefs": [target], "validation": validation}}

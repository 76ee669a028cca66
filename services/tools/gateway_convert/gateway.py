"""The GatewayClass, the Gateway with its listeners (HTTP, and HTTPS per TLS host), and the ReferenceGrants.

Each host of an Ingress's spec.tls becomes an HTTPS listener of that hostname with the Secret as its certificate
(a tls entry without hosts: a listener without hostname); the oldest Ingress keeps a host named twice, as
pyngress keeps its certificate. A Secret outside the Gateway's namespace is allowed by a ReferenceGrant in its
own namespace, as is a Service that a route in another namespace sends to (a canary Ingress's).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from services.common.settings import IngressSettings

GATEWAY_API = "gateway.networking.k8s.io"
GATEWAY_API_V1 = f"{GATEWAY_API}/v1"
# v1beta1 is served by every Gateway API release that has ReferenceGrant (v1 only by recent ones).
REFERENCE_GRANT_VERSION = f"{GATEWAY_API}/v1beta1"
HTTP_LISTENER = "http"
MAX_LISTENERS = 64  # the Gateway CRD's limit


@dataclass(frozen=True)
class GatewayOptions:
    class_name: str = "pyngress"
    controller_name: str = IngressSettings().gateway_controller_name  # --gateway-controller-name's default
    name: str = "pyngress"
    namespace: str = "default"
    http_port: int = 80
    https_port: int = 443


@dataclass(frozen=True)
class Certificate:
    namespace: str
    name: str
    ingress: str  # "namespace/name" of the Ingress that named it


def listener_name(host: str | None) -> str:
    """The listener of a TLS host: "https-app-example-com", "https-wildcard-example-com", "https" for none."""
    if host is None:
        return "https"
    return "https-" + host.replace("*", "wildcard").replace(".", "-")


@dataclass
class Listeners:
    """The HTTPS listeners, by host (None: the one without hostname), in the order they were first named."""
    https: dict[str | None, Certificate] = field(default_factory=dict)

    def add_tls(self, namespace: str, name: str, tls: list[Any]) -> list[str]:
        """An Ingress's spec.tls (oldest Ingress first); the report's reasons for what is not taken."""
        problems = []
        for entry in tls:
            secret = entry.get("secretName") if isinstance(entry, dict) else None
            if not secret:
                problems.append("spec.tls entry without secretName: its hosts get no HTTPS listener")
                continue
            for host in entry.get("hosts") or [None]:
                taken = self.https.get(host)
                if taken is None:
                    self.https[host] = Certificate(namespace, secret, f"{namespace}/{name}")
                elif (taken.namespace, taken.name) != (namespace, secret):
                    problems.append(f"spec.tls host {host or '(any)'}: the listener already has Secret "
                                    f"{taken.namespace}/{taken.name} of the older Ingress {taken.ingress}")
        return problems

    def section_for(self, host: str) -> str | None:
        """The HTTPS listener that serves `host` ("" for any host): its own, a wildcard's, or the hostless one."""
        if host and host in self.https:
            return listener_name(host)
        wildcard = "*." + host.split(".", 1)[1] if host.count(".") >= 1 and not host.startswith("*") else None
        if wildcard in self.https:
            return listener_name(wildcard)
        return listener_name(None) if None in self.https else None


def gateway_class(options: GatewayOptions) -> dict[str, Any]:
    return {"apiVersion": GATEWAY_API_V1, "kind": "GatewayClass", "metadata": {"name": options.class_name},
            "spec": {"controllerName": options.controller_name}}


def gateway(options: GatewayOptions, listeners: Listeners, *, all_namespaces: bool) -> dict[str, Any]:
    """The Gateway; `all_namespaces`: routes outside its namespace attach (allowedRoutes From All)."""
    allowed = {"allowedRoutes": {"namespaces": {"from": "All"}}} if all_namespaces else {}
    entries: list[dict[str, Any]] = [{"name": HTTP_LISTENER, "protocol": "HTTP", "port": options.http_port, **allowed}]
    for host, certificate in listeners.https.items():
        ref: dict[str, Any] = {"group": "", "kind": "Secret", "name": certificate.name}
        if certificate.namespace != options.namespace:
            ref["namespace"] = certificate.namespace
        listener: dict[str, Any] = {"name": listener_name(host), "protocol": "HTTPS", "port": options.https_port}
        if host is not None:
            listener["hostname"] = host
        listener["tls"] = {"mode": "Terminate", "certificateRefs": [ref]}
        entries.append({**listener, **allowed})
    return {"apiVersion": GATEWAY_API_V1, "kind": "Gateway",
            "metadata": {"name": options.name, "namespace": options.namespace},
            "spec": {"gatewayClassName": options.class_name, "listeners": entries}}


def reference_grants(options: GatewayOptions, listeners: Listeners, routes: list[dict[str, Any]]
                     ) -> list[dict[str, Any]]:
    """The grants for the Gateway's Secrets and the routes' Services in other namespaces."""
    wanted: dict[tuple[str, str, str], set[tuple[str, str]]] = {}  # (namespace, from kind, from ns) → (kind, name)
    for certificate in listeners.https.values():
        if certificate.namespace != options.namespace:
            wanted.setdefault((certificate.namespace, "Gateway", options.namespace), set()).add(
                ("Secret", certificate.name))
    for route in routes:
        route_namespace = route["metadata"]["namespace"]
        for rule in route["spec"]["rules"]:
            for ref in rule.get("backendRefs") or ():
                if ref.get("namespace", route_namespace) != route_namespace:
                    wanted.setdefault((ref["namespace"], "HTTPRoute", route_namespace), set()).add(
                        ("Service", ref["name"]))
    grants = []
    for (namespace, from_kind, from_namespace), targets in sorted(wanted.items()):
        grants.append({"apiVersion": REFERENCE_GRANT_VERSION, "kind": "ReferenceGrant",
                       "metadata": {"name": f"{from_kind.lower()}s-from-{from_namespace}", "namespace": namespace},
                       "spec": {"from": [{"group": GATEWAY_API, "kind": from_kind, "namespace": from_namespace}],
                                "to": [{"group": "", "kind": kind, "name": name} for kind, name in sorted(targets)]}})
    return grants

"""ingress-nginx Ingresses → Gateway API resources (`pyngress convert`), and a report of what does not convert.

Pure: objects in, resources and report lines out (services/tools/convert.py reads the input and prints). Start at
`convert`: every Ingress, oldest first, has its annotations read (annotations.py), its paths mapped
(paths.py) and its rules built (routes.py); canary Ingresses then add weights and header matches to the rules of
the Ingress they shadow; the spec.tls of all make the Gateway's HTTPS listeners (gateway.py). Hosts redirected to
HTTPS get their rules on the HTTPS listeners only, and a route on the HTTP listener that redirects (308, as
ingress-nginx's ssl-redirect). docs/migrating.md ("pyngress convert") says what maps to what.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterable, Protocol

from .annotations import RouteSettings, read_settings
from .gateway import (GATEWAY_API_V1, HTTP_LISTENER, MAX_LISTENERS, GatewayOptions, Listeners, gateway, gateway_class,
                      reference_grants)
from .routes import ANY_HOST, Backend, IngressRules, Rule, add_canary, ingress_rules

__all__ = ["Conversion", "GatewayOptions", "convert"]
DEFAULT_PREFIX = "nginx.ingress.kubernetes.io"
LEGACY_CLASS_ANNOTATION = "kubernetes.io/ingress.class"
# ingress-nginx's redirect to HTTPS (the ConfigMap's http-redirect-code, 308 by default).
HTTPS_REDIRECT_CODE = 308


class Located(Protocol):
    """An object and where it was read ("FILE:LINE"), as services/tools/lint.py reads them."""
    @property
    def where(self) -> str: ...
    @property
    def obj(self) -> dict[str, Any]: ...


@dataclass
class Conversion:
    resources: list[dict[str, Any]] = field(default_factory=list)
    report: list[str] = field(default_factory=list)


@dataclass
class _Ingress:
    where: str
    obj: dict[str, Any]
    settings: RouteSettings

    @property
    def ref(self) -> str:
        meta = self.obj.get("metadata") or {}
        return f"{meta.get('namespace') or 'default'}/{meta.get('name')}"

    @property
    def namespace(self) -> str:
        return (self.obj.get("metadata") or {}).get("namespace") or "default"


def convert(objects: Iterable[Located], options: GatewayOptions | None = None, *,
            prefix: str = DEFAULT_PREFIX, ingress_class: str | None = None) -> Conversion:
    """The Gateway API resources for the Ingresses among `objects` (Services and ConfigMaps among them resolve
    port names and custom-headers), and the report: one line per annotation or path not converted, and why.
    `ingress_class`: only the Ingresses of that class (spec.ingressClassName, or the legacy annotation)."""
    from services.syncer.model.build import creation_order

    options = options or GatewayOptions()
    result = Conversion()
    located = list(objects)
    by_key = {(o.obj.get("kind"), (o.obj.get("metadata") or {}).get("namespace") or "default",
               (o.obj.get("metadata") or {}).get("name")): o.obj for o in located}
    ingresses = [_Ingress(o.where, o.obj, read_settings((o.obj.get("metadata") or {}).get("annotations") or {},
                                                        prefix=prefix))
                 for o in located if o.obj.get("kind") == "Ingress" and _of_class(o.obj, ingress_class)]
    ingresses.sort(key=lambda i: creation_order(i.obj, namespace=i.namespace, name=i.ref.split("/", 1)[1]))

    def report(ingress: _Ingress, message: str) -> None:
        result.report.append(f"{ingress.where}: Ingress {ingress.ref}: {message}")

    for ingress in ingresses:
        for name, why in ingress.settings.problems.items():
            report(ingress, f"annotation {prefix}/{name}: {why}")
    converted = [i for i in ingresses if not i.settings.access_control and not _passthrough(i, prefix)]
    for ingress in ingresses:
        if ingress not in converted:
            report(ingress, "not converted (see above)")
    mains = [i for i in converted if i.settings.canary is None]
    regex_hosts = {rule.get("host") or ANY_HOST for i in mains if i.settings.use_regex or i.settings.rewrite_target
                   for rule in (i.obj.get("spec") or {}).get("rules") or []}
    listeners = Listeners()
    for ingress in mains:
        for problem in listeners.add_tls(ingress.namespace, ingress.ref.split("/", 1)[1],
                                         (ingress.obj.get("spec") or {}).get("tls") or []):
            report(ingress, problem)

    def resolve(namespace: str, backend: Any) -> Backend | str:
        return _resolve(by_key, namespace, backend)

    rules: dict[int, IngressRules] = {}
    for ingress in mains:
        headers = _response_headers(ingress, by_key, prefix, report)
        rules[id(ingress)] = built = ingress_rules(ingress.obj, ingress.settings, regex_hosts=regex_hosts,
                                                   resolve=resolve, response_headers=headers)
        for problem in built.problems:
            report(ingress, problem)
    for ingress in converted:
        if ingress.settings.canary is not None:
            for problem in add_canary([rules[id(m)] for m in mains], ingress.obj, ingress.settings.canary,
                                      resolve=resolve):
                report(ingress, f"canary {problem}")

    routes: list[dict[str, Any]] = []
    redirected: set[str] = set()
    for ingress in mains:
        routes += _routes(ingress, rules[id(ingress)], listeners, options, redirected, report)
    if len(listeners.https) + 1 > MAX_LISTENERS:
        result.report.append(f"Gateway {options.namespace}/{options.name}: {len(listeners.https) + 1} listeners, "
                             f"more than the {MAX_LISTENERS} a Gateway takes: split the Ingresses into several runs "
                             "with --gateway-name")
    all_namespaces = any(r["metadata"]["namespace"] != options.namespace for r in routes)
    result.resources = [gateway_class(options), gateway(options, listeners, all_namespaces=all_namespaces),
                        *reference_grants(options, listeners, routes), *routes]
    return result


def _of_class(ingress: dict[str, Any], ingress_class: str | None) -> bool:
    if ingress_class is None:
        return True
    named = (ingress.get("spec") or {}).get("ingressClassName") or \
        ((ingress.get("metadata") or {}).get("annotations") or {}).get(LEGACY_CLASS_ANNOTATION)
    return bool(named == ingress_class)


def _passthrough(ingress: _Ingress, prefix: str) -> bool:
    return ((ingress.obj.get("metadata") or {}).get("annotations") or {}).get(f"{prefix}/ssl-passthrough") == "true"


def _resolve(by_key: dict[tuple[Any, str, Any], dict[str, Any]], namespace: str, backend: Any) -> Backend | str:
    """An Ingress backend's Service and port number (a port name is looked up in the Service, when given)."""
    if not isinstance(backend, dict) or not isinstance(backend.get("service"), dict):
        return "a resource backend has no HTTPRoute form (a backendRef is a Service)"
    service = backend["service"]
    name, port = service.get("name"), service.get("port") or {}
    if isinstance(port.get("number"), int):
        return Backend(namespace, name, port["number"])
    found = by_key.get(("Service", namespace, name))
    for entry in ((found or {}).get("spec") or {}).get("ports") or []:
        if entry.get("name") == port.get("name") and isinstance(entry.get("port"), int):
            return Backend(namespace, name, entry["port"])
    return (f"port {port.get('name')!r} of Service {namespace}/{name} is a name, and a backendRef needs the "
            "number: give the Service with the Ingresses, or write the number")


def _response_headers(ingress: _Ingress, by_key: dict[tuple[Any, str, Any], dict[str, Any]], prefix: str,
                      report: Any) -> dict[str, str] | None:
    """custom-headers: the ConfigMap's entries, when it is among the objects."""
    reference = ingress.settings.custom_headers
    if not reference:
        return None
    namespace, _, name = reference.rpartition("/")
    found = by_key.get(("ConfigMap", namespace or ingress.namespace, name))
    if found is None:
        report(ingress, f"annotation {prefix}/custom-headers: ConfigMap {namespace or ingress.namespace}/{name} is "
                        "not among the objects read; give it with the Ingresses to convert its headers")
        return None
    return {str(k): str(v) for k, v in (found.get("data") or {}).items()}


def _routes(ingress: _Ingress, built: IngressRules, listeners: Listeners, options: GatewayOptions,
            redirected: set[str], report: Any) -> list[dict[str, Any]]:
    """The HTTPRoutes of one Ingress: hosts with the same rules and listeners share one; and the route on the
    HTTP listener that redirects its hosts to HTTPS (hosts an older Ingress redirects already are left out)."""
    settings = ingress.settings
    groups: dict[str, tuple[list[str], list[str], list[Rule]]] = {}
    to_https: list[str] = []
    for host, host_rules in built.by_host.items():
        if not host_rules:
            continue
        section = listeners.section_for(host)
        redirect = (section is not None and settings.ssl_redirect) or settings.force_ssl_redirect
        if settings.force_ssl_redirect and section is None:
            report(ingress, f"annotation force-ssl-redirect: host {host or '*'} has no certificate in any spec.tls, "
                            "so no HTTPS listener: add one to the Gateway")
        sections = [section] if redirect and section else [HTTP_LISTENER] + ([section] if section else [])
        if redirect:
            sections = [s for s in sections if s != HTTP_LISTENER]
            if host not in redirected:
                redirected.add(host)
                to_https.append(host)
        key = json.dumps([host == ANY_HOST, sections, [r.to_json() for r in host_rules]], sort_keys=True)
        groups.setdefault(key, ([], sections, host_rules))[0].append(host)
    # The Ingress's age is the routes': where two routes want the same host and path, the older wins, as the older
    # Ingress did (an API server sets its own creationTimestamp; a manifests directory keeps this one).
    created = (ingress.obj.get("metadata") or {}).get("creationTimestamp")
    routes = []
    for i, (hosts, sections, host_rules) in enumerate(groups.values()):
        name = built.name if i == 0 else f"{built.name}-{i + 1}"
        routes.append(_route(name, built.namespace, hosts, sections, [r.to_json() for r in host_rules], options,
                             created))
    if to_https:
        redirect_rule = {"filters": [{"type": "RequestRedirect", "requestRedirect": {
            "scheme": "https", "statusCode": HTTPS_REDIRECT_CODE}}]}
        for any_host in (True, False):
            hosts = [h for h in to_https if (h == ANY_HOST) == any_host]
            if hosts:
                suffix = "-to-https" + ("-any-host" if any_host else "")
                routes.append(_route(built.name + suffix, built.namespace, hosts, [HTTP_LISTENER], [redirect_rule],
                                     options, created))
    return routes


def _route(name: str, namespace: str, hosts: list[str], sections: list[str], rules: list[dict[str, Any]],
           options: GatewayOptions, created: Any) -> dict[str, Any]:
    parent: dict[str, Any] = {"name": options.name}
    if options.namespace != namespace:
        parent["namespace"] = options.namespace
    spec: dict[str, Any] = {"parentRefs": [{**parent, "sectionName": s} for s in sections]}
    if ANY_HOST not in hosts:
        spec["hostnames"] = hosts
    spec["rules"] = rules
    meta = {"name": name, "namespace": namespace, **({"creationTimestamp": str(created)} if created else {})}
    return {"apiVersion": GATEWAY_API_V1, "kind": "HTTPRoute", "metadata": meta, "spec": spec}

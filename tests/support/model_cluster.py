"""A tiny fake cluster for model tests: builds Kubernetes objects as plain dicts (as `kubectl get -o json`
shows them) into a store keyed like the watcher's, and builds the model from it."""
from __future__ import annotations

import base64
import itertools
from datetime import datetime, timedelta, timezone
from typing import Any, Iterable

from services.common.objects import object_key
from services.common.settings import Settings
from services.syncer.annotations.access_control import is_access_control
from services.syncer.model.build import build_model
from services.syncer.model.types import Model

OUR_CONTROLLER = "k8s.io/ingress-nginx"
PREFIX = "nginx.ingress.kubernetes.io"
_EPOCH = datetime(2024, 1, 1, tzinfo=timezone.utc)

# (path, pathType, service, port number or name)
PathSpec = tuple[str, str, str, int | str]


def backend(service: str, port: int | str) -> dict[str, Any]:
    return {"service": {"name": service, "port": {"number": port} if isinstance(port, int) else {"name": port}}}


def rule(host: str | None, *paths: PathSpec) -> dict[str, Any]:
    r: dict[str, Any] = {"http": {"paths": [
        {"path": path, "pathType": path_type, "backend": backend(service, port)}
        for path, path_type, service, port in paths
    ]}}
    if host is not None:
        r["host"] = host
    return r


class Cluster:
    """Helpers are methods so that test modules need no imports from here (pytest's importlib mode)."""

    backend = staticmethod(backend)
    rule = staticmethod(rule)

    def __init__(self) -> None:
        self.store: dict[str, dict[str, Any]] = {}
        self.settings = Settings()
        self._ticks = itertools.count(1)

    def add(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.store[object_key(obj)] = obj
        return obj

    def timestamp(self, seconds: int | None = None) -> str:
        """Each call later than the one before, unless `seconds` after the epoch is given."""
        offset = next(self._ticks) if seconds is None else seconds
        return (_EPOCH + timedelta(seconds=offset)).strftime("%Y-%m-%dT%H:%M:%SZ")

    def ingress_class(self, name: str = "nginx", controller: str = OUR_CONTROLLER, default: bool = False) -> dict:
        meta: dict[str, Any] = {"name": name}
        if default:
            meta["annotations"] = {"ingressclass.kubernetes.io/is-default-class": "true"}
        return self.add({"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass", "metadata": meta,
                         "spec": {"controller": controller}})

    def ingress(self, name: str, *, ns: str = "default", host: str | None = "app.example.com",
                paths: Iterable[PathSpec] = (("/", "Prefix", "web", 80),), rules: list[dict] | None = None,
                annotations: dict[str, Any] | None = None, class_name: str | None = "nginx",
                created: str | None = None, tls: list[dict] | None = None,
                default_backend: dict | None = None) -> dict:
        spec: dict[str, Any] = {}
        if class_name is not None:
            spec["ingressClassName"] = class_name
        spec["rules"] = rules if rules is not None else [rule(host, *paths)]
        if not spec["rules"]:
            del spec["rules"]
        if tls is not None:
            spec["tls"] = tls
        if default_backend is not None:
            spec["defaultBackend"] = default_backend
        meta: dict[str, Any] = {"name": name, "namespace": ns, "creationTimestamp": created or self.timestamp()}
        if annotations:
            meta["annotations"] = {(k if "/" in k else f"{PREFIX}/{k}"): v for k, v in annotations.items()}
        return self.add({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": meta, "spec": spec})

    def service(self, name: str = "web", *, ns: str = "default",
                ports: Iterable[tuple[str | None, int]] = (("http", 80),),
                type: str = "ClusterIP", external_name: str | None = None) -> dict:
        spec: dict[str, Any] = {"type": type, "ports": [
            {**({"name": port_name} if port_name else {}), "port": port, "protocol": "TCP"}
            for port_name, port in ports
        ]}
        if external_name is not None:
            spec["externalName"] = external_name
        return self.add({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns},
                         "spec": spec})

    def endpoint_slice(self, service: str = "web", *, ns: str = "default", name: str | None = None,
                       addresses: Iterable[str | tuple[str, bool | None]] = ("10.0.0.1",),
                       port_name: str | None = "http", port: int = 8080, address_type: str = "IPv4") -> dict:
        endpoints = []
        for entry in addresses:
            address, ready = entry if isinstance(entry, tuple) else (entry, None)
            endpoint: dict[str, Any] = {"addresses": [address]}
            if ready is not None:
                endpoint["conditions"] = {"ready": ready}
            endpoints.append(endpoint)
        slice_port: dict[str, Any] = {"port": port, "protocol": "TCP"}
        if port_name:
            slice_port["name"] = port_name
        return self.add({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": name or f"{service}-{next(self._ticks)}", "namespace": ns,
                         "labels": {"kubernetes.io/service-name": service}},
            "addressType": address_type, "ports": [slice_port], "endpoints": endpoints,
        })

    def tls_secret(self, name: str = "app-tls", *, ns: str = "default", type: str = "kubernetes.io/tls",
                   data: dict[str, str] | None = None) -> dict:
        pem = base64.b64encode(b"-----BEGIN CERTIFICATE-----\n...").decode()
        return self.add({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": ns},
                         "type": type, "data": data if data is not None else {"tls.crt": pem, "tls.key": pem}})

    def configmap(self, data: dict[str, Any], name: str = "ingress-nginx-controller", ns: str = "ingress") -> dict:
        self.settings = self.settings.replace_flags(configmap=f"{ns}/{name}")
        return self.add({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns},
                         "data": data})

    def app(self, name: str = "web", *, ns: str = "default", host: str = "app.example.com",
            addresses: Iterable[str] = ("10.0.0.1",), **ingress: Any) -> dict:
        """A Service with one named port, its EndpointSlice, and an Ingress sending host/ to it."""
        self.service(name, ns=ns)
        self.endpoint_slice(name, ns=ns, addresses=addresses)
        return self.ingress(name, ns=ns, host=host, paths=(("/", "Prefix", name, 80),), **ingress)

    def build(self, **settings: Any) -> Model:
        return build_model(self.store, settings=self.settings.replace_flags(**settings))

    @staticmethod
    def rejections(model: Model) -> list[str]:
        return [str(p) for p in model.problems if p.is_error]

    @staticmethod
    def warnings(model: Model) -> list[str]:
        return [str(p) for p in model.problems if not p.is_error]

    @staticmethod
    def set_aside(model: Model, annotation: str, value: str, *, ingress: str = "default/web") -> str:
        """The one problem that an invalid `value` gives, as ingress-nginx treats it (docs/migrating.md, "Invalid
        annotation values"): an access-control annotation denies the Ingress's paths (503, the problem an error),
        any other is ignored with a warning and the Ingress served. Returns the reason given for the value."""
        start = f"Ingress {ingress}: annotation {PREFIX}/{annotation} value {value!r}: "
        [problem] = [p for p in model.problems if p.object == f"Ingress {ingress}"
                     and f"{p.object}: {p.message}".startswith(start)]
        if is_access_control(annotation):
            suffix = "; its paths answer 503 until it is fixed"
            assert problem.is_error and problem.message.endswith(suffix), problem
            assert any(p.directives == (("return", "503"),) for p in model.config.profiles), "no denied location"
        else:
            suffix = "; ignored, its default applies"
            assert not problem.is_error and problem.message.endswith(suffix), problem
        reason = f"{problem.object}: {problem.message}".removeprefix(start).removesuffix(suffix)
        assert len(reason) > 10, f"the message should say what to write instead: {problem}"
        return reason

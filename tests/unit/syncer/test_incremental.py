"""IncrementalModel against the full build: random sequences of creates, updates and deletes of Ingresses,
Services, EndpointSlices, Secrets, ConfigMaps and IngressClasses, over a few shared host names (conflicts,
canaries, www redirects, server aliases, passthrough, TLS, authentication Secrets, header ConfigMaps, hosts
owned by another namespace and the ConfigMap's strict-host-ownership), then with Gateway API objects beside them
(GatewayClass, Gateway, HTTPRoutes, TLSRoutes, ReferenceGrants, Namespace labels), and after every step the Model
kept up to date equals build_model() (model/build.py) of the same store."""
from __future__ import annotations

import base64
import functools
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from services.common.objects import object_key
from services.common.settings import Settings
from services.nginxconf.prefix import make_self_signed
from services.nginxconf.tables import certificates_delta
from services.syncer.model.build import build_model
from services.syncer.model.incremental import IncrementalModel
from tests.support import gateway_objects
from tests.support.htpasswd import basic_auth_secret

PREFIX = "nginx.ingress.kubernetes.io"
# A default backend: a backend no route names, which the model adds (and which changes with its Service).
SETTINGS = Settings().replace_flags(configmap="ingress/controller", enable_ssl_passthrough=True,
                                    default_backend_service="a/s1")
NAMESPACES = ("a", "b")
HOSTS = ("x.test", "www.x.test", "y.test", "*.y.test", "alias.test", None)
SERVICES = ("s1", "s2", "s3")


@functools.lru_cache(maxsize=None)
def _pem(subject: str, names: tuple[str, ...]) -> tuple[str, str]:
    pem = make_self_signed(subject, names).decode()
    end = pem.index("-----END CERTIFICATE-----") + len("-----END CERTIFICATE-----\n")
    return base64.b64encode(pem[:end].encode()).decode(), base64.b64encode(pem[end:].encode()).decode()


def _meta(name: str, namespace: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "namespace": namespace, **extra}


@st.composite
def ingresses(draw: st.DrawFn) -> dict[str, Any]:
    namespace = draw(st.sampled_from(NAMESPACES))
    rules = []
    for _ in range(draw(st.integers(0, 2))):
        host = draw(st.sampled_from(HOSTS))
        paths = [{"path": draw(st.sampled_from(["/", "/", "/api", "/api/v1", "/(a|b)"])),
                  "pathType": draw(st.sampled_from(["Prefix", "Exact", "ImplementationSpecific"])),
                  "backend": {"service": {"name": draw(st.sampled_from(SERVICES)),
                                          "port": draw(st.sampled_from([{"number": 80}, {"name": "http"},
                                                                        {"number": 81}]))}}}
                 for _ in range(draw(st.integers(1, 2)))]
        rules.append({**({"host": host} if host else {}), "http": {"paths": paths}})
    spec: dict[str, Any] = {"ingressClassName": draw(st.sampled_from(["nginx"] * 5 + ["other"]))}
    if rules:
        spec["rules"] = rules
    if draw(st.booleans()):
        named = [rule["host"] for rule in rules if "host" in rule]
        listed = named if named and draw(st.booleans()) else draw(st.lists(st.sampled_from([h for h in HOSTS if h]),
                                                                          max_size=2))
        spec["tls"] = [{"hosts": listed,
                        "secretName": draw(st.sampled_from(["tls-x", "tls-y", "missing"]))}]
    if draw(st.integers(0, 4)) == 0:
        spec["defaultBackend"] = {"service": {"name": draw(st.sampled_from(SERVICES)), "port": {"number": 80}}}
    annotations: dict[str, str] = {}
    for choice in draw(st.lists(st.sampled_from([
            {"from-to-www-redirect": "true"}, {"server-alias": "alias.test"}, {"server-alias": "y.test"},
            {"server-alias": "www.x.test"},
            {"canary": "true", "canary-weight": "50"}, {"ssl-passthrough": "true"}, {"use-regex": "true"},
            {"auth-type": "basic", "auth-secret": "auth"}, {"custom-headers": "headers"},
            {"auth-tls-secret": f"{namespace}/ca"}, {"proxy-ssl-secret": "ca", "backend-protocol": "HTTPS"},
            {"service-upstream": "true"}, {"default-backend": "s2"}, {"app-root": "/app"},
            {"proxy-body-size": "1m"}, {"proxy-body-size": "x"}, {"ssl-redirect": "false"},
            {"rewrite-target": "/$1"}, {"auth-url": "http://auth.example.com/check", "auth-keepalive": "4"}]), max_size=draw(st.sampled_from([0, 0, 1, 2, 3])))):
        annotations.update(choice)
    meta = _meta(draw(st.sampled_from(["i1", "i2", "i3", "i4"])), namespace,
                 creationTimestamp=f"2024-01-01T00:00:0{draw(st.integers(0, 3))}Z")
    if annotations:
        meta["annotations"] = {f"{PREFIX}/{k}": v for k, v in annotations.items()}
    return {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": meta, "spec": spec}


@st.composite
def services(draw: st.DrawFn) -> dict[str, Any]:
    spec: dict[str, Any] = {"ports": draw(st.sampled_from([[{"name": "http", "port": 80}], [{"port": 80}],
                                                          [{"name": "http", "port": 81}]]))}
    kind = draw(st.sampled_from(["ClusterIP", "ClusterIP", "headless", "ExternalName"]))
    if kind == "ExternalName":
        spec.update(type="ExternalName", externalName="ext.example.com")
    else:
        spec.update(type="ClusterIP", clusterIP="None" if kind == "headless" else "10.96.0.10")
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": _meta(draw(st.sampled_from(SERVICES)), draw(st.sampled_from(NAMESPACES))), "spec": spec}


@st.composite
def endpoint_slices(draw: st.DrawFn) -> dict[str, Any]:
    addresses = draw(st.lists(st.sampled_from(["10.0.0.1", "10.0.0.2", "fd00::1"]), max_size=2))
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": "IPv4",
            "metadata": _meta(draw(st.sampled_from(["e1", "e2", "e3"])), draw(st.sampled_from(NAMESPACES)),
                              labels={"kubernetes.io/service-name": draw(st.sampled_from(SERVICES))}),
            "ports": [{"name": draw(st.sampled_from(["http", ""])), "port": 8080}],
            "endpoints": [{"addresses": [address], "conditions": {"ready": draw(st.booleans())}}
                          for address in addresses]}


@st.composite
def secrets(draw: st.DrawFn) -> dict[str, Any]:
    namespace = draw(st.sampled_from(NAMESPACES))
    which = draw(st.sampled_from(["tls-x", "tls-y", "auth", "auth-bad", "ca"]))
    if which == "tls-x":
        crt, key = _pem("/CN=x.test", ("x.test", "www.x.test"))
    elif which == "tls-y":
        crt, key = _pem("/CN=y.test", ("y.test", "*.y.test"))
    elif which.startswith("auth"):
        secret = basic_auth_secret("auth", {"alice": "pw"}, namespace=namespace, scheme="sha")
        if which == "auth-bad":
            secret["data"] = {"auth": base64.b64encode(b"alice:plain\n").decode()}
        return secret
    else:
        crt, key = _pem("/CN=ca", ("ca.test",))
        return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": _meta("ca", namespace),
                "data": {"ca.crt": crt}}
    return {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls", "metadata": _meta(which, namespace),
            "data": {"tls.crt": crt, "tls.key": key}}


@st.composite
def configmaps(draw: st.DrawFn) -> dict[str, Any]:
    if draw(st.booleans()):
        data = draw(st.sampled_from([{}, {"global-allowed-response-headers": "X-Tenant"}, {"ssl-redirect": "false"},
                                     {"use-regex": "x"}, {"strict-host-ownership": "true"}]))
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta("controller", "ingress"), "data": data}
    data = draw(st.sampled_from([{"X-Tenant": "a"}, {"X Bad": "v"}]))
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": _meta("headers", draw(st.sampled_from(NAMESPACES))), "data": data}


def ingress_class(controller: str) -> dict[str, Any]:
    return {"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass", "metadata": {"name": "nginx"},
            "spec": {"controller": controller}}


_keep = st.sampled_from([True, True, True, False])  # deleted one time in four
# A step: objects written (or deleted) together, as one sync sees them. Mostly Ingresses; now and then the
# IngressClass (which decides whose Ingresses are ours) changes, goes or comes back.
_writes = st.one_of(*[st.tuples(ingresses(), _keep)] * 5, *[st.tuples(objects, _keep) for objects in (
    services(), endpoint_slices(), endpoint_slices(), secrets(), secrets(), configmaps())],
    st.tuples(st.sampled_from(["k8s.io/ingress-nginx"] * 4 + ["example.com/other"]).map(ingress_class),
              st.sampled_from([True] * 5 + [False])))
steps = st.lists(st.lists(_writes, min_size=1, max_size=3), min_size=5, max_size=30)


def populated() -> dict[str, dict[str, Any]]:
    """Services with endpoints, Secrets and ConfigMaps for the Ingresses to use, before the first step."""
    objects = [ingress_class("k8s.io/ingress-nginx"),
               {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta("controller", "ingress"),
                "data": {"global-allowed-response-headers": "X-Tenant"}}]
    for namespace in NAMESPACES:
        for i, service in enumerate(SERVICES):
            objects.append({"apiVersion": "v1", "kind": "Service", "metadata": _meta(service, namespace),
                            "spec": {"type": "ClusterIP", "clusterIP": f"10.96.0.{i}",
                                     "ports": [{"name": "http", "port": 80}]}})
            objects.append({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": "IPv4",
                            "metadata": _meta(f"e{i + 1}", namespace,
                                              labels={"kubernetes.io/service-name": service}),
                            "ports": [{"name": "http", "port": 8080}],
                            "endpoints": [{"addresses": [f"10.0.{i}.1"]}]})
        crt, key = _pem("/CN=x.test", ("x.test", "www.x.test"))
        objects.append({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                        "metadata": _meta("tls-x", namespace), "data": {"tls.crt": crt, "tls.key": key}})
        objects.append(basic_auth_secret("auth", {"alice": "pw"}, namespace=namespace, scheme="sha"))
        objects.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta("headers", namespace),
                        "data": {"X-Tenant": "a"}})
    return {object_key(obj): obj for obj in objects}


@settings(deadline=None, max_examples=300, derandomize=True, database=None)
@given(first=st.lists(ingresses(), min_size=2, max_size=8), steps=steps)
def test_the_incremental_model_equals_the_full_build_after_every_step(first, steps):
    store = populated()
    store.update((object_key(ingress), ingress) for ingress in first)
    follow_and_compare(store, steps)


def follow_and_compare(store: dict[str, dict[str, Any]], steps: list[list[tuple[dict[str, Any], bool]]]) -> None:
    """Write (or delete) each step's objects in `store`; after each, the incremental model equals the full build."""
    incremental = IncrementalModel(SETTINGS)
    previous = incremental.update(store, None)
    assert previous == build_model(store, settings=SETTINGS)
    for step in steps:
        changed = set()
        for obj, keep in step:
            key = object_key(obj)
            if keep:
                store[key] = obj
            else:
                store.pop(key, None)
            changed.add(key)
        expected = build_model(store, settings=SETTINGS)
        model = incremental.update(store, changed)
        assert model == expected, sorted(changed)
        # What the tables are pushed by: every host and backend that differs from the last model is marked changed.
        for table, marked in (("routes", model.changed.routes), ("backends", model.changed.backends)):
            before, after = getattr(previous, table), getattr(model, table)
            if marked is not None:
                assert {key for key in before.keys() | after.keys() if before.get(key) != after.get(key)} <= marked
        if model.changed.certificates is not None:
            delta = certificates_delta(previous.certificates, model.certificates) or {"set": {}, "delete": []}
            assert {*delta["set"], *delta["delete"]} <= model.changed.certificates
        previous = model


# --- Gateway API objects beside the Ingresses ---------------------------------------------------------------------

_PARENT = {"name": "gw", "namespace": "a"}


def _listener(draw: st.DrawFn, index: int) -> dict[str, Any]:
    hostname = draw(st.sampled_from(["y.test", "*.y.test", "x.test", None]))
    namespaces = draw(st.sampled_from([None, {"from": "All"}, {"from": "Same"},
                                       {"from": "Selector", "selector": {"matchLabels": {"team": "blue"}}}]))
    kind = draw(st.sampled_from(["http", "http", "https", "passthrough"]))
    name = f"l{index}"
    if kind == "https":
        return gateway_objects.listener(name, port=443, protocol="HTTPS", hostname=hostname, namespaces=namespaces,
                                        certificate="tls-x", certificate_namespace=draw(st.sampled_from([None, "b"])))
    return gateway_objects.listener(name, hostname=hostname, namespaces=namespaces, passthrough=kind == "passthrough")


@st.composite
def gateway_api_objects(draw: st.DrawFn) -> dict[str, Any]:
    """A GatewayClass, the Gateway, an HTTPRoute, a TLSRoute, a ReferenceGrant or a Namespace's labels."""
    namespace = draw(st.sampled_from(NAMESPACES))
    other = "b" if namespace == "a" else "a"
    created = f"2024-01-01T00:00:0{draw(st.integers(0, 3))}Z"
    hostnames = draw(st.lists(st.sampled_from(["x.test", "y.test", "z.y.test", "*.y.test"]), max_size=2, unique=True))
    which = draw(st.sampled_from(["class", "gateway", "route", "route", "route", "tls", "grant", "namespace"]))
    if which == "class":
        return gateway_objects.gateway_class(controller=draw(st.sampled_from([gateway_objects.CONTROLLER] * 3
                                                                               + ["example.com/other"])))
    if which == "gateway":
        count = draw(st.integers(1, 3))
        return gateway_objects.gateway(ns="a", listeners=[_listener(draw, i) for i in range(count)])
    if which == "route":
        rules = [gateway_objects.rule(
            gateway_objects.backend_ref(draw(st.sampled_from(SERVICES)), ns=draw(st.sampled_from([None, other])),
                                        weight=draw(st.sampled_from([None, 0, 3]))),
            matches=[gateway_objects.path_match(draw(st.sampled_from(["/", "/api", "/new"])),
                                                draw(st.sampled_from(["PathPrefix", "Exact"])))])
            for _ in range(draw(st.integers(1, 2)))]
        return gateway_objects.http_route(draw(st.sampled_from(["r1", "r2", "r3"])), ns=namespace, parents=[_PARENT],
                                          hostnames=hostnames, rules=rules, created=created)
    if which == "tls":
        return gateway_objects.tls_route("t1", gateway_objects.backend_ref(draw(st.sampled_from(SERVICES))),
                                         ns=namespace, parents=[_PARENT], hostnames=hostnames, created=created)
    if which == "grant":
        return gateway_objects.reference_grant(draw(st.sampled_from(["g1", "g2"])), ns=namespace,
                                               from_namespace=other, to_kind=draw(st.sampled_from(["Service", "Secret"])))
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": namespace, "labels": draw(st.sampled_from([{}, {"team": "blue"}]))}}


_gateway_writes = st.one_of(*[st.tuples(gateway_api_objects(), _keep)] * 4, _writes)


@settings(deadline=None, max_examples=200, derandomize=True, database=None)
@given(first=st.lists(gateway_api_objects(), min_size=3, max_size=10),
       steps=st.lists(st.lists(_gateway_writes, min_size=1, max_size=3), min_size=5, max_size=25))
def test_the_incremental_model_with_gateway_api_objects_equals_the_full_build(first, steps):
    store = populated()
    store.update((object_key(obj), obj) for obj in [gateway_objects.gateway_class(), *first])
    follow_and_compare(store, steps)

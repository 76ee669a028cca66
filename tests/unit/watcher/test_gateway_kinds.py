"""The Gateway API kinds a manifests directory may hold, as the store keeps them (docs/gateway-api.md)."""
from services.common.objects import object_key
from services.common.settings import Settings
from services.watcher.filters import keep
from services.watcher.manifest_objects import objects_of
from services.watcher.manifest_parser import parse_manifest


def check(text: str):
    objects, problems = [], []
    for doc in parse_manifest("f.yaml", text.encode()):
        accepted, rejected = objects_of(doc, "f.yaml")
        objects += accepted
        problems += [str(p) for p in rejected]
    return objects, problems


def test_gateway_kinds_are_read_and_kept_with_gatewayclass_cluster_scoped():
    objects, problems = check("""
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: pyngress, namespace: ignored}
spec: {controllerName: pyngress.io/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: infra}
spec: {gatewayClassName: pyngress, listeners: [{name: http, port: 80, protocol: HTTP}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: web}
spec: {parentRefs: [{name: gw, namespace: infra}]}
---
apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: from-web, namespace: infra}
spec: {from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: default}], to: [{group: "", kind: Service}]}
""")
    assert problems == []
    assert [object_key(obj) for obj in objects] == [
        "GatewayClass//pyngress", "Gateway/infra/gw", "HTTPRoute/default/web", "ReferenceGrant/infra/from-web"]
    assert all(keep(obj, Settings()) for obj in objects)


def test_an_unserved_gateway_api_version_is_refused_saying_which_to_use():
    _, problems = check("""
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: HTTPRoute
metadata: {name: web}
""")
    assert problems == ["f.yaml:2, document 1: HTTPRoute apiVersion gateway.networking.k8s.io/v1alpha2 is not "
                        "served; use gateway.networking.k8s.io/v1; document skipped"]

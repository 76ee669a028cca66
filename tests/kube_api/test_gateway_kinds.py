"""The test API server serves the Gateway API kinds as their CRDs make a real one serve them, through the official
client's CustomObjectsApi and DynamicClient."""
from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
from kubernetes import client, watch
from kubernetes.dynamic import DynamicClient

from tests.kube_api import KubeApiServer

GROUP = "gateway.networking.k8s.io"


def _gateway(name: str = "edge", listeners: list[dict] | None = None) -> dict:
    return {"apiVersion": f"{GROUP}/v1", "kind": "Gateway", "metadata": {"name": name},
            "spec": {"gatewayClassName": "pyngress",
                     "listeners": listeners or [{"name": "http", "protocol": "HTTP", "port": 80}]}}


def _route(name: str = "web", status: dict | None = None) -> dict:
    route = {"apiVersion": f"{GROUP}/v1", "kind": "HTTPRoute", "metadata": {"name": name},
             "spec": {"parentRefs": [{"name": "edge"}], "rules": [{"backendRefs": [{"name": "web", "port": 80}]}]}}
    if status:
        route["status"] = status
    return route


def _grant(version: str) -> dict:
    return {"apiVersion": f"{GROUP}/{version}", "kind": "ReferenceGrant", "metadata": {"name": "certs"},
            "spec": {"from": [{"group": GROUP, "kind": "Gateway", "namespace": "infra"}],
                     "to": [{"group": "", "kind": "Secret"}]}}


@pytest.fixture
def custom(k8s) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(k8s.api_client)


def _error(call, *args) -> tuple[int, dict]:
    with pytest.raises(client.ApiException) as caught:
        call(*args)
    return caught.value.status, json.loads(caught.value.body)


def test_discovery_lists_each_kind_at_its_versions_for_the_dynamic_client(k8s):
    dynamic = DynamicClient(k8s.api_client)
    for kind, versions, namespaced in (("GatewayClass", ["v1"], False), ("Gateway", ["v1"], True),
                                       ("HTTPRoute", ["v1"], True), ("GRPCRoute", ["v1"], True),
                                       ("ReferenceGrant", ["v1", "v1beta1"], True),
                                       ("TLSRoute", ["v1", "v1alpha2"], True),
                                       ("BackendTLSPolicy", ["v1", "v1alpha3"], True)):
        for version in versions:
            resource = dynamic.resources.get(api_version=f"{GROUP}/{version}", kind=kind)
            assert resource.namespaced is namespaced, (kind, version)
    group = client.ApisApi(k8s.api_client).get_api_versions()
    [gateway_group] = [g for g in group.groups if g.name == GROUP]
    assert [v.version for v in gateway_group.versions] == ["v1", "v1beta1", "v1alpha2", "v1alpha3"]
    assert gateway_group.preferred_version.version == "v1"
    routes = dynamic.resources.get(api_version=f"{GROUP}/v1", kind="HTTPRoute")
    routes.create(body=_route(), namespace="default")
    assert [item.metadata.name for item in routes.get(namespace="default").items] == ["web"]


def test_create_get_list_and_patch_through_custom_objects(custom):
    created = custom.create_namespaced_custom_object(GROUP, "v1", "default", "httproutes", _route())
    meta = created["metadata"]
    assert meta["uid"] and meta["generation"] == 1 and int(meta["resourceVersion"]) > 0
    assert custom.get_namespaced_custom_object(GROUP, "v1", "default", "httproutes", "web") == created
    listed = custom.list_cluster_custom_object(GROUP, "v1", "httproutes")
    assert listed["kind"] == "HTTPRouteList" and listed["items"] == [created]  # items keep kind and apiVersion
    patched = custom.patch_namespaced_custom_object(GROUP, "v1", "default", "httproutes", "web",
                                                    {"spec": {"hostnames": ["web.example.com"]}})
    assert patched["spec"]["hostnames"] == ["web.example.com"] and patched["metadata"]["generation"] == 2
    labelled = custom.patch_namespaced_custom_object(GROUP, "v1", "default", "httproutes", "web",
                                                     {"metadata": {"labels": {"team": "a"}}})
    assert labelled["metadata"]["generation"] == 2  # metadata is not spec
    assert int(labelled["metadata"]["resourceVersion"]) > int(patched["metadata"]["resourceVersion"])


def test_gatewayclasses_are_cluster_scoped(custom):
    custom.create_cluster_custom_object(GROUP, "v1", "gatewayclasses", {
        "apiVersion": f"{GROUP}/v1", "kind": "GatewayClass", "metadata": {"name": "pyngress", "namespace": "x"},
        "spec": {"controllerName": "pyngress.io/gateway-controller"}})
    got = custom.get_cluster_custom_object(GROUP, "v1", "gatewayclasses", "pyngress")
    assert "namespace" not in got["metadata"]


def test_status_is_written_only_through_the_status_subresource_and_does_not_bump_generation(custom):
    created = custom.create_namespaced_custom_object(GROUP, "v1", "default", "httproutes",
                                                     _route(status={"parents": [{"controllerName": "forged"}]}))
    assert "status" not in created
    status = {"parents": [{"parentRef": {"name": "edge"}, "controllerName": "pyngress.io/gateway-controller",
                           "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted",
                                           "observedGeneration": 1, "message": "",
                                           "lastTransitionTime": "2026-01-01T00:00:00Z"}]}]}
    written = custom.patch_namespaced_custom_object_status(GROUP, "v1", "default", "httproutes", "web",
                                                           {"status": status})
    assert written["status"] == status and written["metadata"]["generation"] == 1
    ignored = custom.patch_namespaced_custom_object(GROUP, "v1", "default", "httproutes", "web",
                                                    {"status": {"parents": []}})
    assert ignored["status"] == status


def test_a_new_gateway_and_class_wait_for_their_controller(custom):
    gateway = custom.create_namespaced_custom_object(GROUP, "v1", "default", "gateways", _gateway())
    assert [(c["type"], c["status"], c["reason"]) for c in gateway["status"]["conditions"]] == [
        ("Accepted", "Unknown", "Pending"), ("Programmed", "Unknown", "Pending")]


def test_reference_grants_and_tls_routes_are_the_same_objects_at_each_version(custom):
    custom.create_namespaced_custom_object(GROUP, "v1beta1", "default", "referencegrants", _grant("v1beta1"))
    at_v1 = custom.get_namespaced_custom_object(GROUP, "v1", "default", "referencegrants", "certs")
    at_beta = custom.get_namespaced_custom_object(GROUP, "v1beta1", "default", "referencegrants", "certs")
    assert (at_v1["apiVersion"], at_beta["apiVersion"]) == (f"{GROUP}/v1", f"{GROUP}/v1beta1")
    assert {**at_v1, "apiVersion": ""} == {**at_beta, "apiVersion": ""}
    route = {"apiVersion": f"{GROUP}/v1alpha2", "kind": "TLSRoute", "metadata": {"name": "db"},
             "spec": {"parentRefs": [{"name": "edge"}], "rules": [{"backendRefs": [{"name": "db", "port": 5432}]}]}}
    custom.create_namespaced_custom_object(GROUP, "v1alpha2", "default", "tlsroutes", route)
    assert [i["apiVersion"] for i in custom.list_cluster_custom_object(GROUP, "v1", "tlsroutes")["items"]] == [
        f"{GROUP}/v1"]


def test_a_watch_sees_changes_at_the_version_it_asked_for(api: KubeApiServer, custom):
    listed = custom.list_namespaced_custom_object(GROUP, "v1beta1", "default", "referencegrants")
    custom.create_namespaced_custom_object(GROUP, "v1", "default", "referencegrants", _grant("v1"))
    custom.delete_namespaced_custom_object(GROUP, "v1", "default", "referencegrants", "certs")
    events = watch.Watch().stream(custom.list_namespaced_custom_object, GROUP, "v1beta1", "default",
                                  "referencegrants", resource_version=listed["metadata"]["resourceVersion"],
                                  timeout_seconds=1)
    assert [(e["type"], e["object"]["apiVersion"]) for e in events] == [
        ("ADDED", f"{GROUP}/v1beta1"), ("DELETED", f"{GROUP}/v1beta1")]


@pytest.mark.parametrize("plural, body, field", [
    ("gateways", {**_gateway(), "spec": {"listeners": [{"name": "http", "protocol": "HTTP", "port": 80}]}},
     "spec.gatewayClassName"),
    ("gateways", _gateway(listeners=[{"name": "http", "port": 80}]), "spec.listeners[0].protocol"),
    ("httproutes", {**_route(), "spec": {"parentRefs": [{"sectionName": "http"}]}}, "spec.parentRefs[0].name"),
    ("httproutes", {"apiVersion": f"{GROUP}/v1", "kind": "HTTPRoute", "metadata": {"name": "x"}}, "spec"),
    ("referencegrants", {**_grant("v1"), "spec": {"from": [{"group": GROUP, "kind": "Gateway"}],
                                                  "to": [{"group": "", "kind": "Secret"}]}}, "spec.from[0].namespace"),
])
def test_the_crds_required_fields_are_refused_with_the_field_named(custom, plural, body, field):
    status, error = _error(custom.create_namespaced_custom_object, GROUP, "v1", "default", plural, body)
    assert status == 422 and error["reason"] == "Invalid"
    assert error["details"]["causes"] == [{"reason": "FieldValueRequired", "message": "Required value", "field": field}]
    assert error["message"].endswith(f"is invalid: {field}: Required value")


def test_listener_names_are_unique_and_a_gateway_has_at_least_one(custom):
    twice = [{"name": "http", "protocol": "HTTP", "port": 80}, {"name": "http", "protocol": "HTTP", "port": 8080}]
    assert _error(custom.create_namespaced_custom_object, GROUP, "v1", "default", "gateways",
                  _gateway(listeners=twice))[0] == 422
    custom.create_namespaced_custom_object(GROUP, "v1", "default", "gateways", _gateway())
    status, error = _error(custom.patch_namespaced_custom_object, GROUP, "v1", "default", "gateways", "edge",
                           {"spec": {"listeners": []}})
    assert status == 422 and error["details"]["causes"][0]["field"] == "spec.listeners"


def test_strategic_merge_patch_is_refused_for_custom_resources(api: KubeApiServer, custom):
    custom.create_namespaced_custom_object(GROUP, "v1", "default", "httproutes", _route())
    request = urllib.request.Request(f"{api.url}/apis/{GROUP}/v1/namespaces/default/httproutes/web", method="PATCH",
                                     data=json.dumps({"spec": {"hostnames": ["a.example.com"]}}).encode(),
                                     headers={"Content-Type": "application/strategic-merge-patch+json"})
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=10)
    assert caught.value.code == 415 and json.loads(caught.value.read())["reason"] == "UnsupportedMediaType"


def test_without_the_crds_the_kinds_are_not_found_until_installed(k8s):
    with KubeApiServer(gateway_api=False) as api:
        api_client = client.ApiClient(api.configuration())
        custom = client.CustomObjectsApi(api_client)
        groups = [g.name for g in client.ApisApi(api_client).get_api_versions().groups]
        assert GROUP not in groups
        assert _error(custom.list_cluster_custom_object, GROUP, "v1", "httproutes")[0] == 404
        api.install_gateway_api()
        assert custom.list_cluster_custom_object(GROUP, "v1", "httproutes")["items"] == []
        api_client.close()

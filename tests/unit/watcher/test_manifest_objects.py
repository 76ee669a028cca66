import pytest

from services.watcher.manifest_objects import ACCEPTED_KINDS, objects_of
from services.watcher.manifest_parser import parse_manifest


def check(text: str):
    objects, problems = [], []
    for doc in parse_manifest("f.yaml", text.encode()):
        accepted, rejected = objects_of(doc, "f.yaml")
        objects += accepted
        problems += [str(p) for p in rejected]
    return objects, problems


def test_namespace_defaults_for_namespaced_kinds_and_is_dropped_for_cluster_scoped():
    objects, problems = check("""
apiVersion: v1
kind: Service
metadata: {name: web}
---
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: nginx, namespace: ignored}
""")
    assert problems == []
    assert objects[0]["metadata"] == {"name": "web", "namespace": "default"}
    assert objects[1]["metadata"] == {"name": "nginx"}


def test_list_items_are_flattened_and_bad_items_skipped_with_their_line():
    objects, problems = check("""apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: a, namespace: x}
- apiVersion: v1
  kind: ConfigMap
  metadata: {}
""")
    assert [o["metadata"]["name"] for o in objects] == ["a"]
    assert problems == ["f.yaml:7, document 1 item 2: metadata.name is missing; item skipped"]


def test_typed_lists_as_kubectl_get_prints_them():
    objects, _ = check("apiVersion: v1\nkind: ServiceList\nitems:\n- {apiVersion: v1, kind: Service, metadata: {name: a}}\n")
    assert objects[0]["kind"] == "Service"


@pytest.mark.parametrize("document, message", [
    ("apiVersion: v1\nmetadata: {name: a}", "kind is missing"),
    ("kind: Service\nmetadata: {name: a}", "apiVersion is missing"),
    ("apiVersion: v1\nkind: Service\n", "metadata is missing"),
    ("apiVersion: v1\nkind: Service\nmetadata: {generateName: a-}", "metadata.name is missing (generateName"),
    ("apiVersion: v1\nkind: Service\nmetadata: {name: Web_1}", "metadata.name 'Web_1' is not a valid name"),
    ("apiVersion: v1\nkind: Service\nmetadata: {name: a/b}", "is not a valid name"),
    ("apiVersion: v1\nkind: Service\nmetadata: {name: a, namespace: a.b}", "is not a valid namespace"),
    ("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: a}", "kind Deployment is not read by pyngress; accepted kinds: Ingress (networking.k8s.io/v1)"),
    ("apiVersion: extensions/v1beta1\nkind: Ingress\nmetadata: {name: a}", "Ingress apiVersion extensions/v1beta1 is not served; use networking.k8s.io/v1"),
    ("apiVersion: v1\nkind: Service\nmetadata:\n  name: a\n  annotations: {x/ssl-redirect: false}",
     'metadata.annotations["x/ssl-redirect"] must be a string; quote the value: "false"'),
    ("apiVersion: v1\nkind: Service\nmetadata: {name: a, labels: {n: 1}}", "metadata.labels[\"n\"] must be a string"),
    ("apiVersion: v1\nkind: Secret\nmetadata: {name: a}\ndata: {x: !!binary aGk=}", ".data.x is a YAML bytes"),
    ("apiVersion: v1\nkind: Secret\nmetadata: {name: a}\ndata: {1: x}", "key 1 under .data is not a string"),
    ("apiVersion: v1\nkind: Service\nmetadata: {name: a, creationTimestamp: yesterday}", "is not RFC 3339"),
    ("- a\n- b", "a list is not a Kubernetes object"),
])
def test_invalid_documents_are_skipped_with_file_document_and_line(document, message):
    objects, problems = check("apiVersion: v1\nkind: Service\nmetadata: {name: ok}\n---\n" + document)
    assert [o["metadata"]["name"] for o in objects] == ["ok"]
    assert len(problems) == 1
    assert problems[0].startswith("f.yaml:5, document 2: ")
    assert message in problems[0]
    assert problems[0].endswith("document skipped")


def test_given_creation_timestamp_is_kept_in_utc_form_and_null_dropped():
    objects, _ = check("""apiVersion: v1
kind: Service
metadata: {name: a, creationTimestamp: "2024-01-31T14:00:00+02:00"}
---
apiVersion: v1
kind: Service
metadata: {name: b, creationTimestamp: null}
""")
    assert objects[0]["metadata"]["creationTimestamp"] == "2024-01-31T12:00:00Z"
    assert "creationTimestamp" not in objects[1]["metadata"]


def test_every_kind_the_syncer_reads_is_accepted_and_namespaces_for_their_labels():
    assert set(ACCEPTED_KINDS) == {"Ingress", "IngressClass", "Service", "EndpointSlice", "Secret",
                                   "ConfigMap", "Node", "Namespace",
                                   "GatewayClass", "Gateway", "HTTPRoute", "GRPCRoute", "TLSRoute", "ReferenceGrant",
                                   "BackendTLSPolicy"}

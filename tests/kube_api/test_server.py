"""The test API server, driven by the official kubernetes client: one test per semantic it implements."""
from __future__ import annotations

import base64
import json
import threading
import time
from typing import Any, Callable

import pytest
from kubernetes import client, watch
from kubernetes.dynamic import DynamicClient

from tests.kube_api import KubeApiServer


def raw(call: Callable[..., Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
    """The JSON the server sent, not the client's typed model."""
    return json.loads(call(*args, _preload_content=False, **kwargs).data)


def api_error(call: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[int, dict[str, Any]]:
    with pytest.raises(client.ApiException) as info:
        call(*args, **kwargs)
    return info.value.status, json.loads(info.value.body)


def events(call: Callable[..., Any], *args: Any, **kwargs: Any) -> list[tuple[str, dict[str, Any]]]:
    """Every event of a watch that ends by its timeoutSeconds (or by an error)."""
    kwargs.setdefault("timeout_seconds", 1)
    return [(e["type"], e["raw_object"]) for e in watch.Watch().stream(call, *args, **kwargs)]


def configmap(name: str, **fields: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, **fields.pop("metadata", {})}, **fields}


def ingress(name: str, host: str = "a.example") -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"rules": [{"host": host}]}}


class WatchInThread:
    """A watch read in a thread, for what happens to a watch that is open while something else happens."""

    def __init__(self, api: KubeApiServer, call: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        self.events: list[str] = []
        self.error: Exception | None = None
        opened = api.open_watches
        self._thread = threading.Thread(target=self._run, args=(call, args, kwargs), daemon=True)
        self._thread.start()
        while api.open_watches == opened:
            time.sleep(0.01)

    def _run(self, call: Callable[..., Any], args: Any, kwargs: Any) -> None:
        try:
            for event in watch.Watch().stream(call, *args, timeout_seconds=30, **kwargs):
                self.events.append(event["type"])
        except Exception as err:  # what the client raises is what the test looks at
            self.error = err

    def join(self) -> None:
        self._thread.join(30)


# --- discovery ---

def test_discovery_lists_core_and_group_resources_with_namespaced_flags_verbs_and_status(k8s):
    core = raw(k8s.core.get_api_resources)
    by_name = {r["name"]: r for r in core["resources"]}
    assert by_name["services"]["namespaced"] is True and by_name["services"]["kind"] == "Service"
    assert by_name["nodes"]["namespaced"] is False
    assert "watch" in by_name["secrets"]["verbs"]
    assert by_name["services/status"]["verbs"] == ["get", "patch", "update"]
    groups = raw(client.ApisApi(k8s.api_client).get_api_versions)
    assert {g["name"] for g in groups["groups"]} == {"networking.k8s.io", "discovery.k8s.io", "coordination.k8s.io",
                                                     "rbac.authorization.k8s.io", "admissionregistration.k8s.io",
                                                     "gateway.networking.k8s.io"}
    dynamic = DynamicClient(k8s.api_client)
    ingresses = dynamic.resources.get(api_version="networking.k8s.io/v1", kind="Ingress")
    assert ingresses.namespaced and ingresses.name == "ingresses"
    assert not dynamic.resources.get(api_version="networking.k8s.io/v1", kind="IngressClass").namespaced
    assert dynamic.resources.get(api_version="coordination.k8s.io/v1", kind="Lease").namespaced


# --- create, get, server-set fields ---

def test_create_sets_uid_creation_timestamp_resource_version_and_generation(k8s):
    created = raw(k8s.core.create_namespaced_config_map, "default", configmap("a", data={"k": "v"}))
    meta = created["metadata"]
    assert meta["uid"] and meta["creationTimestamp"].endswith("Z")
    assert int(meta["resourceVersion"]) > 0 and meta["generation"] == 1
    assert created["kind"] == "ConfigMap" and created["apiVersion"] == "v1"
    assert raw(k8s.core.read_namespaced_config_map, "a", "default") == created


def test_client_supplied_uid_and_timestamps_are_overwritten(k8s):
    created = k8s.core.create_namespaced_config_map(
        "default", configmap("a", metadata={"uid": "mine", "creationTimestamp": "2000-01-01T00:00:00Z"}))
    assert created.metadata.uid != "mine"
    assert created.metadata.creation_timestamp.year > 2000


def test_resource_version_is_one_counter_across_all_kinds(k8s):
    first = int(k8s.core.create_namespaced_config_map("default", configmap("a")).metadata.resource_version)
    second = int(k8s.networking.create_namespaced_ingress("default", ingress("b")).metadata.resource_version)
    third = int(k8s.core.create_namespaced_secret("default", configmap("c")).metadata.resource_version)
    assert first < second < third


def test_namespace_comes_from_the_url(k8s):
    k8s.core.create_namespace({"metadata": {"name": "team"}})
    created = k8s.core.create_namespaced_config_map("team", configmap("a"))
    assert created.metadata.namespace == "team"
    status, body = api_error(k8s.core.create_namespaced_config_map, "default",
                             configmap("b", metadata={"namespace": "team"}))
    assert status == 400 and body["reason"] == "BadRequest"


def test_create_in_a_missing_namespace_is_404(k8s):
    status, body = api_error(k8s.core.create_namespaced_config_map, "nowhere", configmap("a"))
    assert status == 404 and body["details"]["kind"] == "namespaces"


def test_duplicate_create_is_409_already_exists(k8s):
    k8s.core.create_namespaced_config_map("default", configmap("a"))
    status, body = api_error(k8s.core.create_namespaced_config_map, "default", configmap("a"))
    assert status == 409 and body["reason"] == "AlreadyExists" and body["kind"] == "Status"


def test_missing_object_is_404_with_a_status_object(k8s):
    status, body = api_error(k8s.networking.read_namespaced_ingress, "nope", "default")
    assert status == 404
    assert body == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": 'ingresses.networking.k8s.io "nope" not found', "reason": "NotFound",
                    "details": {"name": "nope", "group": "networking.k8s.io", "kind": "ingresses"}, "code": 404}


def test_invalid_name_is_422_invalid(k8s):
    status, body = api_error(k8s.core.create_namespaced_config_map, "default", configmap("Not_Valid"))
    assert status == 422 and body["reason"] == "Invalid"
    assert body["details"]["causes"][0]["field"] == "metadata.name"
    status, _ = api_error(k8s.core.create_namespaced_service, "default", configmap("1-starts-with-digit"))
    assert status == 422  # Service names are DNS-1035 labels


def test_generate_name_makes_a_unique_name(k8s):
    first = k8s.core.create_namespaced_config_map("default", {"metadata": {"generateName": "cm-"}})
    second = k8s.core.create_namespaced_config_map("default", {"metadata": {"generateName": "cm-"}})
    assert first.metadata.name.startswith("cm-") and first.metadata.name != second.metadata.name


def test_secret_string_data_is_folded_into_data(k8s):
    created = raw(k8s.core.create_namespaced_secret, "default", {"metadata": {"name": "s"}, "stringData": {"k": "v"}})
    assert created["data"] == {"k": base64.b64encode(b"v").decode()} and "stringData" not in created
    assert created["type"] == "Opaque"


def test_service_gets_a_cluster_ip_that_an_update_without_it_keeps(k8s):
    created = k8s.core.create_namespaced_service("default", {"metadata": {"name": "web"},
                                                             "spec": {"ports": [{"port": 80}]}})
    assert created.spec.cluster_ip and created.spec.ports[0].target_port == 80
    replaced = raw(k8s.core.replace_namespaced_service, "web", "default",
                   {"metadata": {"name": "web"}, "spec": {"ports": [{"port": 81}]}})
    assert replaced["spec"]["clusterIP"] == created.spec.cluster_ip


# --- updates ---

def test_generation_bumps_only_when_the_spec_changes(k8s):
    k8s.networking.create_namespaced_ingress("default", ingress("i"))
    labelled = k8s.networking.patch_namespaced_ingress("i", "default", {"metadata": {"labels": {"a": "b"}}})
    assert labelled.metadata.generation == 1
    status_set = k8s.networking.patch_namespaced_ingress_status(
        "i", "default", {"status": {"loadBalancer": {"ingress": [{"ip": "10.0.0.1"}]}}})
    assert status_set.metadata.generation == 1
    respecced = k8s.networking.patch_namespaced_ingress("i", "default", {"spec": {"rules": [{"host": "b.example"}]}})
    assert respecced.metadata.generation == 2


def test_an_update_that_changes_nothing_keeps_the_resource_version(k8s):
    created = k8s.core.create_namespaced_config_map("default", configmap("a", data={"k": "v"}))
    patched = k8s.core.patch_namespaced_config_map("a", "default", {"data": {"k": "v"}})
    assert patched.metadata.resource_version == created.metadata.resource_version


def test_replace_with_a_stale_resource_version_is_409_conflict(k8s):
    created = raw(k8s.core.create_namespaced_config_map, "default", configmap("a", data={"k": "1"}))
    k8s.core.patch_namespaced_config_map("a", "default", {"data": {"k": "2"}})
    stale = {**created, "data": {"k": "3"}}
    status, body = api_error(k8s.core.replace_namespaced_config_map, "a", "default", stale)
    assert status == 409 and body["reason"] == "Conflict"


def test_replace_with_the_current_resource_version_succeeds(k8s):
    created = raw(k8s.core.create_namespaced_config_map, "default", configmap("a", data={"k": "1"}))
    replaced = k8s.core.replace_namespaced_config_map("a", "default", {**created, "data": {"k": "2"}})
    assert replaced.data == {"k": "2"}
    assert int(replaced.metadata.resource_version) > int(created["metadata"]["resourceVersion"])


def test_replace_of_a_missing_object_is_404(k8s):
    status, _ = api_error(k8s.core.replace_namespaced_config_map, "a", "default", configmap("a"))
    assert status == 404


def test_merge_patch_merges_objects_and_null_deletes(k8s):
    k8s.core.create_namespaced_config_map("default", configmap("a", data={"keep": "1", "drop": "2"}))
    patched = k8s.core.patch_namespaced_config_map("a", "default", {"data": {"drop": None, "new": "3"}},
                                                   _content_type="application/merge-patch+json")
    assert patched.data == {"keep": "1", "new": "3"}


def test_strategic_merge_patch_is_the_clients_default_and_merges_like_merge_patch(k8s):
    k8s.core.create_namespaced_config_map("default", configmap("a", data={"keep": "1"}))
    patched = k8s.core.patch_namespaced_config_map("a", "default", {"data": {"new": "2"}})
    assert patched.data == {"keep": "1", "new": "2"}


def test_json_patch_applies_operations_in_order(k8s):
    k8s.core.create_namespaced_config_map("default", configmap("a", data={"x": "1"}))
    patched = k8s.core.patch_namespaced_config_map("a", "default", [
        {"op": "test", "path": "/data/x", "value": "1"},
        {"op": "add", "path": "/data/y", "value": "2"},
        {"op": "move", "from": "/data/x", "path": "/data/z"},
        {"op": "replace", "path": "/data/y", "value": "3"},
    ])
    assert patched.data == {"y": "3", "z": "1"}
    status, _ = api_error(k8s.core.patch_namespaced_config_map, "a", "default",
                          [{"op": "test", "path": "/data/y", "value": "nope"}])
    assert status == 422


def test_patch_carrying_a_stale_resource_version_is_409_conflict(k8s):
    created = k8s.core.create_namespaced_config_map("default", configmap("a"))
    k8s.core.patch_namespaced_config_map("a", "default", {"data": {"k": "v"}})
    status, _ = api_error(k8s.core.patch_namespaced_config_map, "a", "default",
                          {"metadata": {"resourceVersion": created.metadata.resource_version}, "data": {"k": "w"}})
    assert status == 409


def test_server_side_apply_is_415(k8s):
    k8s.core.create_namespaced_config_map("default", configmap("a"))
    status, body = api_error(k8s.core.patch_namespaced_config_map, "a", "default", {"data": {}},
                             _content_type="application/apply-patch+yaml")
    assert status == 415 and body["reason"] == "UnsupportedMediaType"


def test_status_subresource_changes_only_the_status(k8s):
    k8s.networking.create_namespaced_ingress("default", ingress("i"))
    body = {**ingress("i", host="changed.example"), "status": {"loadBalancer": {"ingress": [{"ip": "10.0.0.1"}]}}}
    body["metadata"]["labels"] = {"new": "label"}
    updated = raw(k8s.networking.replace_namespaced_ingress_status, "i", "default", body)
    assert updated["status"]["loadBalancer"]["ingress"] == [{"ip": "10.0.0.1"}]
    assert updated["spec"]["rules"][0]["host"] == "a.example" and "labels" not in updated["metadata"]


def test_main_resource_ignores_status_for_kinds_with_a_status_subresource(k8s):
    k8s.networking.create_namespaced_ingress("default", ingress("i"))
    k8s.core.create_node({"metadata": {"name": "n"}})
    k8s.core.create_namespaced_service("default", {"metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}]}})
    lb = {"loadBalancer": {"ingress": [{"ip": "10.0.0.1"}]}}
    assert raw(k8s.networking.patch_namespaced_ingress, "i", "default", {"status": lb})["status"] == {"loadBalancer": {}}
    assert raw(k8s.core.patch_namespaced_service, "s", "default", {"status": lb})["status"] == {"loadBalancer": {}}
    assert "addresses" not in raw(k8s.core.patch_node, "n", {"status": {"addresses": [{"type": "x", "address": "y"}]}}).get("status", {})


def test_status_on_create_is_dropped_for_ingress_and_service(k8s):
    created = raw(k8s.networking.create_namespaced_ingress, "default",
                  {**ingress("i"), "status": {"loadBalancer": {"ingress": [{"ip": "10.0.0.1"}]}}})
    assert created["status"] == {"loadBalancer": {}}


# --- delete ---

def test_delete_returns_a_success_status_and_watchers_see_deleted_with_a_new_resource_version(k8s):
    created = k8s.core.create_namespaced_config_map("default", configmap("a"))
    result = raw(k8s.core.delete_namespaced_config_map, "a", "default")
    assert result["kind"] == "Status" and result["status"] == "Success"
    assert result["details"]["uid"] == created.metadata.uid
    seen = events(k8s.core.list_namespaced_config_map, "default", resource_version=created.metadata.resource_version)
    assert [t for t, _ in seen] == ["DELETED"]
    assert int(seen[0][1]["metadata"]["resourceVersion"]) > int(created.metadata.resource_version)
    assert api_error(k8s.core.read_namespaced_config_map, "a", "default")[0] == 404


def test_delete_with_a_failed_precondition_is_409(k8s):
    k8s.core.create_namespaced_config_map("default", configmap("a"))
    status, _ = api_error(k8s.core.delete_namespaced_config_map, "a", "default",
                          body={"preconditions": {"resourceVersion": "1"}})
    assert status == 409


def test_deleting_a_namespace_deletes_what_it_contains(k8s):
    k8s.core.create_namespace({"metadata": {"name": "gone"}})
    k8s.core.create_namespaced_config_map("gone", configmap("a"))
    k8s.core.delete_namespace("gone")
    assert k8s.core.list_config_map_for_all_namespaces(field_selector="metadata.namespace=gone").items == []


def test_delete_collection_deletes_the_selected_objects(k8s):
    k8s.core.create_namespaced_config_map("default", configmap("a", metadata={"labels": {"x": "1"}}))
    k8s.core.create_namespaced_config_map("default", configmap("b"))
    k8s.core.delete_collection_namespaced_config_map("default", label_selector="x=1")
    assert [c.metadata.name for c in k8s.core.list_namespaced_config_map("default").items] == ["b"]


# --- list ---

def test_list_carries_the_current_resource_version_in_its_metadata(k8s, api):
    k8s.core.create_namespaced_config_map("default", configmap("a"))
    listed = raw(k8s.core.list_namespaced_config_map, "default")
    assert listed["kind"] == "ConfigMapList" and listed["apiVersion"] == "v1"
    assert listed["metadata"]["resourceVersion"] == str(api.resource_version)


def test_list_items_carry_no_kind_or_api_version(k8s):
    k8s.core.create_namespaced_config_map("default", configmap("a"))
    item = raw(k8s.core.list_namespaced_config_map, "default")["items"][0]
    assert "kind" not in item and "apiVersion" not in item


def test_namespaced_and_all_namespaces_lists(k8s):
    k8s.core.create_namespace({"metadata": {"name": "other"}})
    k8s.core.create_namespaced_config_map("default", configmap("a"))
    k8s.core.create_namespaced_config_map("other", configmap("b"))
    assert [c.metadata.name for c in k8s.core.list_namespaced_config_map("other").items] == ["b"]
    assert sorted(c.metadata.name for c in k8s.core.list_config_map_for_all_namespaces().items) == ["a", "b"]


@pytest.mark.parametrize("selector, expected", [
    ("tier=web", ["web"]), ("tier==web", ["web"]), ("tier!=web", ["db", "plain"]),
    ("tier in (web, db)", ["db", "web"]), ("tier notin (web)", ["db", "plain"]),
    ("tier", ["db", "web"]), ("!tier", ["plain"]), ("tier=web,app=x", ["web"]), ("tier in (db),!app", ["db"]),
])
def test_label_selector_operators(k8s, selector, expected):
    k8s.core.create_namespaced_config_map("default", configmap("web", metadata={"labels": {"tier": "web", "app": "x"}}))
    k8s.core.create_namespaced_config_map("default", configmap("db", metadata={"labels": {"tier": "db"}}))
    k8s.core.create_namespaced_config_map("default", configmap("plain"))
    listed = k8s.core.list_namespaced_config_map("default", label_selector=selector)
    assert sorted(c.metadata.name for c in listed.items) == expected


def test_invalid_label_selector_is_400(k8s):
    assert api_error(k8s.core.list_namespaced_config_map, "default", label_selector="a in b")[0] == 400


def test_field_selector_on_name_and_namespace(k8s):
    k8s.core.create_namespace({"metadata": {"name": "other"}})
    for namespace in ("default", "other"):
        for name in ("a", "b"):
            k8s.core.create_namespaced_config_map(namespace, configmap(name))
    found = k8s.core.list_config_map_for_all_namespaces(field_selector="metadata.name=a,metadata.namespace!=other")
    assert [(c.metadata.namespace, c.metadata.name) for c in found.items] == [("default", "a")]
    assert api_error(k8s.core.list_config_map_for_all_namespaces, field_selector="data.k=v")[0] == 400


def test_list_pages_with_limit_and_continue_from_one_snapshot(k8s):
    for name in "abcde":
        k8s.core.create_namespaced_config_map("default", configmap(name))
    first = k8s.core.list_namespaced_config_map("default", limit=2)
    assert [c.metadata.name for c in first.items] == ["a", "b"] and first.metadata.remaining_item_count == 3
    k8s.core.delete_namespaced_config_map("d", "default")  # after the snapshot: the next pages still show it
    rest = k8s.core.list_namespaced_config_map("default", limit=5, _continue=first.metadata._continue)
    assert [c.metadata.name for c in rest.items] == ["c", "d", "e"]
    assert rest.metadata.resource_version == first.metadata.resource_version


def test_list_continue_past_a_compaction_is_410(k8s, api):
    for name in "abc":
        k8s.core.create_namespaced_config_map("default", configmap(name))
    first = k8s.core.list_namespaced_config_map("default", limit=1)
    k8s.core.create_namespaced_config_map("default", configmap("d"))
    api.expire_history()
    status, body = api_error(k8s.core.list_namespaced_config_map, "default", limit=1, _continue=first.metadata._continue)
    assert status == 410 and body["reason"] == "Expired"


def test_list_at_an_exact_resource_version_shows_the_past(k8s):
    k8s.core.create_namespaced_config_map("default", configmap("a", data={"v": "1"}))
    then = k8s.core.list_namespaced_config_map("default").metadata.resource_version
    k8s.core.patch_namespaced_config_map("a", "default", {"data": {"v": "2"}})
    k8s.core.create_namespaced_config_map("default", configmap("b"))
    past = k8s.core.list_namespaced_config_map("default", resource_version=then, resource_version_match="Exact")
    assert [(c.metadata.name, c.data) for c in past.items] == [("a", {"v": "1"})]


# --- watch ---

def test_watch_without_resource_version_starts_with_synthetic_added_for_the_current_state(k8s):
    k8s.core.create_namespaced_config_map("default", configmap("a"))
    k8s.core.create_namespaced_config_map("default", configmap("b"))
    seen = events(k8s.core.list_namespaced_config_map, "default")
    assert [(t, o["metadata"]["name"]) for t, o in seen] == [("ADDED", "a"), ("ADDED", "b")]
    assert events(k8s.core.list_namespaced_config_map, "default", resource_version="0") == seen


def test_watch_from_a_resource_version_sends_only_the_changes_after_it(k8s):
    k8s.core.create_namespaced_config_map("default", configmap("a"))
    since = k8s.core.list_namespaced_config_map("default").metadata.resource_version
    k8s.core.patch_namespaced_config_map("a", "default", {"data": {"k": "v"}})
    k8s.core.create_namespaced_config_map("default", configmap("b"))
    seen = events(k8s.core.list_namespaced_config_map, "default", resource_version=since)
    assert [(t, o["metadata"]["name"]) for t, o in seen] == [("MODIFIED", "a"), ("ADDED", "b")]
    assert all(int(o["metadata"]["resourceVersion"]) > int(since) for _, o in seen)


def test_watch_events_carry_kind_and_api_version(k8s):
    k8s.networking.create_namespaced_ingress("default", ingress("i"))
    [(_, obj)] = events(k8s.networking.list_ingress_for_all_namespaces)
    assert obj["kind"] == "Ingress" and obj["apiVersion"] == "networking.k8s.io/v1"


def test_watch_delivers_live_changes(k8s, api):
    open_watch = WatchInThread(api, k8s.core.list_namespaced_config_map, "default", resource_version="0")
    k8s.core.create_namespaced_config_map("default", configmap("a"))
    k8s.core.delete_namespaced_config_map("a", "default")
    deadline = time.monotonic() + 10
    while len(open_watch.events) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    api.drop_watches()
    open_watch.join()
    assert open_watch.events == ["ADDED", "DELETED"]


def test_watch_with_selectors_sees_objects_enter_and_leave_the_selection(k8s):
    k8s.core.create_namespaced_config_map("default", configmap("a"))
    since = k8s.core.list_namespaced_config_map("default").metadata.resource_version
    k8s.core.patch_namespaced_config_map("a", "default", {"metadata": {"labels": {"x": "1"}}})
    k8s.core.patch_namespaced_config_map("a", "default", {"data": {"k": "v"}})
    k8s.core.patch_namespaced_config_map("a", "default", {"metadata": {"labels": {"x": None}}})
    seen = events(k8s.core.list_namespaced_config_map, "default", resource_version=since, label_selector="x=1")
    assert [t for t, _ in seen] == ["ADDED", "MODIFIED", "DELETED"]


def test_watch_bookmarks_carry_the_current_resource_version(k8s, api):
    k8s.core.create_namespaced_config_map("default", configmap("a"))
    current = str(api.resource_version)
    seen = events(k8s.core.list_namespaced_config_map, "default", resource_version=current,
                  allow_watch_bookmarks=True)
    bookmarks = [o for t, o in seen if t == "BOOKMARK"]
    assert bookmarks and all(b["metadata"] == {"resourceVersion": current} for b in bookmarks)
    assert bookmarks[0]["kind"] == "ConfigMap"


def test_watch_without_allow_bookmarks_gets_no_bookmarks(k8s):
    assert events(k8s.core.list_namespaced_config_map, "default", resource_version="1") == []


def test_watch_timeout_seconds_ends_the_stream(k8s):
    # The stream ends by itself (the call returns); without the timeout this test would hang.
    assert events(k8s.core.list_namespaced_config_map, "default", timeout_seconds=1) == []


def test_watch_from_a_compacted_resource_version_gets_a_410_error_event(k8s, api):
    created = k8s.core.create_namespaced_config_map("default", configmap("a"))
    k8s.core.patch_namespaced_config_map("a", "default", {"data": {"k": "v"}})
    api.expire_history()
    response = k8s.core.list_namespaced_config_map("default", watch=True, timeout_seconds=1,
                                                   resource_version=created.metadata.resource_version,
                                                   _preload_content=False)
    assert response.status == 200
    [line] = [json.loads(line) for line in response.data.splitlines()]
    assert line["type"] == "ERROR"
    assert line["object"]["code"] == 410 and line["object"]["reason"] == "Expired"
    with pytest.raises(client.ApiException) as info:
        events(k8s.core.list_namespaced_config_map, "default", resource_version=created.metadata.resource_version)
    assert info.value.status == 410


def test_history_longer_than_max_history_is_compacted():
    with KubeApiServer(max_history=3) as api:
        core = client.CoreV1Api(client.ApiClient(api.configuration()))
        first = core.create_namespaced_config_map("default", configmap("a")).metadata.resource_version
        for value in "1234":
            core.patch_namespaced_config_map("a", "default", {"data": {"k": value}})
        with pytest.raises(client.ApiException) as info:
            events(core.list_namespaced_config_map, "default", resource_version=first)
        assert info.value.status == 410
        recent = str(api.resource_version - 2)
        assert [t for t, _ in events(core.list_namespaced_config_map, "default", resource_version=recent)] == \
            ["MODIFIED", "MODIFIED"]


# --- fault hooks ---

def test_drop_watches_cuts_every_open_watch_connection(k8s, api):
    open_watch = WatchInThread(api, k8s.core.list_namespaced_config_map, "default")
    assert api.drop_watches() == 1
    open_watch.join()
    assert open_watch.error is not None  # a cut stream, not a clean end
    assert api.open_watches == 0


def test_refuse_connections_refuses_then_listens_again_on_the_same_port(k8s, api):
    port = api.port
    api.refuse_connections(1.0)
    with pytest.raises(Exception) as info:
        k8s.core.list_namespaced_config_map("default")
    assert "Connection refused" in str(info.value)
    deadline = time.monotonic() + 10
    while api.refusing and time.monotonic() < deadline:
        time.sleep(0.05)
    assert api.port == port
    assert k8s.core.list_namespaced_config_map("default").items == []


def test_refuse_connections_also_cuts_open_watches(k8s, api):
    open_watch = WatchInThread(api, k8s.core.list_namespaced_config_map, "default")
    api.refuse_connections(0.5)
    open_watch.join()
    assert open_watch.error is not None


def test_fail_next_requests_answers_500_that_many_times(k8s, api):
    api.fail_next_requests(2)
    for _ in range(2):
        status, body = api_error(k8s.core.list_namespaced_config_map, "default")
        assert status == 500 and body["reason"] == "InternalError"
    assert k8s.core.list_namespaced_config_map("default").items == []


def test_expire_history_with_end_watches_sends_410_to_open_watches(k8s, api):
    open_watch = WatchInThread(api, k8s.core.list_namespaced_config_map, "default", resource_version="0")
    api.expire_history(end_watches=True)
    open_watch.join()
    assert isinstance(open_watch.error, client.ApiException) and open_watch.error.status == 410

import json
import os
import stat
import uuid

from services.watcher.metadata import STATE_FILE, ServerMetadata


class Clock:
    def __init__(self, now: float = 1_700_000_000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


def ingress(name="web", host="a.example", **meta):
    return {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": {"name": name, "namespace": "default", **meta},
            "spec": {"rules": [{"host": host}]}}


KEY = "Ingress/default/web"


def test_fills_what_an_api_server_sets(tmp_path):
    filled = ServerMetadata(tmp_path, Clock()).fill({KEY: ingress()}).changed
    meta = filled[KEY]["metadata"]
    assert meta["name"] == "web" and meta["namespace"] == "default"
    assert meta["creationTimestamp"] == "2023-11-14T22:13:20Z"
    assert meta["generation"] == 1
    assert str(uuid.UUID(meta["uid"])) == meta["uid"]
    assert (uuid.UUID(meta["uid"]).version, uuid.UUID(meta["uid"]).variant) == (4, uuid.RFC_4122)
    assert int(meta["resourceVersion"]) > 0
    assert filled[KEY]["spec"] == ingress()["spec"]


def test_each_new_object_gets_its_own_uid(tmp_path):
    filled = ServerMetadata(tmp_path, Clock()).fill({f"Ingress/default/w{i}": ingress(f"w{i}") for i in range(500)})
    uids = {obj["metadata"]["uid"] for obj in filled.changed.values()}
    assert len(uids) == 500 and all(uuid.UUID(uid).version == 4 for uid in uids)


def test_stable_across_restarts_and_resource_version_grows_on_every_change(tmp_path):
    clock = Clock()
    first = ServerMetadata(tmp_path, clock).fill({KEY: ingress()}).changed[KEY]["metadata"]
    clock.now += 3600
    again = ServerMetadata(tmp_path, clock).fill({KEY: ingress()}).changed[KEY]["metadata"]
    assert again == first

    store = ServerMetadata(tmp_path, clock)
    annotated = store.fill({KEY: ingress(annotations={"a": "b"})}).changed[KEY]["metadata"]
    assert (annotated["uid"], annotated["creationTimestamp"]) == (first["uid"], first["creationTimestamp"])
    assert int(annotated["resourceVersion"]) > int(first["resourceVersion"])
    assert annotated["generation"] == 1  # metadata only: the spec did not change
    new_spec = ServerMetadata(tmp_path, clock).fill({KEY: ingress(host="b.example")}).changed[KEY]["metadata"]
    assert int(new_spec["resourceVersion"]) > int(annotated["resourceVersion"])
    assert new_spec["generation"] == 2


def test_resource_version_grows_even_when_the_clock_goes_back(tmp_path):
    clock = Clock()
    store = ServerMetadata(tmp_path, clock)
    before = int(store.fill({KEY: ingress()}).changed[KEY]["metadata"]["resourceVersion"])
    clock.now -= 86400
    after = int(ServerMetadata(tmp_path, clock).fill({KEY: ingress(host="c")}).changed[KEY]["metadata"]["resourceVersion"])
    assert after > before


def test_removed_then_added_again_is_a_new_object(tmp_path):
    clock = Clock()
    store = ServerMetadata(tmp_path, clock)
    first = store.fill({KEY: ingress()}).changed[KEY]["metadata"]
    store.fill({})
    clock.now += 10
    again = ServerMetadata(tmp_path, clock).fill({KEY: ingress()}).changed[KEY]["metadata"]
    assert again["uid"] != first["uid"]
    assert again["creationTimestamp"] == "2023-11-14T22:13:30Z"


def test_given_metadata_wins_except_resource_version(tmp_path):
    given = ingress(uid="u-1", creationTimestamp="2020-01-01T00:00:00Z", generation=7, resourceVersion="5")
    meta = ServerMetadata(tmp_path, Clock()).fill({KEY: given}).changed[KEY]["metadata"]
    assert (meta["uid"], meta["creationTimestamp"], meta["generation"]) == ("u-1", "2020-01-01T00:00:00Z", 7)
    assert meta["resourceVersion"] != "5"


def test_state_is_private_and_a_corrupt_file_means_starting_over(tmp_path, caplog):
    clock = Clock()
    first = ServerMetadata(tmp_path, clock).fill({KEY: ingress()}).changed[KEY]["metadata"]
    path = tmp_path / "watcher" / STATE_FILE
    assert stat.S_IMODE(os.stat(tmp_path / "watcher").st_mode) == 0o700
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    path.write_text(json.dumps({"version": 1, "objects": {KEY: {"uid": 3}}}))
    clock.now += 1  # with the saved counter lost, resourceVersion still grows with the clock
    again = ServerMetadata(tmp_path, clock).fill({KEY: ingress()}).changed[KEY]["metadata"]
    assert again["uid"] != first["uid"]
    assert int(again["resourceVersion"]) > int(first["resourceVersion"])
    path.write_bytes(b"\x00garbage")
    ServerMetadata(tmp_path, Clock()).fill({KEY: ingress()})
    assert "starting over" in caplog.text
    assert json.loads(path.read_text())["objects"][KEY]["uid"]


def test_a_fill_gives_only_what_changed_since_the_last_one(tmp_path):
    clock = Clock()
    web, api = ingress(), ingress("api", host="api.example")
    store = ServerMetadata(tmp_path, clock)
    first = store.fill({KEY: web, "Ingress/default/api": api})
    assert sorted(first.changed) == ["Ingress/default/api", KEY] and first.removed == []
    # The same objects (or equal ones) again: nothing to publish.
    assert store.fill({KEY: web, "Ingress/default/api": ingress("api", host="api.example")}).changed == {}
    changed = store.fill({KEY: ingress(host="b.example"), "Ingress/default/api": api})
    assert list(changed.changed) == [KEY] and changed.changed[KEY]["spec"] == {"rules": [{"host": "b.example"}]}
    gone = store.fill({KEY: ingress(host="b.example")})
    assert (gone.changed, gone.removed) == ({}, ["Ingress/default/api"])
    # A restarted watcher has published nothing yet: it gets every object, with the metadata it had.
    restarted = ServerMetadata(tmp_path, clock).fill({KEY: ingress(host="b.example")})
    assert restarted.changed[KEY]["metadata"] == changed.changed[KEY]["metadata"] and restarted.removed == []


def test_objects_filled_early_are_left_out_of_the_next_fill_unless_they_changed(tmp_path):
    metadata = ServerMetadata(tmp_path, Clock())
    metadata.fill({})
    other = "Ingress/default/other"
    early = metadata.fill_early({KEY: ingress(), other: ingress("other")})
    assert metadata.has(KEY) and metadata.fill_early({KEY: ingress()}) == {}  # published once
    changes = metadata.fill({KEY: ingress(), other: ingress("other", host="b.example")})
    # The unchanged one is in the store already; the changed one goes again, with its uid and a new version.
    assert list(changes.changed) == [other] and changes.removed == []
    assert changes.changed[other]["metadata"]["uid"] == early[other]["metadata"]["uid"]
    assert changes.changed[other]["metadata"]["resourceVersion"] != early[other]["metadata"]["resourceVersion"]
    # What was filled early is saved with the fill: a restart keeps its uid.
    again = ServerMetadata(tmp_path, Clock()).fill({KEY: ingress()}).changed[KEY]["metadata"]
    assert again["uid"] == early[KEY]["metadata"]["uid"]


def test_an_object_filled_early_and_gone_by_the_next_fill_is_removed(tmp_path):
    metadata = ServerMetadata(tmp_path, Clock())
    metadata.fill({})
    metadata.fill_early({KEY: ingress()})
    assert metadata.fill({}).removed == [KEY]
    assert not metadata.has(KEY)

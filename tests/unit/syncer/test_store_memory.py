"""What the syncer's model and the admission webhook keep of the watcher's store, counted: one copy of each short string
the objects repeat (model/shared_strings.py), and no EndpointSlice in the webhook, which never reads one. With the
model's other savings, 227 MiB of the syncer's RSS at 100,000 Ingresses and 243 MiB of the webhook's (BENCHMARKS.md,
"memory at 100,000 Ingresses")."""
import msgpack

from services.common.objects import object_key
from services.syncer.admission.review import Reviewer, drop_unread
from services.syncer.model.build import build_model
from services.syncer.model.incremental import IncrementalModel
from services.syncer.model.shared_strings import share_strings


def decoded(store: dict) -> dict:
    """The store as the syncer and the webhook get it from the watcher: decoded from msgpack, no value shared."""
    return msgpack.unpackb(msgpack.packb(store))


def distinct_strings(objects) -> tuple[int, int]:
    """(string values, distinct string objects among them) of the objects, at any depth; not counting the strings of
    one character, which Python keeps one of each anyway."""
    seen: list[str] = []

    def walk(value) -> None:
        if isinstance(value, str):
            if len(value) > 1:
                seen.append(value)
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)
    for obj in objects:
        walk(obj)
    return len(seen), len({id(value) for value in seen})


def test_the_model_keeps_one_copy_of_each_repeated_string_and_the_same_model(cluster):
    for i in range(20):
        cluster.app(f"app{i}", ns=f"team{i % 2}", host=f"h{i}.example.com")
    store = decoded(cluster.store)
    values, copies = distinct_strings(store.values())
    assert copies == values  # as decoded: every value its own string

    model = IncrementalModel(cluster.settings).update(store, None)

    values_after, copies_after = distinct_strings(store.values())
    assert values_after == values
    # Left apart: each object's own name, creationTimestamp and the like; shared: "default", "TCP", "Prefix", the
    # namespaces, each Service's name in its Service, EndpointSlice and Ingress.
    assert copies_after < values / 2, (copies_after, values)
    assert model == build_model(decoded(cluster.store), settings=cluster.settings)


def test_sharing_changes_no_value_and_leaves_long_strings_and_unique_fields_alone():
    long_value = "x" * 65
    obj = {"metadata": {"uid": "u-1", "name": "web"}, "data": {"key": long_value}, "list": ["web", 80, {"a": "web"}]}
    copy = msgpack.unpackb(msgpack.packb(obj))
    share_strings(copy)
    assert copy == obj
    assert copy["metadata"]["name"] is copy["list"][0] is copy["list"][2]["a"]
    assert copy["data"]["key"] is not long_value and copy["data"]["key"] == long_value


def test_the_webhook_keeps_no_endpoint_slice_and_judges_as_before(cluster):
    cluster.app("web", host="web.example.com")
    cluster.app("api", host="api.example.com")
    reviewer = Reviewer(cluster.settings)
    reviewer.replace_store(cluster.store)
    more = cluster.endpoint_slice("web", name="web-2", addresses=("10.0.0.9",))
    reviewer.apply_change(object_key(more), more)
    kept = reviewer._store  # noqa: SLF001 - what the webhook holds is the subject
    assert [key for key in kept if key.startswith("EndpointSlice/")] == []
    assert len(kept) == len(cluster.store) - sum(key.startswith("EndpointSlice/") for key in cluster.store)

    taken = cluster.ingress("other", host="web.example.com", paths=(("/", "Prefix", "web", 80),))
    del cluster.store[object_key(taken)]
    verdict = reviewer.review(taken)
    assert not verdict.allowed and "web.example.com" in verdict.message
    fresh = cluster.ingress("fresh", host="fresh.example.com", paths=(("/", "Prefix", "api", 80),))
    assert reviewer.review(fresh).allowed


def test_a_snapshot_loses_its_endpoint_slices_before_the_webhook_indexes_it(cluster):
    cluster.app("web", host="web.example.com")
    snapshot = decoded(cluster.store)
    drop_unread(snapshot)
    assert sorted(snapshot) == sorted(key for key in cluster.store if not key.startswith("EndpointSlice/"))

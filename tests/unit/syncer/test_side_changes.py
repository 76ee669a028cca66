"""The incremental model names what may have changed beside its tables (SideChanges: the passthrough hosts, the
htpasswd and proxy-ssl files), and the syncer publishes and writes only those: random sequences of changes (those
of test_incremental.py, Gateway API objects among them), and after every step each passthrough host and file that
differs from the model before is named."""
from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from services.common.objects import object_key
from services.syncer.model.incremental import IncrementalModel, SideChanges
from services.syncer.model.types import Model
from tests.support import gateway_objects
from tests.support.htpasswd import basic_auth_secret
from tests.unit.syncer.test_incremental import (SETTINGS, _gateway_writes, gateway_api_objects, ingresses, populated,
                                                steps)


def differing(before: dict[str, Any], after: dict[str, Any]) -> set[str]:
    return {key for key in before.keys() | after.keys() if before.get(key) != after.get(key)}


def assert_named(previous: Model, model: Model, side: SideChanges) -> None:
    for table, named in (("passthrough", side.passthrough), ("auth_files", side.auth_files),
                         ("ssl_files", side.ssl_files)):
        if named is not None:
            assert differing(getattr(previous, table), getattr(model, table)) <= named, table


def follow(store: dict[str, dict[str, Any]], steps: list[list[tuple[dict[str, Any], bool]]]) -> None:
    incremental = IncrementalModel(SETTINGS)
    previous = incremental.update(store, None)
    assert incremental.take_side_changes() == SideChanges()  # built afresh: anything may have changed
    assert incremental.take_side_changes() == SideChanges(frozenset(), frozenset(), frozenset())  # taken
    for step in steps:
        written = {object_key(obj): obj if keep else None for obj, keep in step}  # the last write of a key counts
        store.update((key, obj) for key, obj in written.items() if obj is not None)
        for key in (key for key, obj in written.items() if obj is None):
            store.pop(key, None)
        model = incremental.update(store, set(written))
        assert_named(previous, model, incremental.take_side_changes())
        previous = model


@settings(deadline=None, max_examples=150, derandomize=True, database=None)
@given(first=st.lists(ingresses(), min_size=2, max_size=8), steps=steps)
def test_every_passthrough_host_and_file_that_changed_is_named(first, steps):
    follow({**populated(), **{object_key(ingress): ingress for ingress in first}}, steps)


_gateway_steps = st.lists(st.lists(_gateway_writes, min_size=1, max_size=3), min_size=5, max_size=25)


@settings(deadline=None, max_examples=100, derandomize=True, database=None)
@given(first=st.lists(gateway_api_objects(), min_size=3, max_size=10), steps=_gateway_steps)
def test_with_gateway_api_objects_every_passthrough_host_and_file_that_changed_is_named(first, steps):
    follow({**populated(), **{object_key(obj): obj for obj in [gateway_objects.gateway_class(), *first]}}, steps)


def test_changes_not_taken_add_up():
    store = populated()
    incremental = IncrementalModel(SETTINGS)
    incremental.update(store, None)
    incremental.take_side_changes()
    ingress = {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
               "metadata": {"name": "pt", "namespace": "a",
                            "annotations": {"nginx.ingress.kubernetes.io/ssl-passthrough": "true"}},
               "spec": {"ingressClassName": "nginx", "rules": [{"host": "pt.test", "http": {"paths": [
                   {"path": "/", "pathType": "Prefix",
                    "backend": {"service": {"name": "s1", "port": {"number": 80}}}}]}}]}}
    store[object_key(ingress)] = ingress
    assert "pt.test" in incremental.update(store, {object_key(ingress)}).passthrough
    other = {**ingress, "metadata": {**ingress["metadata"], "name": "pt2"},
             "spec": {**ingress["spec"], "rules": [{**ingress["spec"]["rules"][0], "host": "pt2.test"}]}}
    store[object_key(other)] = other
    incremental.update(store, {object_key(other)})
    assert {"pt.test", "pt2.test"} <= (incremental.take_side_changes().passthrough or set())


def test_a_file_whose_only_route_an_older_ingress_takes_is_named(cluster):
    """The newer Ingress is not planned again, only merged again: its profile, which names the file, is no longer
    used."""
    cluster.app("newer", host="x.test", created=cluster.timestamp(5),
                annotations={"auth-type": "basic", "auth-secret": "auth"})
    cluster.add(basic_auth_secret("auth", {"alice": "pw"}, namespace="default", scheme="sha"))
    incremental = IncrementalModel(cluster.settings)
    previous = incremental.update(cluster.store, None)
    incremental.take_side_changes()
    [name] = previous.auth_files
    older = cluster.ingress("older", host="x.test", created=cluster.timestamp(1), paths=(("/", "Prefix", "newer", 80),))
    model = incremental.update(cluster.store, {object_key(older)})
    assert model.auth_files == {}
    assert incremental.take_side_changes().auth_files == {name}

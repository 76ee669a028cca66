"""upstream-hash-by through a real nginx: the same key always reaches the same endpoint, keys spread over the
endpoints, and removing an endpoint moves only the keys it had."""
from __future__ import annotations

import pytest

from services.syncer.model.types import HostRoutes, Route

HASHED = Route(backend="app", ingress="default/app", hash_by="$arg_id")


@pytest.fixture(scope="module")
def backends(echo):
    return [echo(f"hashed-{i}") for i in range(4)]


@pytest.fixture(scope="module")
def nginx(shared_nginx):
    shared_nginx.apply(shared_nginx.config())
    return shared_nginx


def assignment(nginx, endpoints, keys) -> dict[str, str]:
    nginx.push({"hash.test": HostRoutes(prefix={"/": HASHED})}, {"app": [e.endpoint for e in endpoints]})
    return {key: nginx.get(f"/?id={key}", host="hash.test").backend for key in keys}


def test_a_key_keeps_its_endpoint_and_keys_spread(nginx, backends):
    keys = [f"user{i}" for i in range(40)]
    first = assignment(nginx, backends, keys)
    assert assignment(nginx, backends, keys) == first
    assert len(set(first.values())) >= 3


def test_removing_an_endpoint_moves_only_its_keys(nginx, backends):
    keys = [f"user{i}" for i in range(40)]
    before = assignment(nginx, backends, keys)
    after = assignment(nginx, backends[1:], keys)
    moved = {k for k in keys if before[k] != after[k]}
    assert moved == {k for k in keys if before[k] == backends[0].name}


def test_a_key_stays_within_its_subset_and_subsets_spread(nginx, backends):
    # upstream-hash-by-subset, size 2 over 4 endpoints: two subsets; a key is served by one of its two.
    subset = Route(backend="app", ingress="default/app", hash_by="$arg_id", hash_subset_size=2)
    nginx.push({"subset.test": HostRoutes(prefix={"/": subset})}, {"app": [e.endpoint for e in backends]})
    served = {key: {nginx.get(f"/?id={key}", host="subset.test").backend for _ in range(16)}
              for key in (f"user{i}" for i in range(12))}
    assert all(len(names) <= 2 for names in served.values()), served
    assert any(len(names) == 2 for names in served.values())  # random within the subset
    assert {frozenset(names) for names in served.values() if len(names) == 2} <= {
        frozenset(e.name for e in backends[:2]), frozenset(e.name for e in backends[2:])}
    assert len({name for names in served.values() for name in names}) == 4  # keys spread over both subsets

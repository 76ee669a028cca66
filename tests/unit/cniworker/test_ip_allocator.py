"""The IP allocator over an in-memory store (as host-local tests its allocator with a fake store):
round robin, limits, the gateway, release. The stores' own tests (files, flock, threads, processes) are
in tests/integration/cniworker/test_disk_store.py."""
from ipaddress import IPv4Address

import pytest

from proto.cni import IPAM_EXHAUSTED, CniError
from services.cniworker.ipam.allocator import IpAllocator, release, release_where
from services.cniworker.ipam.memory_store import MemoryStore
from services.common.cni_config.ipam import parse_ipam
from services.common.cni_config.runtime_env import AttachmentId as Owner


def allocator(ipam=None, *, store=None, network="net1"):
    config = parse_ipam(ipam if ipam is not None else {"subnet": "10.20.30.0/24"}).resolve(None)
    return IpAllocator(store if store is not None else MemoryStore(), config=config, network=network)


def test_the_first_address_after_the_gateway_and_the_last_reserved_is_remembered():
    alloc = allocator()
    assert alloc.allocate(Owner("c0ffee", "eth0")) == IPv4Address("10.20.30.2")  # .1 is the gateway
    assert alloc.store.allocations() == {IPv4Address("10.20.30.2"): Owner("c0ffee", "eth0")}
    assert alloc.store.last_reserved() == IPv4Address("10.20.30.2")


def test_never_hands_out_network_gateway_or_broadcast_and_stops_when_full():
    alloc = allocator({"subnet": "10.20.30.0/29"})
    got = [alloc.allocate(Owner(f"c{i}", "eth0")) for i in range(5)]
    assert [str(ip) for ip in got] == [f"10.20.30.{n}" for n in (2, 3, 4, 5, 6)]
    with pytest.raises(CniError) as err:
        alloc.allocate(Owner("one-too-many", "eth0"))
    assert err.value.code == IPAM_EXHAUSTED
    assert "10.20.30.0/29" in err.value.msg and "net1" in err.value.msg
    assert alloc.free_count() == 0


def test_respects_range_start_and_end_and_a_gateway_inside_the_range():
    alloc = allocator({"subnet": "10.20.30.0/24", "gateway": "10.20.30.11",
                       "rangeStart": "10.20.30.10", "rangeEnd": "10.20.30.12"})
    got = {str(alloc.allocate(Owner(f"c{i}", "eth0"))) for i in range(2)}
    assert got == {"10.20.30.10", "10.20.30.12"}
    with pytest.raises(CniError, match="10.20.30.10-10.20.30.12"):
        alloc.allocate(Owner("c2", "eth0"))


def test_same_container_and_ifname_get_their_address_again():
    alloc = allocator()
    first = alloc.allocate(Owner("c1", "eth0"))
    assert alloc.allocate(Owner("c1", "eth0")) == first
    assert alloc.allocate(Owner("c1", "net1")) != first


def test_an_address_held_outside_the_current_range_is_not_reused():
    store = MemoryStore()
    old = allocator({"subnet": "10.20.30.0/24", "rangeStart": "10.20.30.100"}, store=store).allocate(Owner("c1", "eth0"))
    narrowed = allocator({"subnet": "10.20.30.0/24", "rangeEnd": "10.20.30.50"}, store=store)
    new = narrowed.allocate(Owner("c1", "eth0"))
    assert old == IPv4Address("10.20.30.100") and new == IPv4Address("10.20.30.2")


def test_round_robin_continues_after_the_last_reserved_address_not_the_lowest_free():
    alloc = allocator()
    a, b = alloc.allocate(Owner("a", "eth0")), alloc.allocate(Owner("b", "eth0"))
    assert release(alloc.store, Owner("a", "eth0")) == [a]
    assert alloc.allocate(Owner("c", "eth0")) == b + 1
    # at the end of the range the search wraps around to the start
    wrap = allocator({"subnet": "10.20.30.0/24", "rangeStart": "10.20.30.2", "rangeEnd": "10.20.30.4"}, network="wrap")
    assert [str(wrap.allocate(Owner(n, "eth0"))) for n in "xyz"] == ["10.20.30.2", "10.20.30.3", "10.20.30.4"]
    release(wrap.store, Owner("x", "eth0"))
    assert str(wrap.allocate(Owner("w", "eth0"))) == "10.20.30.2"


def test_a_new_allocator_over_the_same_store_resumes_where_the_last_one_stopped():
    store = MemoryStore()
    held = {allocator(store=store).allocate(Owner(f"c{i}", "eth0")) for i in range(3)}
    after = allocator(store=store)
    assert after.find(Owner("c1", "eth0")) in held
    fresh = after.allocate(Owner("c9", "eth0"))
    assert fresh not in held and fresh == max(held) + 1
    assert after.free_count() == 253 - 4


def test_release_frees_only_that_attachment_and_release_where_reports_what_it_freed():
    alloc = allocator()
    keep, drop = alloc.allocate(Owner("c1", "eth0")), alloc.allocate(Owner("c1", "net1"))
    assert release(alloc.store, Owner("c1", "net1")) == [drop]
    assert release(alloc.store, Owner("c1", "net1")) == []  # again: nothing held, no error
    assert alloc.find(Owner("c1", "eth0")) == keep
    other = alloc.allocate(Owner("c2", "eth0"))
    stale = release_where(alloc.store, lambda owner: owner != Owner("c1", "eth0"))
    assert stale == {other: Owner("c2", "eth0")}
    assert alloc.find(Owner("c1", "eth0")) == keep


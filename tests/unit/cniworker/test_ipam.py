"""The IPAM store on real files: layout like host-local's, round robin, limits, restarts, concurrency."""
import json
import os
import stat
import subprocess
import sys
import threading
from ipaddress import IPv4Address, IPv4Network

import pytest

from proto.cni import INVALID_NETWORK_CONFIG, IPAM_EXHAUSTED, CniError
from services.cniworker.ipam import AllocationStore, IpAllocator, Owner, release, release_where, resolve_ipam

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def allocator(state_dir, ipam=None, pod_cidr=None, network="net1"):
    config = resolve_ipam(ipam if ipam is not None else {"subnet": "10.20.30.0/24"}, pod_cidr)
    return IpAllocator(AllocationStore(state_dir, network), config, network)


def test_defaults_gateway_first_address_and_range_spans_the_usable_hosts():
    cfg = resolve_ipam({"subnet": "10.20.30.0/24"}, None)
    assert (str(cfg.gateway), str(cfg.range_start), str(cfg.range_end)) == ("10.20.30.1", "10.20.30.1", "10.20.30.254")
    assert cfg.size() == 253


def test_pod_cidr_is_used_when_the_config_has_no_subnet():
    assert resolve_ipam({}, "10.9.0.0/16").subnet == IPv4Network("10.9.0.0/16")
    assert resolve_ipam({"subnet": "10.8.0.0/24"}, "10.9.0.0/16").subnet == IPv4Network("10.8.0.0/24")


@pytest.mark.parametrize("ipam, pod_cidr, message", [
    ({}, None, "set ipam.subnet in the network configuration or start the CNI server with --pod-cidr"),
    ({"subnet": "10.1.2.0"}, None, None),  # a single host: /32
    ({"subnet": "banana"}, None, "is not a CIDR"),
    ({"subnet": "fd00::/64"}, None, "only IPv4"),
    ({"subnet": "10.1.2.0/31"}, None, "too small"),
    ({"subnet": "10.1.2.0/24", "gateway": "10.1.3.1"}, None, "must be a host address inside ipam.subnet"),
    ({"subnet": "10.1.2.0/24", "rangeStart": "10.1.2.255"}, None, "rangeStart 10.1.2.255 must be a host address"),
    ({"subnet": "10.1.2.0/24", "rangeStart": "10.1.2.9", "rangeEnd": "10.1.2.8"}, None, "comes after"),
    ({"subnet": "10.1.2.0/24", "rangeStart": "10.1.2.1", "rangeEnd": "10.1.2.1"}, None, "no address besides the gateway"),
    ({"subnet": "10.1.2.0/24", "gateway": "x"}, None, "ipam.gateway 'x' is not an IPv4 address"),
])
def test_bad_ipam_sections_are_rejected_with_what_to_change(ipam, pod_cidr, message):
    with pytest.raises(CniError) as err:
        resolve_ipam(ipam, pod_cidr)
    assert err.value.code == INVALID_NETWORK_CONFIG
    if message:
        assert message in err.value.msg


def test_allocations_are_files_named_by_address_holding_id_and_ifname_like_host_local(tmp_path):
    ip = allocator(tmp_path).allocate(Owner("c0ffee", "eth0"))
    directory = tmp_path / "cni" / "networks" / "net1"
    assert ip == IPv4Address("10.20.30.2")  # .1 is the gateway
    assert (directory / "10.20.30.2").read_bytes() == b"c0ffee\r\neth0"
    assert (directory / "last_reserved_ip.0").read_text() == "10.20.30.2"
    assert (directory / "lock").exists()
    for path in (tmp_path / "cni", tmp_path / "cni" / "networks", directory):
        assert stat.S_IMODE(path.stat().st_mode) == 0o700
    for name in ("10.20.30.2", "last_reserved_ip.0", "lock"):
        assert stat.S_IMODE((directory / name).stat().st_mode) == 0o600


def test_never_hands_out_network_gateway_or_broadcast_and_stops_when_full(tmp_path):
    alloc = allocator(tmp_path, {"subnet": "10.20.30.0/29"})
    got = [alloc.allocate(Owner(f"c{i}", "eth0")) for i in range(5)]
    assert [str(ip) for ip in got] == [f"10.20.30.{n}" for n in (2, 3, 4, 5, 6)]
    with pytest.raises(CniError) as err:
        alloc.allocate(Owner("one-too-many", "eth0"))
    assert err.value.code == IPAM_EXHAUSTED
    assert "10.20.30.0/29" in err.value.msg and "net1" in err.value.msg


def test_respects_range_start_and_end_and_a_gateway_inside_the_range(tmp_path):
    alloc = allocator(tmp_path, {"subnet": "10.20.30.0/24", "gateway": "10.20.30.11",
                                 "rangeStart": "10.20.30.10", "rangeEnd": "10.20.30.12"})
    got = {str(alloc.allocate(Owner(f"c{i}", "eth0"))) for i in range(2)}
    assert got == {"10.20.30.10", "10.20.30.12"}
    with pytest.raises(CniError, match="10.20.30.10-10.20.30.12"):
        alloc.allocate(Owner("c2", "eth0"))


def test_same_container_and_ifname_get_their_address_again(tmp_path):
    alloc = allocator(tmp_path)
    first = alloc.allocate(Owner("c1", "eth0"))
    assert alloc.allocate(Owner("c1", "eth0")) == first
    assert alloc.allocate(Owner("c1", "net1")) != first


def test_round_robin_continues_after_the_last_reserved_address_not_the_lowest_free(tmp_path):
    alloc = allocator(tmp_path)
    a, b = alloc.allocate(Owner("a", "eth0")), alloc.allocate(Owner("b", "eth0"))
    assert release(alloc.store, Owner("a", "eth0")) == [a]
    assert alloc.allocate(Owner("c", "eth0")) == b + 1
    # at the end of the range the search wraps around to the start
    wrap = allocator(tmp_path, {"subnet": "10.20.30.0/24", "rangeStart": "10.20.30.2", "rangeEnd": "10.20.30.4"},
                     network="wrap")
    assert [str(wrap.allocate(Owner(n, "eth0"))) for n in "xyz"] == ["10.20.30.2", "10.20.30.3", "10.20.30.4"]
    release(wrap.store, Owner("x", "eth0"))
    assert str(wrap.allocate(Owner("w", "eth0"))) == "10.20.30.2"


def test_allocations_survive_a_restart(tmp_path):
    before = allocator(tmp_path)
    held = {before.allocate(Owner(f"c{i}", "eth0")) for i in range(3)}
    after = allocator(tmp_path)  # a new process would build exactly this
    assert after.find(Owner("c1", "eth0")) in held
    fresh = after.allocate(Owner("c9", "eth0"))
    assert fresh not in held and fresh == max(held) + 1
    assert after.free_count() == 253 - 4


def test_release_frees_only_that_attachment_and_release_where_reports_what_it_freed(tmp_path):
    alloc = allocator(tmp_path)
    keep, drop = alloc.allocate(Owner("c1", "eth0")), alloc.allocate(Owner("c1", "net1"))
    assert release(alloc.store, Owner("c1", "net1")) == [drop]
    assert release(alloc.store, Owner("c1", "net1")) == []  # again: nothing held, no error
    assert alloc.find(Owner("c1", "eth0")) == keep
    other = alloc.allocate(Owner("c2", "eth0"))
    stale = release_where(alloc.store, lambda owner: owner != Owner("c1", "eth0"))
    assert stale == {other: Owner("c2", "eth0")}
    assert alloc.find(Owner("c1", "eth0")) == keep


def test_threads_never_get_the_same_address(tmp_path):
    alloc = allocator(tmp_path)
    got: list[IPv4Address] = []

    def grab(n):
        for i in range(10):
            got.append(alloc.allocate(Owner(f"t{n}-{i}", "eth0")))

    threads = [threading.Thread(target=grab, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 80 and len(set(got)) == 80


_GRAB = """
import json, sys
from services.cniworker.ipam import AllocationStore, IpAllocator, Owner, resolve_ipam
state_dir, tag = sys.argv[1], sys.argv[2]
alloc = IpAllocator(AllocationStore(state_dir, "net1"), resolve_ipam({"subnet": "10.20.30.0/24"}, None), "net1")
print(json.dumps([str(alloc.allocate(Owner(f"{tag}-{i}", "eth0"))) for i in range(25)]))
"""


def test_processes_never_get_the_same_address(tmp_path):
    procs = [subprocess.Popen([sys.executable, "-c", _GRAB, str(tmp_path), f"p{n}"], cwd=REPO,
                              stdout=subprocess.PIPE, text=True) for n in range(4)]
    got = []
    for proc in procs:
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0
        got += json.loads(out)
    assert len(got) == 100 and len(set(got)) == 100
    files = {p.name for p in (tmp_path / "cni" / "networks" / "net1").iterdir()} - {"lock", "last_reserved_ip.0"}
    assert files == set(got)

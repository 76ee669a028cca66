"""The IPAM store on real files: layout like host-local's, restarts, and flock between threads and processes."""
import json
import os
import stat
import subprocess
import sys
import threading
from ipaddress import IPv4Address

import pytest

from services.cniworker.ipam.allocator import IpAllocator
from services.cniworker.ipam.disk_store import DiskStore
from services.cniworker.ipam.memory_store import MemoryStore
from services.common.cni_config.ipam import parse_ipam
from services.common.cni_config.runtime_env import AttachmentId as Owner

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def allocator(state_dir, ipam=None, network="net1"):
    config = parse_ipam(ipam if ipam is not None else {"subnet": "10.20.30.0/24"}).resolve(None)
    return IpAllocator(DiskStore(state_dir, network), config=config, network=network)


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


STORES = pytest.mark.parametrize("make_store", [lambda tmp_path: DiskStore(tmp_path, "net1"),
                                                lambda tmp_path: MemoryStore()], ids=["disk", "memory"])


@STORES
def test_the_memory_store_behaves_as_the_disk_store(tmp_path, make_store):
    store = make_store(tmp_path)
    a, b = IPv4Address("10.0.0.2"), IPv4Address("10.0.0.3")
    with store.locked():
        assert (store.allocations(), store.last_reserved()) == ({}, None)
        assert store.reserve(a, Owner("c1", "eth0")) and store.reserve(b, Owner("c2", "eth0"))
        assert not store.reserve(a, Owner("c3", "eth0"))  # taken: the owner stays
        store.release(b)
        store.release(b)  # not allocated: no error
        assert store.allocations() == {a: Owner("c1", "eth0")}
        assert store.last_reserved() == b  # a release does not move the round robin back


def test_allocations_survive_a_restart(tmp_path):
    before = allocator(tmp_path)
    held = {before.allocate(Owner(f"c{i}", "eth0")) for i in range(3)}
    after = allocator(tmp_path)  # a new process would build exactly this
    assert after.find(Owner("c1", "eth0")) in held
    fresh = after.allocate(Owner("c9", "eth0"))
    assert fresh not in held and fresh == max(held) + 1
    assert after.free_count() == 253 - 4


@STORES
def test_threads_never_get_the_same_address(tmp_path, make_store):
    config = parse_ipam({"subnet": "10.20.30.0/24"}).resolve(None)
    alloc = IpAllocator(make_store(tmp_path), config=config, network="net1")
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
from services.cniworker.ipam.allocator import IpAllocator
from services.cniworker.ipam.disk_store import DiskStore
from services.common.cni_config.ipam import parse_ipam
from services.common.cni_config.runtime_env import AttachmentId
state_dir, tag = sys.argv[1], sys.argv[2]
config = parse_ipam({"subnet": "10.20.30.0/24"}).resolve(None)
alloc = IpAllocator(DiskStore(state_dir, "net1"), config=config, network="net1")
print(json.dumps([str(alloc.allocate(AttachmentId(f"{tag}-{i}", "eth0"))) for i in range(25)]))
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

"""`is_valid_ifname` against the kernel itself: every name it accepts, Linux accepts; every name Linux
refuses, it refuses (it is stricter than Linux on control characters and Unicode white space)."""
from __future__ import annotations

import errno

import pytest
from pyroute2.netlink.exceptions import NetlinkError

from services.cniworker import netlink
from services.cniworker.netns import NetNS
from services.common.cni_config.names import is_valid_ifname

ACCEPTED = ["eth0", "a" * 15, "net1.100", "é" * 7, "a\x7fb", "br-pods_1"]
REFUSED_BY_LINUX = ["a" * 16, "é" * 8, ".", "..", "a/b", "a:b", "a b", "a\tb", "tà", "Šx"]


def kernel_accepts(ns: NetNS, name: str) -> bool:
    def create() -> bool:
        with netlink.open_rtnl() as ipr:
            try:
                ipr.link("add", ifname=name, kind="bridge")
            except NetlinkError as e:
                assert e.code in (errno.EINVAL, errno.ERANGE), e  # ERANGE: over IFNAMSIZ
                return False
            netlink.delete_link(ipr, name)
            return True
    return ns.run(create)


@pytest.fixture
def scratch_netns(pods):
    with NetNS(pods.netns()) as ns:
        yield ns


def test_the_rule_agrees_with_the_kernel(scratch_netns):
    assert all(is_valid_ifname(name) for name in ACCEPTED)
    assert [name for name in ACCEPTED if not kernel_accepts(scratch_netns, name)] == []
    assert [name for name in REFUSED_BY_LINUX if kernel_accepts(scratch_netns, name)] == []
    assert [name for name in REFUSED_BY_LINUX if is_valid_ifname(name)] == []

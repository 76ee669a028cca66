"""The netns helper: the function runs inside the namespace, the caller's thread never moves."""
from __future__ import annotations

import os

import pytest

from services.cniworker.netns import NetNS, NotANetworkNamespace


def current_netns() -> str:
    return os.readlink("/proc/thread-self/ns/net")


def test_runs_inside_the_namespace_and_leaves_the_caller_where_it_was(pods):
    path = pods.netns()
    home = current_netns()
    with NetNS(path) as ns:
        inside = ns.run(current_netns)
        assert inside == f"net:[{os.stat(path).st_ino}]" != home
        with pytest.raises(ZeroDivisionError):
            ns.run(lambda: 1 / 0)
    assert current_netns() == home


def test_a_path_that_is_not_a_network_namespace_is_refused():
    for path in ("/proc/self/ns/uts", "/etc/hostname"):
        with pytest.raises(NotANetworkNamespace, match=f"{path} is not a network namespace"):
            NetNS(path)

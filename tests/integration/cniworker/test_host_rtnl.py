"""The worker's netlink socket in its own namespace: kept per thread, dropped after any failure."""
from __future__ import annotations

import threading

import pytest

from services.cniworker import netlink


def test_the_socket_is_kept_for_the_thread_and_replaced_after_a_failure():
    with netlink.host_rtnl() as first:
        assert netlink.find_link(first, "lo") is not None
    with netlink.host_rtnl() as again:
        assert again is first
    with pytest.raises(RuntimeError), netlink.host_rtnl() as failing:
        raise RuntimeError("a command failed halfway")
    assert failing is first
    with pytest.raises(OSError):  # closed: it is not used again
        netlink.find_link(first, "lo")
    with netlink.host_rtnl() as fresh:
        assert fresh is not first and netlink.find_link(fresh, "lo") is not None


def test_each_thread_has_its_own_socket():
    with netlink.host_rtnl() as mine:
        pass
    theirs = []

    def other() -> None:
        with netlink.host_rtnl() as ipr:
            theirs.append(ipr)
    thread = threading.Thread(target=other)
    thread.start()
    thread.join()
    assert theirs and theirs[0] is not mine

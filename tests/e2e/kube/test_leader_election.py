"""Two controllers on one API server with the same --election-id: one leads (holds the Lease) and alone
writes Ingress status; a leader killed or stopped is replaced, and the new leader's address is written.

Each controller publishes its own --publish-status-address (10.0.0.1, 10.0.0.2): plain strings written
into status, so the Ingress shows which one wrote it.
"""
from __future__ import annotations

import socket
import time

import pytest

from tests.e2e.ingress.scenarios import Stage
from tests.e2e.kube.helpers import api_controller
from tests.support import k8s
from tests.support.controller import Controller
from tests.support.net import wait_for

# Shorter than the default 30 s so that the kill -9 case (no release: the Lease must expire) stays quick.
LEASE_SECONDS = 6
ELECTION_ID = "pyngress-e2e-leader"
ADDRESSES = ("10.0.0.1", "10.0.0.2")
HOST = "elected.example.com"


@pytest.fixture(scope="module")
def controllers(tmp_path_factory, kubeconfig, cluster, echo):
    with pytest.MonkeyPatch.context() as env:
        env.delenv("POD_NAME", raising=False)  # identities must differ: hostname_pid
        env.delenv("POD_NAMESPACE", raising=False)
        started = [api_controller(tmp_path_factory.mktemp(f"lead{i}"), kubeconfig,
                                  f"--election-id={ELECTION_ID}", f"--election-lease-seconds={LEASE_SECONDS}",
                                  f"--publish-status-address={address}"
                                  ).start(wait=False)
                   for i, address in enumerate(ADDRESSES)]
    try:
        for controller in started:
            controller.wait_healthy()
        stage = Stage(started[0], cluster, echo)
        cluster.apply(*stage.backend("ELECTED"),
                      k8s.ingress("elected", [k8s.rule(HOST, ("/", "Prefix", "elected", 80))]))
        for controller in started:
            Stage(controller, cluster, echo).expect(HOST, "/", "ELECTED")
        yield started
    finally:
        for controller in started:
            controller.stop()


def identity(controller: Controller) -> str:
    """The identity a controller's syncer campaigns with (services.syncer.ingress_status.leader.default_identity)."""
    return f"{socket.gethostname()}_{controller.pid('syncer')}"


def address(controllers: list[Controller], controller: Controller) -> str:
    return ADDRESSES[controllers.index(controller)]


def lease(api) -> dict:
    [found] = [obj for obj in api.objects("Lease") if obj["metadata"]["name"] == ELECTION_ID]
    return found


def elected_ingress(api) -> dict:
    [ingress] = [obj for obj in api.objects("Ingress") if obj["metadata"]["name"] == "elected"]
    return ingress


def published(api) -> list[str]:
    status = elected_ingress(api)["status"]
    return [entry.get("ip") for entry in status.get("loadBalancer", {}).get("ingress") or []]


def leader(api, controllers: list[Controller]) -> Controller | None:
    """The running controller whose syncer holds the Lease and whose address the Ingress shows, if any."""
    holder = lease(api)["spec"].get("holderIdentity")
    for controller in controllers:
        if controller.proc.poll() is None and identity(controller) == holder:
            return controller if published(api) == [address(controllers, controller)] else None
    return None


def test_exactly_one_controller_leads_and_writes_status(api, controllers):
    first = wait_for(lambda: leader(api, controllers), 30, what="one leader with its address published")
    before = lease(api)
    version = elected_ingress(api)["metadata"]["resourceVersion"]
    # Over a whole lease duration: the leader keeps renewing, nobody else takes over or rewrites status.
    time.sleep(LEASE_SECONDS)
    after = lease(api)
    assert after["spec"]["holderIdentity"] == identity(first)
    assert after["spec"]["renewTime"] != before["spec"]["renewTime"], "the leader stopped renewing"
    assert after["spec"].get("leaseTransitions") == before["spec"].get("leaseTransitions")
    assert elected_ingress(api)["metadata"]["resourceVersion"] == version, \
        "the Ingress status was rewritten though the leader did not change"
    assert published(api) == [address(controllers, first)]


def test_a_killed_leader_is_replaced(api, controllers):
    old = wait_for(lambda: leader(api, controllers), 30, what="a leader")
    old_identity = identity(old)
    old.kill9("syncer")
    # Nobody released the Lease: it must expire (by the followers' clocks) before anyone takes it over. The
    # killed syncer, restarted by supervisord, campaigns again under a new identity and may win.
    def new_leader() -> Controller | None:
        return lease(api)["spec"].get("holderIdentity") != old_identity and leader(api, controllers)
    new = wait_for(new_leader, 3 * LEASE_SECONDS + 15, what="a new leader with its address published")
    assert identity(new) != old_identity
    assert lease(api)["spec"]["leaseTransitions"] >= 1


def test_a_stopped_leader_hands_over_within_the_lease_duration(api, controllers):
    old = wait_for(lambda: leader(api, controllers), 30, what="a leader")
    [other] = [c for c in controllers if c is not old]
    old_identity = identity(old)
    old.stop()
    # A leader that stops cleanly releases the Lease, so the other one need not wait for it to expire.
    assert lease(api)["spec"].get("holderIdentity") in (None, "", identity(other))
    assert lease(api)["spec"].get("holderIdentity") != old_identity
    wait_for(lambda: leader(api, controllers) is other, LEASE_SECONDS, what="the other controller leading")
    assert published(api) == [address(controllers, other)]

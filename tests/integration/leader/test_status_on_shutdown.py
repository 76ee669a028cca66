"""--update-status-on-shutdown: the leader that stops gracefully clears the status of the Ingresses it
served, unless another replica runs (a ready Pod endpoint of the --publish-service Service other than its
own), against the Kubernetes API test server."""
from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kubernetes import client

from services.common.objects import object_key
from services.common.settings import Settings
from services.syncer.ingress_status.leader import LeaderElector
from services.syncer.ingress_status.updater import IngressStatusUpdater, other_replicas
from tests.integration.leader.support import store_of, until
from tests.integration.leader.test_ingress_status import create_ingresses, status_of

NS, SERVICE, POD = "ingress-nginx", "controller", "controller-7d9f-abcde"
PUBLISH = f"{NS}/{SERVICE}"


def endpoint_slice(*pods: tuple[str, bool]) -> dict[str, Any]:
    return {"metadata": {"name": f"{SERVICE}-x", "namespace": NS, "labels": {"kubernetes.io/service-name": SERVICE}},
            "addressType": "IPv4", "ports": [{"port": 80}],
            "endpoints": [{"addresses": [f"10.0.0.{i + 1}"], "conditions": {"ready": ready},
                           "targetRef": {"kind": "Pod", "namespace": NS, "name": name}}
                          for i, (name, ready) in enumerate(pods)]}


@pytest.mark.parametrize("pods, pod_name, publish, expected", [
    ([(POD, True)], POD, PUBLISH, []),
    ([(POD, True), ("controller-7d9f-other", True)], POD, PUBLISH, ["controller-7d9f-other"]),
    ([(POD, True), ("controller-7d9f-going", False)], POD, PUBLISH, []),  # not ready: terminating
    ([(POD, True)], None, PUBLISH, None),  # outside a pod: who are we?
    ([(POD, True)], POD, None, None),  # no publish Service: where would the replicas be?
    ([("someone-else", True)], POD, "other/controller", []),  # another Service's endpoints do not count
])
def test_other_replicas_are_the_ready_pods_of_the_publish_service(pods, pod_name, publish, expected):
    slice_ = endpoint_slice(*pods)
    store = {object_key({"kind": "EndpointSlice", **slice_}): slice_}
    assert other_replicas(store, publish_service=publish, pod_name=pod_name) == expected


def setup_cluster(api, api_client, *pods: tuple[str, bool]) -> None:
    create_ingresses(api_client)
    core = client.CoreV1Api(api_client)
    core.create_namespace({"metadata": {"name": NS}})
    core.create_namespaced_service(NS, {"metadata": {"name": SERVICE}, "spec": {"type": "LoadBalancer",
                                                                                  "ports": [{"port": 80}]}})
    core.patch_namespaced_service_status(SERVICE, NS, {"status": {"loadBalancer": {"ingress": [{"ip": "198.51.100.7"}]}}})
    client.DiscoveryV1Api(api_client).create_namespaced_endpoint_slice(NS, endpoint_slice(*pods))


def full_store(api) -> dict[str, Any]:
    return {**store_of(api), **{object_key(obj): obj for obj in api.objects("EndpointSlice")}}


@pytest.mark.parametrize("pods, flag, cleared", [
    ([(POD, True)], True, True),
    ([(POD, True), ("controller-7d9f-other", True)], True, False),
    ([(POD, True)], False, False),
])
def test_a_stopping_leader_clears_the_status_only_when_it_is_the_last_replica(api, api_client, monkeypatch, pods,
                                                                             flag, cleared):
    monkeypatch.setenv("POD_NAME", POD)
    setup_cluster(api, api_client, *pods)
    settings = Settings.from_flags(publish_service=PUBLISH, update_status_on_shutdown=flag)

    async def scenario():
        elector = LeaderElector(api_client, name="shutdown-election", namespace="default", identity=POD,
                                lease_duration=3)
        updater = IngressStatusUpdater(api_client, settings=settings, resync_seconds=0.2)
        task = asyncio.create_task(elector.run(lambda: updater.run(lambda: full_store(api)),
                                               before_release=lambda: updater.clear_on_shutdown(full_store(api))))
        await until(lambda: status_of(api_client, "ours")[0] == [{"ip": "198.51.100.7"}], "the status written")
        task.cancel()  # what SIGTERM does to the syncer's tasks
        await asyncio.gather(task, return_exceptions=True)
        lease = client.CoordinationV1Api(api_client).read_namespaced_lease("shutdown-election", "default")
        assert lease.spec.holder_identity is None  # released after the status was handled
    asyncio.run(scenario())
    assert status_of(api_client, "ours")[0] == ([] if cleared else [{"ip": "198.51.100.7"}])
    assert status_of(api_client, "theirs")[0] == []  # another class's Ingress is never touched


def stop_right_after_the_write(api, api_client, monkeypatch, store_at_stop) -> None:
    """The last replica's leader stops (SIGTERM) as soon as its status write of "ours" has landed or, when the API
    server holds it, is on its way."""
    monkeypatch.setenv("POD_NAME", POD)
    settings = Settings.from_flags(publish_service=PUBLISH, update_status_on_shutdown=True)

    async def scenario():
        elector = LeaderElector(api_client, name="shutdown-race", namespace="default", identity=POD, lease_duration=3)
        updater = IngressStatusUpdater(api_client, settings=settings, resync_seconds=0.2)
        task = asyncio.create_task(elector.run(lambda: updater.run(lambda: full_store(api)),
                                               before_release=lambda: updater.clear_on_shutdown(store_at_stop())))
        await until(lambda: status_of(api_client, "ours")[0] == [{"ip": "198.51.100.7"}] or api.holding,
                    "the status write sent")
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    asyncio.run(scenario())


def test_a_stop_right_after_a_write_clears_it_though_the_store_does_not_show_it_yet(api, api_client, monkeypatch):
    setup_cluster(api, api_client, (POD, True))
    before_the_write = full_store(api)  # the watcher's store when SIGTERM comes before the write's watch event
    stop_right_after_the_write(api, api_client, monkeypatch, lambda: before_the_write)
    assert status_of(api_client, "ours")[0] == []


def test_a_stop_during_a_write_clears_the_status_after_that_write_lands(api, api_client, monkeypatch):
    setup_cluster(api, api_client, (POD, True))
    api.hold_next_requests(1, 1.0, "PATCH")  # the status write is on its way when the stop comes
    stop_right_after_the_write(api, api_client, monkeypatch, lambda: full_store(api))
    assert status_of(api_client, "ours")[0] == []

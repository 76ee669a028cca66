"""Ingress status: the leader writes the published addresses into status.loadBalancer.ingress of the
Ingresses it serves, through the status subresource, only when they differ."""
from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from kubernetes import client

from services.common.settings import Settings
from services.syncer.ingress_status.leader import LeaderElector
from services.syncer.ingress_status.updater import IngressStatusUpdater, parse_status_addresses, service_addresses
from tests.integration.leader.support import store_of, until


def ingress(name: str, class_name: str = "nginx") -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"ingressClassName": class_name, "rules": [{"host": f"{name}.example"}]}}


def create_ingresses(api_client: client.ApiClient) -> None:
    networking = client.NetworkingV1Api(api_client)
    networking.create_ingress_class({"metadata": {"name": "nginx"}, "spec": {"controller": "k8s.io/ingress-nginx"}})
    networking.create_ingress_class({"metadata": {"name": "other"}, "spec": {"controller": "example.com/other"}})
    networking.create_namespaced_ingress("default", ingress("ours"))
    networking.create_namespaced_ingress("default", ingress("theirs", "other"))


def status_of(api_client: client.ApiClient, name: str) -> tuple[list[dict[str, Any]], str]:
    """(status.loadBalancer.ingress, resourceVersion) as the API serves them."""
    raw = client.NetworkingV1Api(api_client).read_namespaced_ingress(name, "default", _preload_content=False)
    obj = json.loads(raw.data)
    return obj["status"].get("loadBalancer", {}).get("ingress", []), obj["metadata"]["resourceVersion"]


def test_published_addresses_are_written_to_our_ingresses_only_and_only_when_they_differ(api, api_client):
    create_ingresses(api_client)
    updater = IngressStatusUpdater(
        api_client, settings=Settings.from_flags(publish_status_address="192.0.2.10, LB.example.com"))

    async def scenario():
        assert await updater.update(store_of(api)) == 1
        addresses, version = status_of(api_client, "ours")
        assert addresses == [{"hostname": "lb.example.com"}, {"ip": "192.0.2.10"}]
        assert status_of(api_client, "theirs")[0] == []
        assert await updater.update(store_of(api)) == 0  # already right: nothing written
        assert status_of(api_client, "ours")[1] == version
    asyncio.run(scenario())


def test_a_write_not_yet_seen_in_the_store_is_not_repeated(api, api_client):
    create_ingresses(api_client)
    updater = IngressStatusUpdater(api_client, settings=Settings.from_flags(publish_status_address="192.0.2.10"))

    async def scenario():
        stale = store_of(api)
        assert await updater.update(stale) == 1
        assert await updater.update(stale) == 0
    asyncio.run(scenario())


def test_publish_service_addresses_follow_its_load_balancer(api, api_client):
    create_ingresses(api_client)
    core = client.CoreV1Api(api_client)
    core.create_namespace({"metadata": {"name": "ingress-nginx"}})
    core.create_namespaced_service("ingress-nginx", {"metadata": {"name": "controller"},
                                                     "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]}})
    updater = IngressStatusUpdater(api_client, settings=Settings.from_flags(publish_service="ingress-nginx/controller"))

    def balance(address: dict[str, str]) -> None:
        core.patch_namespaced_service_status("controller", "ingress-nginx",
                                             {"status": {"loadBalancer": {"ingress": [address]}}})

    async def scenario():
        balance({"ip": "198.51.100.7"})
        assert await updater.update(store_of(api)) == 1
        assert status_of(api_client, "ours")[0] == [{"ip": "198.51.100.7"}]
        balance({"hostname": "elb.example.net"})
        assert await updater.update(store_of(api)) == 1
        assert status_of(api_client, "ours")[0] == [{"hostname": "elb.example.net"}]
    asyncio.run(scenario())


def test_a_missing_publish_service_writes_nothing(api, api_client):
    create_ingresses(api_client)
    updater = IngressStatusUpdater(api_client, settings=Settings.from_flags(publish_service="default/missing"))
    assert asyncio.run(updater.update(store_of(api))) == 0
    assert status_of(api_client, "ours")[0] == []


@pytest.mark.parametrize("service, expected", [
    ({"spec": {"type": "ClusterIP", "clusterIP": "10.96.0.20"}}, [{"ip": "10.96.0.20"}]),
    ({"spec": {"type": "NodePort", "clusterIP": "10.96.0.20", "externalIPs": ["203.0.113.5"]}}, [{"ip": "203.0.113.5"}]),
    ({"spec": {"type": "ExternalName", "externalName": "lb.example.org"}}, [{"hostname": "lb.example.org"}]),
    ({"spec": {"type": "LoadBalancer", "externalIPs": ["203.0.113.5"]},
      "status": {"loadBalancer": {"ingress": [{"ip": "198.51.100.7"}]}}}, [{"ip": "198.51.100.7"}, {"ip": "203.0.113.5"}]),
    ({"spec": {"type": "LoadBalancer"}, "status": {"loadBalancer": {}}}, []),
])
def test_service_addresses_by_service_type(service, expected):
    assert service_addresses(service) == expected


def test_update_status_false_writes_nothing(api, api_client):
    create_ingresses(api_client)
    updater = IngressStatusUpdater(
        api_client, settings=Settings.from_flags(publish_status_address="192.0.2.10", update_status=False))
    assert asyncio.run(updater.update(store_of(api))) == 0
    assert status_of(api_client, "ours")[0] == []


def test_an_invalid_publish_status_address_turns_status_off_with_a_clear_reason(api_client):
    updater = IngressStatusUpdater(
        api_client, settings=Settings.from_flags(publish_status_address="192.0.2.10,not a name"))
    assert "'not a name' is neither an IP address nor a DNS name" in updater.disabled_reason
    with pytest.raises(ValueError, match="empty"):
        parse_status_addresses(" , ")


def test_only_the_leader_writes_statuses(api, api_client):
    create_ingresses(api_client)
    settings = Settings.from_flags(publish_status_address="192.0.2.10")

    async def scenario():
        updating: list[str] = []  # identities whose status updater ran
        tasks = {}
        electors = {}
        for identity in ("a", "b"):
            electors[identity] = LeaderElector(api_client, name="status-election", namespace="default", identity=identity,
                                               lease_duration=3)
            updater = IngressStatusUpdater(api_client, settings=settings, resync_seconds=0.2)

            async def update_statuses(identity: str = identity, updater: IngressStatusUpdater = updater) -> None:
                updating.append(identity)
                await updater.run(lambda: store_of(api))
            tasks[identity] = asyncio.create_task(electors[identity].run(update_statuses))
        try:
            await until(lambda: status_of(api_client, "ours")[0] == [{"ip": "192.0.2.10"}], "the status")
            client.NetworkingV1Api(api_client).create_namespaced_ingress("default", ingress("later"))
            await until(lambda: status_of(api_client, "later")[0] == [{"ip": "192.0.2.10"}], "the new Ingress's status")
            [leader] = [identity for identity, elector in electors.items() if elector.is_leader]
            assert updating == [leader]
        finally:
            for task in tasks.values():
                task.cancel()
            await asyncio.gather(*tasks.values(), return_exceptions=True)
    asyncio.run(scenario())

"""The Ingress status updater looks at the Ingresses a sync changed, not at every Ingress of the store at every sync;
all of them again only when the addresses or an IngressClass change."""
from __future__ import annotations

import asyncio

from kubernetes import client

from services.common.objects import object_key
from services.common.settings import Settings
from services.syncer.ingress_status.updater import IngressStatusUpdater
from tests.integration.leader.support import store_of

INGRESSES = 30


def ingress(name: str, class_name: str = "nginx") -> dict:
    return {"metadata": {"name": name}, "spec": {"ingressClassName": class_name, "rules": [{"host": f"{name}.example"}]}}


def test_a_round_after_a_change_looks_at_the_changed_ingresses_only(api, api_client):
    networking = client.NetworkingV1Api(api_client)
    networking.create_ingress_class({"metadata": {"name": "nginx"}, "spec": {"controller": "k8s.io/ingress-nginx"}})
    for i in range(INGRESSES):
        networking.create_namespaced_ingress("default", ingress(f"app{i}"))
    settings = Settings.from_flags(publish_status_address="192.0.2.10")
    updater = IngressStatusUpdater(api_client, settings=settings)

    async def scenario():
        assert await updater.update(store_of(api), None) == INGRESSES
        looked = updater.looked_at
        networking.create_namespaced_ingress("default", ingress("late"))
        networking.create_namespaced_ingress("default", ingress("theirs", "other"))
        store = store_of(api)
        late, theirs = (object_key(obj) for obj in api.objects("Ingress") if obj["metadata"]["name"] in ("late", "theirs"))
        assert await updater.update(store, frozenset({late, theirs})) == 1
        assert updater.looked_at - looked == 1  # "theirs" is another class's: not compared
        assert [a.ip for a in networking.read_namespaced_ingress_status("late", "default").status.load_balancer
                .ingress] == ["192.0.2.10"]

        # Other addresses: every Ingress again.
        updater._fixed = [{"ip": "192.0.2.11"}]
        assert await updater.update(store_of(api), frozenset()) == INGRESSES + 1
    asyncio.run(scenario())

"""Ingress status in the syncer: campaign for the Lease, and while leading keep every served Ingress's
status.loadBalancer right (services/syncer/ingress_status/leader.py, services/syncer/ingress_status/updater.py),
and the Gateway API objects' status (services/syncer/ingress_status/gateway_status.py).

Only with a Kubernetes API (--kubeconfig or in-cluster): a manifests directory has no status to write.
With --update-status=false this task does not campaign at all: writing status is the only thing a
leader does in pyngress, so a Lease would only cost every replica a write every few seconds and name a
leader of nothing. (ingress-nginx campaigns either way.)
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable, Mapping

from services.common.changed_keys import ChangedKeys
from services.common.logs import kv
from services.common.settings import Settings

# The Kubernetes client is imported inside run_status_updates only: in manifests mode the syncer
# imports this module but must not pay for the client (memory, start-up time).

log = logging.getLogger(__name__)

def status_updates_enabled(settings: Settings) -> bool:
    """Whether the syncer should run `run_status_updates` at all."""
    return settings.leader.update_status and not settings.source.manifests


async def run_status_updates(settings: Settings, *, current_store: Callable[[], Mapping[str, Any]],
                             after_sync: list[Callable[[], None]], errors: dict[str, str],
                             leadership: dict[str, Callable[[], bool]],
                             synced_keys: Callable[[], ChangedKeys] = lambda: None,
                             taken_ports: Callable[[], Mapping[int, str]] = dict,
                             ingress_owners: Callable[[], Mapping[str, str]] = dict) -> None:
    """Campaign, and write Ingress status while leading, until cancelled.

    current_store: the syncer's store as it is now. after_sync: the syncer's callbacks, called after each
    sync; the updater joins them to be told when the store has changed, and at which keys (`synced_keys()`, read
    then: None when any may have). errors: filled with what the API
    refuses or fails ("lease", "ingress status" → the API's message) while it does, for /healthz. leadership:
    the Lease's name → whether this process holds it now, for /metrics. taken_ports: the Gateway listeners' ports
    another program held when the syncer last applied (port → why), for their status. ingress_owners: the applied
    model's host → the namespace whose Ingress owns it, for the routes' status.

    It never returns on its own (the syncer stops when one of its tasks ends): a configuration that
    cannot work is logged and status updates stay off; everything else keeps working.
    """
    from kubernetes import client

    from services.common.kube import KubeConfigError, kube_configuration

    from .gateway_status import GatewayStatusUpdater
    from .leader import LeaderElector
    from .updater import IngressStatusUpdater

    try:
        configuration = await asyncio.to_thread(kube_configuration, settings)
    except KubeConfigError as err:
        errors["kubeconfig"] = str(err)
        log.error("Ingress status updates are off", extra=kv(reason=str(err)))
        await asyncio.Event().wait()  # parked until the syncer stops
        return
    api_client = client.ApiClient(configuration)
    updater = IngressStatusUpdater(api_client, settings=settings, errors=errors)
    gateways = GatewayStatusUpdater(api_client, settings=settings, addresses=updater.addresses, errors=errors,
                                    taken_ports=taken_ports, ingress_owners=ingress_owners)
    elector = LeaderElector.from_settings(settings, api_client, errors=errors)
    log.info("campaigning for the Ingress status lease", extra=kv(
        lease=f"{elector.namespace}/{elector.name}", identity=elector.identity,
        lease_seconds=elector.lease_duration))
    def notify_updater() -> None:
        updater.notify(synced_keys())
    after_sync.extend((notify_updater, gateways.notify))
    leadership[elector.name] = lambda: elector.is_leader

    async def while_leading() -> None:
        await asyncio.gather(updater.run(current_store), gateways.run(current_store))
    try:
        await elector.run(while_leading, before_release=lambda: updater.clear_on_shutdown(current_store()))
    finally:
        after_sync.remove(notify_updater)
        after_sync.remove(gateways.notify)
        api_client.close()


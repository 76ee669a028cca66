"""Gateway API status: while leading, the syncer writes what model/gateway/status.py decides into our GatewayClasses,
Gateways and the HTTPRoutes that name them, through the status subresource, and only where it differs.

Writes do not fight other writers:
- an HTTPRoute's status.parents is shared with every controller its parentRefs name: pyngress rewrites only the
  entries whose controllerName is its own (--gateway-controller-name), keeps the others as they are, and sends the
  resourceVersion it read, so that a write racing another controller's gets 409 and is made again from what the
  watch then shows;
- a condition keeps the lastTransitionTime the object shows while its status stays the same;
- nothing is written when the object already shows what pyngress would write, so a write's own watch event causes
  no second write.

What pyngress no longer serves is cleared of its entries: a route's parent entries for a Gateway that is no longer
ours (or a parentRef removed), and the status of a Gateway this process wrote whose class is no longer ours.
The addresses are the Ingress status's (IngressStatusUpdater.addresses: --publish-status-address,
--publish-service, or the node).
"""
from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any, Awaitable, Callable, Mapping

from kubernetes import client

from services.common.kube import api_error_text, read_json
from services.common.logs import kv
from services.common.settings import Settings
from services.syncer.model.gateway import GatewayObjects
from services.syncer.model.gateway.objects import GATEWAY_GROUP
from services.syncer.model.gateway.status import route_kinds, store_statuses

from .updater import MERGE_PATCH, REQUEST_TIMEOUT_SECONDS, RESYNC_SECONDS, Address

log = logging.getLogger(__name__)

_PLURALS = {"GatewayClass": "gatewayclasses", "Gateway": "gateways", "HTTPRoute": "httproutes",
            "GRPCRoute": "grpcroutes", "TLSRoute": "tlsroutes", "BackendTLSPolicy": "backendtlspolicies"}


def stamped(wanted: list[dict[str, Any]], shown: Any, now: str) -> list[dict[str, Any]]:
    """`wanted` conditions with a lastTransitionTime: the one `shown` has for the same type while its status is the
    same, else `now`."""
    before = {c.get("type"): c for c in shown if isinstance(c, dict)} if isinstance(shown, list) else {}
    result = []
    for wanted_condition in wanted:
        old = before.get(wanted_condition["type"]) or {}
        kept = old.get("lastTransitionTime") if old.get("status") == wanted_condition["status"] else None
        result.append({**wanted_condition, "lastTransitionTime": kept or now})
    return result


def stamped_status(wanted: dict[str, Any], shown: Mapping[str, Any], now: str) -> dict[str, Any]:
    """A Gateway's or GatewayClass's status with each conditions list (its own, each listener's) stamped."""
    result = {**wanted, "conditions": stamped(wanted["conditions"], shown.get("conditions"), now)}
    if "listeners" in wanted:
        shown_listeners = {listener.get("name"): listener for listener in shown.get("listeners") or ()
                           if isinstance(listener, dict)}
        result["listeners"] = [{**listener, "conditions": stamped(
            listener["conditions"], (shown_listeners.get(listener["name"]) or {}).get("conditions"), now)}
            for listener in wanted["listeners"]]
    return result


def merged_parents(ours: list[dict[str, Any]], shown: Any, *, controller: str, now: str,
                   ref_field: str = "parentRef") -> list[dict[str, Any]]:
    """A route's status.parents (a BackendTLSPolicy's status.ancestors, keyed by `ref_field` "ancestorRef"): the other
    controllers' entries as shown, ours (stamped) where they were, the new ones of ours last; so that entries in
    another order than pyngress would put them cause no write."""
    wanted = {_ref_key(entry[ref_field]): entry for entry in ours}
    merged = []
    for entry in shown if isinstance(shown, list) else ():
        if not isinstance(entry, dict) or entry.get("controllerName") != controller:
            merged.append(entry)
        elif (mine := wanted.pop(_ref_key(entry.get(ref_field)), None)) is not None:
            merged.append({**mine, "conditions": stamped(mine["conditions"], entry.get("conditions"), now)})
    return merged + [{**entry, "conditions": stamped(entry["conditions"], None, now)} for entry in wanted.values()]


def _ref_key(ref: Any) -> str:
    return json.dumps(ref, sort_keys=True)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class GatewayStatusUpdater:
    """Run `run(current_store)` while leading; call `notify()` whenever the store changes."""

    def __init__(self, api_client: client.ApiClient, *, settings: Settings,
                 addresses: Callable[[], Awaitable[list[Address] | None]], resync_seconds: float = RESYNC_SECONDS,
                 errors: dict[str, str] | None = None,
                 taken_ports: Callable[[], Mapping[int, str]] = dict,
                 ingress_owners: Callable[[], Mapping[str, str]] = dict) -> None:
        self.settings = settings
        # The applied model's host → the namespace whose Ingress owns it: a route of another namespace does not serve
        # that host, and its status says so as the model decides.
        self._ingress_owners = ingress_owners
        # The listeners' ports another program held when the syncer last applied (port → why): the model cannot know.
        self._taken_ports = taken_ports
        self.controller = settings.ingress.gateway_controller_name
        self.resync_seconds = resync_seconds
        # Shared with the syncer's /healthz detail: "gateway status" → why the last round failed, while it fails.
        self.errors = {} if errors is None else errors
        self._addresses = addresses
        self._api = client.CustomObjectsApi(api_client)
        self._poked = asyncio.Event()
        # What we last wrote, by store key: (its resourceVersion before the write, what was written without times).
        # While the store still shows that resourceVersion, it has not caught up with our write yet.
        self._written: dict[str, tuple[str, str]] = {}
        self._our_gateways: set[str] = set()  # the Gateways whose status this process wrote (store keys)
        # What the API refused this round (a 403 on one kind, a 409 racing another writer): the other objects are
        # written all the same, and update() raises the first refusal at the end.
        self._refusals: list[client.ApiException] = []

    def notify(self) -> None:
        """The store changed: compare again soon."""
        self._poked.set()

    async def run(self, current_store: Callable[[], Mapping[str, Any]]) -> None:
        """Keep the statuses right until cancelled: on every notify(), and every resync_seconds."""
        while True:
            self._poked.clear()
            try:
                await self.update(current_store())
                self.errors.pop("gateway status", None)
            except Exception as err:  # the API unreachable, or a 409 from a racing writer: the next round tries again
                self.errors["gateway status"] = text = api_error_text(err)
                log.warning("Gateway API status update failed", extra=kv(error=text))
            try:
                await asyncio.wait_for(self._poked.wait(), self.resync_seconds)
            except asyncio.TimeoutError:
                pass

    async def update(self, store: Mapping[str, Any]) -> int:
        """Write every status that differs from what pyngress would write; returns how many were written. Raises the
        API's first refusal, once every other object has been written."""
        self._refusals = []
        objects = GatewayObjects.of(store)
        if not (objects.classes or objects.gateways or any(routes for _, routes in route_kinds(objects))):
            return 0
        self._forget_missing(store)
        addresses = await self._addresses() or []
        # In a thread (1,000 routes in a 30,000-object store: about 0.1 s), on a copy: the syncer changes its store
        # between syncs, and the objects themselves are replaced, never changed in place.
        wanted = await asyncio.to_thread(store_statuses, dict(store), settings=self.settings, addresses=addresses,
                                         taken_ports=dict(self._taken_ports()),
                                         ingress_owners=self._ingress_owners())
        now = _now()
        written = 0
        for name, status in wanted.classes.items():
            written += await self._write_whole("GatewayClass", None, name, objects.classes[name], status, now)
        for (namespace, name), status in wanted.gateways.items():
            key = f"Gateway/{namespace}/{name}"
            self._our_gateways.add(key)
            written += await self._write_whole("Gateway", namespace, name, objects.gateways[namespace, name],
                                               status, now)
        for key in sorted(self._our_gateways):
            _, namespace, name = key.split("/", 2)
            if (namespace, name) not in wanted.gateways:
                self._our_gateways.discard(key)
                gateway = objects.gateways.get((namespace, name))
                if gateway is not None and gateway.get("status"):
                    written += await self._patch("Gateway", namespace, name, gateway, {
                        "status": {"addresses": None, "conditions": None, "listeners": None}}, "cleared")
        for kind, routes in route_kinds(objects):
            for (namespace, name), route in routes.items():
                written += await self._write_parents(kind, namespace, name, route,
                                                     wanted.routes.get((kind, namespace, name), []), now)
        for (namespace, name), policy in objects.tls_policies.items():
            written += await self._write_parents("BackendTLSPolicy", namespace, name, policy,
                                                 wanted.policies.get((namespace, name), []), now,
                                                 field="ancestors", ref_field="ancestorRef")
        if self._refusals:
            raise self._refusals[0]
        return written

    def _forget_missing(self, store: Mapping[str, Any]) -> None:
        for key in [key for key in self._written if key not in store]:
            del self._written[key]

    async def _write_whole(self, kind: str, namespace: str | None, name: str, obj: dict[str, Any],
                           wanted: dict[str, Any], now: str) -> int:
        """A status pyngress owns whole (its class is ours): conditions, listeners and addresses replaced."""
        shown = obj.get("status") or {}
        status = stamped_status(wanted, shown, now)
        if all(shown.get(field) == value for field, value in status.items()):
            return 0
        return await self._patch(kind, namespace, name, obj, {"status": status}, wanted)

    async def _write_parents(self, kind: str, namespace: str, name: str, route: dict[str, Any],
                             ours: list[dict[str, Any]], now: str, *, field: str = "parents",
                             ref_field: str = "parentRef") -> int:
        """A route's status.parents, or (`field` "ancestors") a policy's status.ancestors."""
        shown = (route.get("status") or {}).get(field) or []
        if not ours and not any(isinstance(p, dict) and p.get("controllerName") == self.controller for p in shown):
            return 0
        parents = merged_parents(ours, shown, controller=self.controller, now=now, ref_field=ref_field)
        if parents == shown:
            return 0
        version = (route.get("metadata") or {}).get("resourceVersion")
        # The resourceVersion read: a write racing another controller's gets 409 instead of dropping its entries.
        return await self._patch(kind, namespace, name, route,
                                 {"metadata": {"resourceVersion": version}, "status": {field: parents}}, ours)

    async def _patch(self, kind: str, namespace: str | None, name: str, obj: dict[str, Any], body: dict[str, Any],
                     wanted: Any) -> int:
        key = f"{kind}/{namespace or ''}/{name}"
        version = str((obj.get("metadata") or {}).get("resourceVersion", ""))
        fingerprint = json.dumps(wanted, sort_keys=True)
        if self._written.get(key) == (version, fingerprint):
            return 0  # already written; the store has not shown it yet
        api_version = str(obj.get("apiVersion") or f"{GATEWAY_GROUP}/v1").rpartition("/")[2]
        if namespace is None:
            call: tuple[Any, ...] = (self._api.patch_cluster_custom_object_status, GATEWAY_GROUP, api_version,
                                     _PLURALS[kind], name, body)
        else:
            call = (self._api.patch_namespaced_custom_object_status, GATEWAY_GROUP, api_version, namespace,
                    _PLURALS[kind], name, body)
        try:
            await asyncio.to_thread(read_json, *call, request_timeout=REQUEST_TIMEOUT_SECONDS,
                                    _content_type=MERGE_PATCH)
        except client.ApiException as err:
            if err.status != 404:  # 404: deleted meanwhile
                self._refusals.append(err)
            return 0
        self._written[key] = (version, fingerprint)
        log.info("Gateway API status updated", extra=kv(object=f"{kind} {namespace + '/' if namespace else ''}{name}"))
        return 1

"""Ingress status: the leader writes where the controller is reached into status.loadBalancer.ingress of
every Ingress it serves, through the status subresource, and only where it differs.

The addresses, as ingress-nginx finds them:
- --publish-status-address "A,B,...": each an IP address (→ `ip`) or a DNS name (→ `hostname`);
- else --publish-service NS/NAME: that Service's load balancer addresses and external IPs
  (ExternalName: its name; ClusterIP, or NodePort without external IPs: its cluster IP);
- else --node-name: that Node's ExternalIP, else its InternalIP;
- else nothing is written.
--update-status=false turns all of it off.

Each round after a sync looks at the Ingresses that sync changed (notify's keys): going through every Ingress of the
store at every sync cost each change a pass over 100,000 of them. Every Ingress is looked at again in the first round,
after a round that failed, at each resync (RESYNC_SECONDS without a change) and when the addresses or an
IngressClass change.

On a graceful stop (SIGTERM) the leader clears the status of every Ingress it served, as ingress-nginx's
--update-status-on-shutdown (default true) does, unless another replica runs: one whose Pod is a ready
endpoint of the --publish-service Service (read from the store, so it needs no permission on Pods). Without
--publish-service, or outside a pod (no POD_NAME), pyngress cannot tell and keeps the status.
"""
from __future__ import annotations

import asyncio
import ipaddress
import logging
import os
from typing import Any, Callable, Mapping

from kubernetes import client

from services.common import changed_keys
from services.common.changed_keys import ChangedKeys
from services.common.kube import api_error_text, read_json
from services.common.logs import kv
from services.common.objects import split_key
from services.common.settings import Settings
from services.syncer.model.ingress_class import IngressClassFilter

log = logging.getLogger(__name__)

Address = dict[str, str]  # {"ip": ...} or {"hostname": ...}
RESYNC_SECONDS = 60.0  # the publish Service or Node may change without any Ingress changing
SHUTDOWN_CLEAR_SECONDS = 10.0  # within supervisord's stopwaitsecs for the syncer
REQUEST_TIMEOUT_SECONDS = (5.0, 15.0)
MERGE_PATCH = "application/merge-patch+json"

_HOSTNAME_LABEL_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-")


def _address(text: str) -> Address:
    try:
        return {"ip": str(ipaddress.ip_address(text))}
    except ValueError:
        pass
    labels = text.lower().rstrip(".").split(".")
    if len(text) > 253 or not all(
            0 < len(label) <= 63 and set(label) <= _HOSTNAME_LABEL_CHARS and label[0] != "-" and label[-1] != "-"
            for label in labels):
        raise ValueError(f"--publish-status-address: {text!r} is neither an IP address nor a DNS name")
    return {"hostname": text.lower().rstrip(".")}


def parse_status_addresses(text: str) -> list[Address]:
    """"192.0.2.1, lb.example.com" → [{"ip": "192.0.2.1"}, {"hostname": "lb.example.com"}] (sorted)."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        raise ValueError("--publish-status-address is empty: give IP addresses or DNS names, comma-separated")
    return _sorted(_address(p) for p in parts)


def _sorted(addresses: Any) -> list[Address]:
    unique = {(a.get("ip", ""), a.get("hostname", "")): a for a in addresses}
    return [unique[k] for k in sorted(unique)]


def service_addresses(service: dict[str, Any]) -> list[Address]:
    """Where a Service is reached from outside, as ingress-nginx reads it for --publish-service."""
    spec, status = service.get("spec") or {}, service.get("status") or {}
    kind = spec.get("type") or "ClusterIP"
    external_ips = [{"ip": ip} for ip in spec.get("externalIPs") or []]
    if kind == "ExternalName":
        return [{"hostname": spec["externalName"]}] if spec.get("externalName") else []
    if kind == "LoadBalancer":
        balancers = [{"ip": lb["ip"]} if lb.get("ip") else {"hostname": lb["hostname"]}
                     for lb in (status.get("loadBalancer") or {}).get("ingress") or []
                     if lb.get("ip") or lb.get("hostname")]
        return _sorted(balancers + external_ips)
    if external_ips:
        return _sorted(external_ips)
    cluster_ip = spec.get("clusterIP")
    return [{"ip": cluster_ip}] if cluster_ip and cluster_ip != "None" else []


def node_addresses(node: dict[str, Any]) -> list[Address]:
    addresses = (node.get("status") or {}).get("addresses") or []
    for wanted in ("ExternalIP", "InternalIP"):
        found = [{"ip": a["address"]} for a in addresses if a.get("type") == wanted and a.get("address")]
        if found:
            return _sorted(found)
    return []


def current_addresses(ingress: dict[str, Any]) -> list[Address]:
    entries = ((ingress.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
    return _sorted({k: e[k] for k in ("ip", "hostname") if e.get(k)} for e in entries)


def other_replicas(store: Mapping[str, Any], *, publish_service: str | None, pod_name: str | None) -> list[str] | None:
    """The Pods other than `pod_name` that are ready endpoints of the publish Service ("NS/NAME"); None when
    that cannot be told (no publish Service, or no name of our own)."""
    if not publish_service or not pod_name:
        return None
    namespace, _, name = publish_service.partition("/")
    others = set()
    for key, obj in store.items():
        kind, slice_namespace, _ = split_key(key)
        labels = (obj.get("metadata") or {}).get("labels") or {}
        if kind != "EndpointSlice" or slice_namespace != namespace or labels.get("kubernetes.io/service-name") != name:
            continue
        for endpoint in obj.get("endpoints") or ():
            target = endpoint.get("targetRef") or {}
            ready = (endpoint.get("conditions") or {}).get("ready") is not False
            if ready and target.get("kind") == "Pod" and target.get("name") not in (None, pod_name):
                others.add(target["name"])
    return sorted(others)


def served_ingresses(store: Mapping[str, Any], settings: Settings) -> dict[str, dict[str, Any]]:
    """The store's Ingresses that are ours (by class, as the model decides it), by store key."""
    ours = class_filter(store, settings)
    return {key: obj for key, obj in store.items() if key.startswith("Ingress/") and ours.is_ours(obj)}


def class_filter(store: Mapping[str, Any], settings: Settings) -> IngressClassFilter:
    """Which Ingresses are ours, by the store's IngressClasses."""
    return IngressClassFilter.from_classes([obj for key, obj in store.items() if key.startswith("IngressClass/")],
                                           settings)


class IngressStatusUpdater:
    """Run `run(current_store)` while leading; call `notify()` whenever the store changes."""

    def __init__(self, api_client: client.ApiClient, *, settings: Settings,
                 resync_seconds: float = RESYNC_SECONDS, errors: dict[str, str] | None = None) -> None:
        self.settings = settings
        # Shared with the syncer's /healthz detail: "ingress status" → why the last round failed, while it fails.
        self.errors = {} if errors is None else errors
        self.resync_seconds = resync_seconds
        self._core = client.CoreV1Api(api_client)
        self._networking = client.NetworkingV1Api(api_client)
        self._poked = asyncio.Event()
        # What we last wrote, by Ingress key: (its resourceVersion before the write, the addresses). While
        # the store still shows that resourceVersion it has not caught up with our write yet.
        self._written: dict[str, tuple[str, list[Address]]] = {}
        # Ingresses to which a write of addresses went, landed or not. The store learns of a write through the
        # watch, so at a stop right after one it may not show the addresses yet: clear_on_shutdown clears these too.
        self._published: set[str] = set()
        # Writes whose request is under way. Each runs in a thread, which cancelling the task that awaits it does not
        # stop: clear_on_shutdown waits for them, so that its own writes come last.
        self._writes: set[asyncio.Future[dict[str, Any]]] = set()
        # The store keys changed since the last round (None: look at every Ingress), and what the last round found:
        # the addresses it wrote, the IngressClasses' verdict.
        self._pending: ChangedKeys = None
        self._wanted: list[Address] | None = None
        self._ours: IngressClassFilter | None = None
        self.looked_at = 0  # Ingresses compared with the addresses (a count of the work changes cost)
        self.disabled_reason: str | None = None
        self._fixed: list[Address] | None = None
        if not settings.leader.update_status:
            self.disabled_reason = "--update-status=false"
        elif settings.leader.publish_status_address:
            try:
                self._fixed = parse_status_addresses(settings.leader.publish_status_address)
            except ValueError as err:
                self.disabled_reason = str(err)
                log.error("Ingress status updates are off", extra=kv(reason=str(err)))

    def notify(self, changed: ChangedKeys = None) -> None:
        """The store changed (at the keys `changed`; None: at any): compare again soon."""
        self._pending = changed_keys.union(self._pending, changed)
        self._poked.set()

    async def run(self, current_store: Callable[[], Mapping[str, Any]]) -> None:
        """Keep the statuses right until cancelled: on every notify(), and every resync_seconds."""
        if self.disabled_reason:
            log.info("Ingress status updates are off", extra=kv(reason=self.disabled_reason))
            return
        while True:
            self._poked.clear()
            changed, self._pending = self._pending, frozenset()
            try:
                await self.update(current_store(), changed)
                self.errors.pop("ingress status", None)
            except Exception as err:  # the API unreachable: the next round tries again, every Ingress
                self._pending = None
                self.errors["ingress status"] = text = api_error_text(err)
                log.warning("Ingress status update failed", extra=kv(error=text))
            try:
                await asyncio.wait_for(self._poked.wait(), self.resync_seconds)
            except asyncio.TimeoutError:
                self._pending = None  # the resync: every Ingress

    async def clear_on_shutdown(self, store: Mapping[str, Any]) -> int:
        """At a graceful stop, while still leading: clear the status of every served Ingress unless another
        replica runs (see the module doc); returns how many were cleared."""
        if self.disabled_reason or not self.settings.leader.update_status_on_shutdown:
            return 0
        others = other_replicas(store, publish_service=self.settings.leader.publish_service,
                                pod_name=os.environ.get("POD_NAME"))
        if others is None:
            log.info("Ingress status kept at shutdown: without --publish-service and POD_NAME pyngress cannot tell "
                     "whether another replica runs")
            return 0
        if others:
            log.info("Ingress status kept at shutdown: other replicas run", extra=kv(pods=",".join(others)))
            return 0
        cleared = 0
        try:
            async with asyncio.timeout(SHUTDOWN_CLEAR_SECONDS):
                if self._writes:
                    await asyncio.wait(set(self._writes))
                for key, ingress in served_ingresses(store, self.settings).items():
                    if (current_addresses(ingress) or key in self._published) and await self._write(key, []):
                        cleared += 1
        except TimeoutError:
            log.warning("Ingress status not cleared everywhere before the stop", extra=kv(cleared=cleared))
        log.info("Ingress status cleared at shutdown: no other replica runs", extra=kv(ingresses=cleared))
        return cleared

    async def addresses(self) -> list[Address] | None:
        """The addresses to publish; None when there is nothing to publish (then nothing is written)."""
        if self._fixed is not None:
            return self._fixed
        if self.settings.leader.publish_service:
            namespace, _, name = self.settings.leader.publish_service.partition("/")
            service = await self._get(self._core.read_namespaced_service, name, namespace)
            if service is None:
                log.warning("--publish-service names a Service that does not exist",
                            extra=kv(service=self.settings.leader.publish_service))
                return None
            return service_addresses(service)
        if self.settings.cni.node_name:
            node = await self._get(self._core.read_node, self.settings.cni.node_name)
            return node_addresses(node) if node is not None else None
        return None

    async def update(self, store: Mapping[str, Any], changed: ChangedKeys = None) -> int:
        """Write the status of every served Ingress whose addresses differ (of those at the store keys `changed`
        only, unless the addresses or an IngressClass changed; None: all); returns how many were written."""
        if self.disabled_reason:
            return 0
        wanted = await self.addresses()
        if wanted is None:
            return 0
        if changed is None or wanted != self._wanted or self._ours is None \
                or any(key.startswith("IngressClass/") for key in changed):
            self._ours = class_filter(store, self.settings)
            served = served_ingresses(store, self.settings)
            for key in set(self._written) - served.keys():
                del self._written[key]
            self._published &= served.keys()
        else:
            served = {}
            for key in changed:
                ingress = store.get(key) if key.startswith("Ingress/") else None
                if ingress is not None and self._ours.is_ours(ingress):
                    served[key] = ingress
                else:  # gone, or no longer ours
                    self._written.pop(key, None)
                    self._published.discard(key)
        self._wanted = wanted
        written = 0
        self.looked_at += len(served)
        for key, ingress in served.items():
            resource_version = ingress["metadata"].get("resourceVersion", "")
            if current_addresses(ingress) == wanted:
                continue
            if self._written.get(key) == (resource_version, wanted):
                continue  # already written; the store has not shown it yet
            if await self._write(key, wanted):
                self._written[key] = (resource_version, wanted)
                written += 1
        return written

    async def _write(self, key: str, addresses: list[Address]) -> bool:
        _, namespace, name = split_key(key)
        body = {"status": {"loadBalancer": {"ingress": addresses or None}}}
        if addresses:
            self._published.add(key)
        request = asyncio.ensure_future(self._json(self._networking.patch_namespaced_ingress_status, name, namespace,
                                                   body, _content_type=MERGE_PATCH))
        self._writes.add(request)
        request.add_done_callback(self._write_done)
        try:
            await asyncio.shield(request)  # cancelled, the request goes on (see self._writes)
        except client.ApiException as err:
            if err.status == 404:
                return False  # deleted meanwhile
            raise
        log.info("Ingress status updated", extra=kv(ingress=f"{namespace}/{name}",
                                                    addresses=",".join(a.get("ip") or a["hostname"] for a in addresses)
                                                    or "(none)"))
        return True

    def _write_done(self, request: asyncio.Future[dict[str, Any]]) -> None:
        self._writes.discard(request)
        if not request.cancelled():
            request.exception()  # seen: its task reports it, or was cancelled and no longer needs it

    async def _get(self, fn: Callable[..., Any], *args: Any) -> dict[str, Any] | None:
        try:
            return await self._json(fn, *args)
        except client.ApiException as err:
            if err.status == 404:
                return None
            raise

    @staticmethod
    async def _json(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
        return await asyncio.to_thread(read_json, fn, *args, request_timeout=REQUEST_TIMEOUT_SECONDS, **kwargs)

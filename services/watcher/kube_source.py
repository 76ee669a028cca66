"""The Kubernetes API as a watcher source: list, then watch, each kind the syncer needs; relist on 410 Gone.

Each watch target (a kind, in one namespace or in all) runs as an asyncio task: list (paged), publish
exactly the difference from what this target published before, then watch from the list's
resourceVersion with bookmarks, and re-watch from the last resourceVersion seen whenever a watch ends.
A 410 Gone means the history since that resourceVersion is gone: the target relists. A lost connection
is retried with capped exponential backoff and jitter, resuming the watch where it stopped.

The official client (services/common/kube.py says why) blocks, so its calls run in a thread pool of our
own, one thread per target (the loop's default pool is small and shared); the asyncio side keeps all the
logic, and only raw I/O (opening a request, reading the next chunk of a watch stream) crosses into a
thread.
"""
from __future__ import annotations

import asyncio
import functools
import json
import logging
import random
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, AsyncIterator, Callable, Iterable, Iterator

import urllib3
from kubernetes import client

from services.common.kube import CONNECT_TIMEOUT_SECONDS, api_error_text, kube_configuration, read_json
from services.common.logs import kv
from services.common.objects import object_key
from services.common.settings import Settings
from services.watcher.filters import keep, slim
from services.watcher.source import StoreWriter

log = logging.getLogger(__name__)

GATEWAY_API = "gateway.networking.k8s.io"
# Objects per list request. A kind whose objects are small (a few hundred bytes to a few KiB: Ingress, Service,
# EndpointSlice) is read in pages of SMALL_OBJECTS_PAGE_SIZE: a first list of 100,000 EndpointSlices is then 20
# requests, not 200 (each a round trip, and for a server that reads a page from its store, one read more of it:
# 30 s against 11 s in pages of 5,000 from the API test server). Kinds whose objects are often large (Secrets
# and ConfigMaps of up to 1 MiB: Helm keeps releases in them) keep client-go's pages of LIST_PAGE_SIZE, so that
# one response stays a few hundred MiB at worst.
LIST_PAGE_SIZE = 500
SMALL_OBJECTS_PAGE_SIZE = 5000
# How often a kind whose CRD is not installed (or not permitted) is looked for again.
NOT_INSTALLED_RECHECK_SECONDS = 60.0
# A watch with no bytes for this long after its own timeoutSeconds is dead (a peer gone without a FIN).
WATCH_READ_MARGIN_SECONDS = 30.0
HTTP_GONE = 410
HTTP_FORBIDDEN = 403
HTTP_NOT_FOUND = 404


@dataclass(frozen=True)
class CustomResource:
    """A kind a CRD defines (the Gateway API's): listed through CustomObjectsApi, at the first of `versions` the
    cluster serves, and optional: a cluster without the CRD (404) or without the permission (403) has none."""
    group: str
    plural: str
    versions: tuple[str, ...] = ("v1",)


@dataclass(frozen=True)
class KindApi:
    """How the client lists one kind: the API class, and its list methods (all namespaces / one namespace)."""
    kind: str
    _: KW_ONLY
    api_version: str
    api_class: type
    list_all: str
    list_namespaced: str | None = None
    page_size: int = LIST_PAGE_SIZE
    custom: CustomResource | None = None


def _gateway_api(kind: str, plural: str, *, versions: tuple[str, ...] = ("v1",), namespaced: bool = True) -> KindApi:
    return KindApi(kind, api_version=f"{GATEWAY_API}/{versions[0]}", api_class=client.CustomObjectsApi,
                   list_all="list_cluster_custom_object",
                   list_namespaced="list_namespaced_custom_object" if namespaced else None,
                   custom=CustomResource(GATEWAY_API, plural, versions))


KIND_APIS: dict[str, KindApi] = {k.kind: k for k in (
    KindApi("Ingress", api_version="networking.k8s.io/v1", api_class=client.NetworkingV1Api,
            list_all="list_ingress_for_all_namespaces", list_namespaced="list_namespaced_ingress",
            page_size=SMALL_OBJECTS_PAGE_SIZE),
    KindApi("IngressClass", api_version="networking.k8s.io/v1", api_class=client.NetworkingV1Api,
            list_all="list_ingress_class"),
    KindApi("Service", api_version="v1", api_class=client.CoreV1Api,
            list_all="list_service_for_all_namespaces", list_namespaced="list_namespaced_service",
            page_size=SMALL_OBJECTS_PAGE_SIZE),
    KindApi("EndpointSlice", api_version="discovery.k8s.io/v1", api_class=client.DiscoveryV1Api,
            list_all="list_endpoint_slice_for_all_namespaces", list_namespaced="list_namespaced_endpoint_slice",
            page_size=SMALL_OBJECTS_PAGE_SIZE),
    KindApi("Secret", api_version="v1", api_class=client.CoreV1Api,
            list_all="list_secret_for_all_namespaces", list_namespaced="list_namespaced_secret"),
    KindApi("ConfigMap", api_version="v1", api_class=client.CoreV1Api,
            list_all="list_config_map_for_all_namespaces", list_namespaced="list_namespaced_config_map"),
    KindApi("Node", api_version="v1", api_class=client.CoreV1Api, list_all="list_node"),
    KindApi("Namespace", api_version="v1", api_class=client.CoreV1Api, list_all="list_namespace"),
    _gateway_api("GatewayClass", "gatewayclasses", namespaced=False),
    _gateway_api("Gateway", "gateways"),
    _gateway_api("HTTPRoute", "httproutes"),
    _gateway_api("GRPCRoute", "grpcroutes"),
    # v1 where the CRDs are recent, else the version older releases serve.
    _gateway_api("ReferenceGrant", "referencegrants", versions=("v1", "v1beta1")),
    _gateway_api("TLSRoute", "tlsroutes", versions=("v1", "v1alpha2")),
    _gateway_api("BackendTLSPolicy", "backendtlspolicies", versions=("v1", "v1alpha3")),
)}
GATEWAY_KINDS = tuple(kind for kind, api in KIND_APIS.items() if api.custom is not None)


@dataclass(frozen=True)
class WatchTarget:
    """One list+watch: a kind in one namespace (or all, or cluster-scoped), maybe narrowed by a field selector."""
    kind: str
    _: KW_ONLY
    namespace: str | None = None
    field_selector: str | None = None

    def __str__(self) -> str:
        where = f" in {self.namespace}" if self.namespace else ""
        narrowed = f" ({self.field_selector})" if self.field_selector else ""
        return f"{self.kind}{where}{narrowed}"


def _namespace_of(reference: str | None) -> str | None:
    return reference.split("/", 1)[0] if reference and "/" in reference else None


def watch_targets(settings: Settings) -> list[WatchTarget]:
    """What to list and watch so that nothing `filters.keep` would keep is missed, and little else is read.

    Objects named by a flag live outside --watch-namespace as often as not, so their namespaces are
    watched too.
    """
    def namespaced(kind: str, extra: list[str | None]) -> list[WatchTarget]:
        if settings.source.watch_namespace is None:
            return [WatchTarget(kind)]
        namespaces = dict.fromkeys([settings.source.watch_namespace] + [ns for ns in extra if ns])
        return [WatchTarget(kind, namespace=ns) for ns in namespaces]

    targets = [WatchTarget("IngressClass")]
    targets += namespaced("Ingress", [])
    for kind in ("Service", "EndpointSlice"):  # and the --default-backend-service's, wherever it is
        targets += namespaced(kind, [_namespace_of(settings.ingress.default_backend_service)])
    targets += namespaced("Secret", [_namespace_of(settings.ingress.default_ssl_certificate),
                                     _namespace_of(settings.ingress.configmap)])
    configmap_namespaces = dict.fromkeys(
        ns for ns in map(_namespace_of, (settings.ingress.configmap, settings.ingress.tcp_services_configmap,
                                         settings.ingress.udp_services_configmap)) if ns)
    targets += namespaced("ConfigMap", list(configmap_namespaces))
    if settings.cni.node_name:
        targets.append(WatchTarget("Node", field_selector=f"metadata.name={settings.cni.node_name}"))
    if settings.source.watch_namespace_selector:
        # All of them, matched here: a namespace relabelled out of a server-side selector would just vanish
        # from the watch, and its Ingresses must then leave the store.
        targets.append(WatchTarget("Namespace"))
    targets.append(WatchTarget("GatewayClass"))
    for kind in GATEWAY_KINDS[1:]:
        targets += namespaced(kind, [])
    return targets


class Backoff:
    """Capped exponential backoff with "equal jitter": half the delay fixed, half random, so that many
    watchers cut at once do not all come back in the same instant, and none retries at once."""

    def __init__(self, base: float, cap: float) -> None:
        self.base, self.cap = base, cap
        self.failures = 0

    def next_delay(self) -> float:
        ceiling = min(self.cap, self.base * 2 ** self.failures)
        self.failures += 1
        return ceiling / 2 + random.uniform(0, ceiling / 2)

    def reset(self) -> None:
        self.failures = 0


class Gone(Exception):
    """410: the resourceVersion (or continue token) is older than the history the server keeps."""


class NotInstalled(Exception):
    """An optional kind (a CRD's) the cluster does not serve (404), or does not let us read (403: `forbidden`)."""

    def __init__(self, message: str, *, forbidden: bool = False) -> None:
        super().__init__(message)
        self.forbidden = forbidden


@dataclass
class _TargetState:
    keys: set[str] = field(default_factory=set)
    resource_version: str | None = None  # None: must (re)list
    version: str | None = None  # a custom resource's version the cluster serves (None: not found yet)
    missing: str | None = None  # why an optional kind is not there now (logged once per absence)


class KubeSource:
    """Keeps a StoreWriter equal to the API's objects of the watched kinds (see watch_targets).

    Health: `last_event` is when an object last changed, `last_sync` when the API last showed a sign of
    life (a list, an event, a bookmark, a watch ending on time); `freshness()` gives both. `synced` is set
    once every target has completed its first list.
    """

    def __init__(self, settings: Settings, *, watch_timeout: int = 300, backoff_base: float = 0.5,
                 backoff_cap: float = 30.0, recheck_missing: float = NOT_INSTALLED_RECHECK_SECONDS) -> None:
        self.settings = settings
        self.recheck_missing = recheck_missing
        self.watch_timeout = watch_timeout
        self.backoff_base, self.backoff_cap = backoff_base, backoff_cap
        self.targets = watch_targets(settings)
        self.last_event: float | None = None
        self.last_sync: float | None = None
        self.relist_count = 0
        self.reconnect_count = 0
        self.synced = asyncio.Event()
        self._failing: dict[WatchTarget, str] = {}  # what each failing target last failed with
        self._states = {target: _TargetState() for target in self.targets}
        self._first_lists_pending = set(self.targets)
        self._store_lock = asyncio.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._apis: dict[type, Any] = {}

    @property
    def errors(self) -> list[str]:
        """The targets failing right now and why, for the watcher's status."""
        return [f"{target}: {error}" for target, error in self._failing.items()]

    def freshness(self) -> tuple[float | None, float | None]:
        """(last_event, last_sync) as time.time() values; None until the first one."""
        return self.last_event, self.last_sync

    async def run(self, store: StoreWriter) -> None:
        configuration = await asyncio.to_thread(kube_configuration, self.settings)
        # One pooled connection per long-running watch, plus room for lists.
        configuration.connection_pool_maxsize = max(configuration.connection_pool_maxsize or 0,
                                                    2 * len(self.targets))
        api_client = client.ApiClient(configuration)
        self._apis = {k.api_class: k.api_class(api_client) for k in KIND_APIS.values()}
        self._pool = ThreadPoolExecutor(max_workers=len(self.targets), thread_name_prefix="kube-watch")
        log.info("watching the Kubernetes API", extra=kv(host=configuration.host,
                                                         targets=", ".join(map(str, self.targets))))
        try:
            async with asyncio.TaskGroup() as group:
                for target in self.targets:
                    group.create_task(self._follow(target, store), name=f"watch {target}")
        finally:
            self._pool.shutdown(wait=False, cancel_futures=True)
            api_client.rest_client.pool_manager.clear()

    # --- one target ---

    async def _follow(self, target: WatchTarget, store: StoreWriter) -> None:
        state = self._states[target]
        backoff = Backoff(self.backoff_base, self.backoff_cap)
        while True:
            try:
                if state.resource_version is None:
                    await self._relist(target, state=state, store=store)
                    self._first_list_done(target)
                progressed = await self._watch(target, state=state, store=store, backoff=backoff)
                if progressed:
                    backoff.reset()
                    continue
                delay = backoff.next_delay()  # a watch that ends at once, empty: do not spin on it
            except NotInstalled as missing:
                await self._absent(target, state=state, store=store, missing=missing)
                delay = self.recheck_missing
            except Gone:
                log.info("resourceVersion expired; relisting", extra=kv(target=target, rv=state.resource_version))
                state.resource_version = None
                if backoff.failures == 0:
                    backoff.failures = 1  # relist now; if it keeps expiring, slow down
                    continue
                delay = backoff.next_delay()
            except asyncio.CancelledError:
                raise
            except Exception as err:  # every failure of the API or the network is retried
                delay = backoff.next_delay()
                self.reconnect_count += 1
                self._failing[target] = _describe(err)
                log.warning("Kubernetes API request failed; retrying", extra=kv(
                    target=target, error=self._failing[target], retry_in=f"{delay:.1f}s", attempt=backoff.failures))
            await asyncio.sleep(delay)

    async def _absent(self, target: WatchTarget, *, state: _TargetState, store: StoreWriter,
                      missing: NotInstalled) -> None:
        """An optional kind the cluster does not serve (or let us read): it has no objects (any published before
        are gone), and the watcher goes on without it; said once, not at every look. A refusal stays among the
        errors (/healthz's detail), as the grant is missing; a kind not installed is no error."""
        why = str(missing)
        if state.missing != why:
            if missing.forbidden:
                log.warning("Kubernetes API request failed; going on without this kind", extra=kv(
                    target=target, error=why, checked_again_every=f"{self.recheck_missing:.0f}s"))
            else:
                log.info("kind not available in this cluster; going on without it", extra=kv(
                    target=target, reason=why, checked_again_every=f"{self.recheck_missing:.0f}s"))
        state.missing, state.resource_version, state.version = why, None, None
        if state.keys:
            await self._set(store, [(key, None) for key in state.keys])
            state.keys = set()
        if missing.forbidden:
            self._failing[target] = why
        else:
            self._failing.pop(target, None)
        self._first_list_done(target)

    def _first_list_done(self, target: WatchTarget) -> None:
        self._first_lists_pending.discard(target)
        if not self._first_lists_pending:
            self.synced.set()

    def _list_call(self, target: WatchTarget, version: str | None = None) -> Callable[..., Any]:
        kind_api = KIND_APIS[target.kind]
        api = self._apis[kind_api.api_class]
        selectors = {"field_selector": target.field_selector} if target.field_selector else {}
        if kind_api.custom is not None:
            custom = kind_api.custom
            served = version or self._states[target].version or custom.versions[0]
            if target.namespace is not None:
                return lambda **kwargs: api.list_namespaced_custom_object(
                    custom.group, served, target.namespace, custom.plural, **selectors, **kwargs)
            return lambda **kwargs: api.list_cluster_custom_object(custom.group, served, custom.plural, **selectors,
                                                                   **kwargs)
        if target.namespace is not None:
            assert kind_api.list_namespaced is not None
            method = getattr(api, kind_api.list_namespaced)
            return lambda **kwargs: method(target.namespace, **selectors, **kwargs)
        method = getattr(api, kind_api.list_all)
        return lambda **kwargs: method(**selectors, **kwargs)

    async def _in_thread(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._pool, functools.partial(fn, *args, **kwargs))

    def _as_stored(self, target: WatchTarget, obj: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
        """The store key of `obj`, and what the store keeps of it (None: the filters drop it)."""
        if "kind" not in obj:  # items of a list come without their kind
            kind_api = KIND_APIS[target.kind]
            obj = {"kind": kind_api.kind, "apiVersion": kind_api.api_version, **obj}
            if kind_api.custom is not None:
                obj["apiVersion"] = f"{kind_api.custom.group}/{self._states[target].version}"
        return object_key(obj), (slim(obj) if keep(obj, self.settings) else None)

    async def _set(self, store: StoreWriter, changes: Iterable[tuple[str, dict[str, Any] | None]]) -> None:
        # One write at a time: the publisher numbers its updates, and must send them in that order.
        async with self._store_lock:
            await store.set_many(changes)

    async def _relist(self, target: WatchTarget, *, state: _TargetState, store: StoreWriter) -> None:
        """List the target and publish exactly the difference from what it published before."""
        items, resource_version = await self._list_all_pages(target)
        fresh: dict[str, dict[str, Any]] = {}
        for obj in items:
            key, stored = self._as_stored(target, obj)
            if stored is not None:
                fresh[key] = stored
        await self._set(store, [*((key, None) for key in state.keys - fresh.keys()), *fresh.items()])
        state.keys = set(fresh)
        state.resource_version = resource_version
        self._failing.pop(target, None)
        self.relist_count += 1
        self.last_sync = time.time()
        log.info("listed", extra=kv(target=target, objects=len(fresh), rv=resource_version))

    async def _list_all_pages(self, target: WatchTarget) -> tuple[list[dict[str, Any]], str]:
        """Every object of the target, paged from one consistent snapshot; when the snapshot expires
        halfway (410 on `continue`), one unpaged list instead."""
        items: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            try:
                page = await self._in_thread(self._read_list, target, token=token, limit=KIND_APIS[target.kind].page_size)
            except Gone:
                if token is None:
                    raise
                page = await self._in_thread(self._read_list, target, token=None, limit=None)
                return page["items"] or [], page["metadata"]["resourceVersion"]
            items += page.get("items") or []
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return items, page["metadata"]["resourceVersion"]

    def _read_list(self, target: WatchTarget, *, token: str | None, limit: int | None) -> dict[str, Any]:
        """(In a pool thread.) One list request, parsed; a custom resource's at the first version served."""
        paging: dict[str, Any] = {"limit": limit} if limit else {}
        if token:
            paging["_continue"] = token
        custom = KIND_APIS[target.kind].custom
        state = self._states[target]
        versions = (state.version,) if token and state.version else custom.versions if custom else (None,)
        for version in versions:
            try:
                page = read_json(self._list_call(target, version), **paging)
            except client.ApiException as err:
                if err.status == HTTP_GONE:
                    raise Gone(str(err)) from None
                if custom is not None and err.status == HTTP_NOT_FOUND:
                    continue
                if custom is not None and err.status == HTTP_FORBIDDEN:
                    raise NotInstalled(f"{api_error_text(err)}; grant list and watch of {custom.plural}.{custom.group} "
                                       "to serve the Gateway API", forbidden=True) from None
                raise
            if version is not None and state.missing is not None:
                log.info("kind available in this cluster now", extra=kv(target=target, version=version))
            state.version, state.missing = version, None
            return page
        assert custom is not None
        raise NotInstalled(f"{custom.plural}.{custom.group} is not served (its CRD is not installed)")

    async def _watch(self, target: WatchTarget, *, state: _TargetState, store: StoreWriter,
                     backoff: Backoff) -> bool:
        """Watch from state.resource_version until the stream ends; True if it ended on time or showed
        progress (anything but an immediate empty end)."""
        started = time.monotonic()
        response = await self._in_thread(self._open_watch, target, state.resource_version)
        self._failing.pop(target, None)
        progressed = False
        try:
            chunks = response.stream(amt=None, decode_content=False)
            async for line in self._lines(chunks):
                await self._apply(target, state=state, store=store, event=json.loads(line))
                if not progressed:
                    # The watch works again: a failure after this starts a new series of retries from the
                    # shortest delay (an outage then a burst of 410s must not inherit the outage's delay).
                    backoff.reset()
                progressed = True
            self.last_sync = time.time()
        except BaseException:
            _unblock(response)  # a pool thread may still be reading it
            raise
        finally:
            response.close()
        return progressed or time.monotonic() - started >= 1.0

    def _open_watch(self, target: WatchTarget, resource_version: str | None) -> Any:
        """(In a pool thread.) Start a watch request; returns the raw streaming response."""
        try:
            return self._list_call(target)(
                watch=True, resource_version=resource_version, allow_watch_bookmarks=True,
                timeout_seconds=self.watch_timeout, _preload_content=False,
                _request_timeout=(CONNECT_TIMEOUT_SECONDS, self.watch_timeout + WATCH_READ_MARGIN_SECONDS))
        except client.ApiException as err:
            if KIND_APIS[target.kind].custom is not None and err.status == HTTP_NOT_FOUND:
                raise NotInstalled("its CRD was removed") from None  # relisted: 404 again, or another version
            raise

    async def _lines(self, chunks: Iterator[bytes]) -> AsyncIterator[bytes]:
        """The stream's lines; each chunk is read in a pool thread."""
        buffer = b""
        while True:
            chunk = await self._in_thread(next, chunks, None)
            if chunk is None:
                return
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                if line.strip():
                    yield line

    async def _apply(self, target: WatchTarget, *, state: _TargetState, store: StoreWriter,
                     event: dict[str, Any]) -> None:
        kind, obj = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            if obj.get("code") == HTTP_GONE:
                raise Gone(obj.get("message", "resource version expired"))
            raise WatchError(f"{obj.get('reason')}: {obj.get('message')} (code {obj.get('code')})")
        state.resource_version = obj["metadata"]["resourceVersion"]
        self.last_sync = time.time()
        if kind == "BOOKMARK":
            return
        key, stored = self._as_stored(target, obj)
        if kind == "DELETED" or stored is None:
            if key in state.keys:
                state.keys.discard(key)
                await self._set(store, ((key, None),))
        else:
            state.keys.add(key)
            await self._set(store, ((key, stored),))
        self.last_event = self.last_sync


class WatchError(Exception):
    """An ERROR event other than 410 on a watch stream."""


def _unblock(response: Any) -> None:
    """Shut down a streaming response's socket, so that a thread blocked reading it returns at once."""
    connection = getattr(response, "connection", None) or getattr(response, "_connection", None)
    sock = getattr(connection, "sock", None)
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def _describe(err: BaseException) -> str:
    if isinstance(err, client.ApiException) and err.status in (401, 403):
        return (f"{api_error_text(err)} (check the credentials and that the service account may list and "
                "watch this kind)")
    if isinstance(err, urllib3.exceptions.MaxRetryError) and err.reason is not None:
        return f"{type(err.reason).__name__}: {err.reason}"
    return api_error_text(err)

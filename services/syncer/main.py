"""The syncer process: store → model → nginx.conf and dynamic tables → nginx, and the status endpoint.

It follows the watcher's store (clone pattern), coalesces bursts of changes, rebuilds the model, and
then does the least that makes nginx match it:
- nginx.conf changed (a new location profile or global setting) → `nginx -t`, atomic write, HUP;
  at most --sync-rate-limit reloads a second: a reload that must wait is done by a later sync, with the model of
  that moment;
- routes, backends or certificates changed → pushed to nginx's Lua at once, no reload;
- passthrough hosts changed → published to the proxy processes (clone pattern): those the model says may have
  changed (model/incremental.py SideChanges), not the whole table.
"""
from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable, Mapping

import zmq.asyncio

from proto import endpoints
from services.common import changed_keys, component_state, logs
from services.common.changed_keys import ChangedKeys
from services.common.clone import ClonePublisher, CloneSubscriber, Snapshot
from services.common.files import ensure_private_dir
from services.common.ipv6 import ipv6_available
from services.common.runner import run_process
from services.common.settings import Settings
from services.syncer.annotations.validators import duration_seconds
from services.syncer.ingress_status.campaign import run_status_updates, status_updates_enabled
from services.syncer.model.build import IngressOwners
from services.syncer.model.incremental import ANY_PROBLEMS, NO_PROBLEMS, IncrementalModel, ProblemChanges
from services.syncer.model.problems import Problem
from services.syncer.model.types import Model
from services.syncer.nginx_apply.applier import NginxApplier
from services.syncer.nginx_apply.geoip2_databases import GeoIP2Databases, with_geoip2_databases
from services.syncer.observability.healthz_server import start_healthz_server
from services.syncer.observability.metrics import SyncerMetrics

log = logging.getLogger("syncer")

# Changes arriving within this window are applied together: a watcher scan or a `kubectl apply` of many objects
# becomes one sync, and one reload at most.
COALESCE_SECONDS = 0.02
COALESCE_MAX_SECONDS = 1.0
# How often nginx is asked whether it still holds what was pushed (it forgets on a master restart).
PUSH_CHECK_SECONDS = 0.5
# How often a custom template directory (--template) is checked for changes (a stat of each file).
TEMPLATE_CHECK_SECONDS = 1.0
# How often the GeoIP2 databases (--maxmind-mmdb-dir) are checked for changes (a stat of each file).
GEOIP2_CHECK_SECONDS = 1.0


class Syncer:
    def __init__(self, settings: Settings, ctx: zmq.asyncio.Context) -> None:
        self.settings = settings
        self.store: dict[str, dict] = {}  # the watcher's store as of the last sync
        self.store_ready = False
        # What came since the last sync, kept apart so that the store need not be copied for the model's thread: a
        # whole new store (a snapshot), and the changes after it.
        self._next_store: dict[str, dict] | None = None
        self._updates: dict[str, dict | None] = {}
        # The model, kept up to date with the store keys changed since the last sync.
        self.model = IncrementalModel(settings)
        # The applied model's host → the namespace whose Ingress owns it: the Gateway API status reads it.
        self.ingress_owners: Mapping[str, str] = {}
        self._afresh = True  # the next sync builds the model from scratch (the first, or one after a failure)
        self.changed = asyncio.Event()
        # Called after every sync (the Ingress status updater re-reads the store then), with the store keys changed by
        # the syncs since they were last called in `synced_keys` (None: any).
        self.after_sync: list[Callable[[], None]] = []
        self.synced_keys: ChangedKeys = None
        # Location profiles nginx -t refused (name → its message) under the global settings `refused_for`.
        self.refused_profiles: dict[str, str] = {}
        self.refused_for = ""
        # The controller ConfigMap values applied last: a bad new value leaves the previous one in force.
        self.configmap_accepted: dict[str, str] = {}
        # What the Kubernetes API refuses or fails for the Lease and Ingress status (component → message).
        self.api_errors: dict[str, str] = {}
        self.metrics = SyncerMetrics(settings)
        self.applier = NginxApplier(settings, self.metrics)
        self.metrics.template_ok.set_function(lambda: 0 if self.applier.templates.error else 1)
        self.geoip2_databases = GeoIP2Databases(settings.geoip2, Path(settings.paths.state_dir) / "geoip2")
        self.subscriber = CloneSubscriber(ctx, updates_endpoint=endpoints.watcher_updates(settings.paths.run_dir),
                                          snapshot_endpoint=endpoints.watcher_snapshot(settings.paths.run_dir))
        self.passthrough = ClonePublisher(ctx, updates_endpoint=endpoints.syncer_updates(settings.paths.run_dir),
                                          snapshot_endpoint=endpoints.syncer_snapshot(settings.paths.run_dir))
        # The passthrough hosts the models since the last publication may have changed (None: any).
        self._passthrough_unpublished: ChangedKeys = None
        self.problem_count = ProblemCount(self.metrics)

    async def follow_store(self) -> None:
        async for event in self.subscriber.batches():
            if isinstance(event, Snapshot):
                self._next_store, self._updates = dict(event.state), {}
                self.store_ready = True
                log.info("store snapshot", extra=logs.kv(objects=len(event.state)))
            else:
                self._updates.update(event.items)  # type: ignore[arg-type]  # [key, value] pairs, as msgpack gives
            if self.store_ready:
                self.changed.set()

    async def sync_loop(self) -> None:
        while True:
            await self._change_or_reload_due()
            # Wait for a quiet moment (a relist or a big apply arrives as thousands of updates), but
            # never longer than COALESCE_MAX_SECONDS after the first change.
            deadline = time.monotonic() + COALESCE_MAX_SECONDS
            while self.changed.is_set() and time.monotonic() < deadline:
                self.changed.clear()
                await asyncio.sleep(COALESCE_SECONDS)
            self.changed.clear()
            await self.sync_once()

    async def _change_or_reload_due(self) -> None:
        """Until something changed, or a reload that waited for --sync-rate-limit may happen."""
        due = self.applier.reload_due
        if due is None:
            await self.changed.wait()
            return
        try:
            await asyncio.wait_for(self.changed.wait(), timeout=max(0.0, due - time.monotonic()))
        except TimeoutError:
            pass

    async def sync_once(self) -> None:
        """One sync; an unexpected error is logged and the last applied configuration keeps serving, so one
        object can never stop the syncer for everyone (the next change or a restart tries again)."""
        started = time.monotonic()
        changed = self._take_updates()
        self.synced_keys = changed_keys.union(self.synced_keys, None if changed is None else frozenset(changed))
        try:
            model = await self._apply_model(self.store, changed)
        except Exception as err:  # noqa: BLE001 - the loop must survive whatever one object does
            self._afresh = True  # the kept model may be half updated: the next sync starts afresh
            self._passthrough_unpublished = None
            self.problem_count.changed(ANY_PROBLEMS)
            self.applier.reload_due = None  # no retry at once: the next change tries again
            self.metrics.stats.last_error = f"sync failed: {err}"
            log.exception("sync failed; the last applied configuration keeps serving")
            return
        self.ingress_owners = IngressOwners(model.routes)  # its routes are a snapshot, never changed
        self.metrics.applied(model)
        self.metrics.objects.set(len(self.store))
        for problem in self.problem_count.count(model):
            log.warning("object rejected or ignored", extra=logs.kv(problem=problem))
        self.metrics.stats.problems = [str(problem) for problem in model.problems[:STATUS_PROBLEMS]]
        await publish_passthrough(self.passthrough, model, self._passthrough_unpublished)
        self._passthrough_unpublished = frozenset()
        self.metrics.sync_seconds.labels("total").observe(time.monotonic() - started)
        self._write_status()
        for callback in self.after_sync:
            callback()
        self.synced_keys = frozenset()

    def _take_updates(self) -> set[str] | None:
        """Bring the store up to what came since the last sync; the keys changed (None: the model starts afresh).
        Only here is the store changed: the model's thread reads it while updates keep arriving."""
        afresh = self._afresh or self._next_store is not None
        if self._next_store is not None:
            self.store, self._next_store = self._next_store, None
        updates, self._updates, self._afresh = self._updates, {}, False
        store = self.store
        for key, value in updates.items():
            if value is None:
                store.pop(key, None)
            else:
                store[key] = value
        return None if afresh else set(updates)

    async def _apply_model(self, store: dict[str, dict], changed: set[str] | None) -> Model:
        """Bring the model up to date (`changed`: the store keys changed since the last sync, None: any) and
        apply it; when `nginx -t` refuses new location profiles, reject the Ingresses that use them
        (remembered until the global settings change) and apply the rest."""
        while True:
            model = await asyncio.to_thread(self.model.update, store, changed,
                                            refused_profiles=self.refused_profiles,
                                            previous_configmap=self.configmap_accepted)
            changed = set()
            side = self.model.take_side_changes()
            self.problem_count.changed(self.model.take_problem_changes())
            self._passthrough_unpublished = changed_keys.union(self._passthrough_unpublished, side.passthrough)
            if model.config.listen_ipv6 and not ipv6_available():  # the model does no I/O: asked here
                model = replace(model, config=replace(model.config, listen_ipv6=False))
            model = with_geoip2_databases(model, self.geoip2_databases, self.settings.ingress.configmap)  # files too
            globals_key = model.config.without_profiles().digest()
            if globals_key != self.refused_for and self.refused_profiles:
                # Under other global settings the refused profiles may pass: try them again.
                self.refused_profiles, self.refused_for = {}, globals_key
                continue
            self.refused_for = globals_key
            refused = await self.applier.apply(model, side)
            if not refused:
                self.configmap_accepted = model.configmap_accepted
                return model
            self.refused_profiles.update(refused)

    async def watch_nginx(self) -> None:
        """Re-push the dynamic tables whenever nginx no longer holds them (a restarted master)."""
        while True:
            await asyncio.sleep(PUSH_CHECK_SECONDS)
            await self.applier.repush_if_needed()

    async def watch_template(self) -> None:
        """Apply a changed custom template (or report why it cannot be) as any other change."""
        while True:
            await asyncio.sleep(TEMPLATE_CHECK_SECONDS)
            if await asyncio.to_thread(self.applier.templates.poll) and self.store_ready:
                self.changed.set()

    async def watch_geoip2_databases(self) -> None:
        """Apply a GeoIP2 database file that appeared, was replaced or went, as any other change."""
        while True:
            await asyncio.sleep(GEOIP2_CHECK_SECONDS)
            if await asyncio.to_thread(self.geoip2_databases.poll) and self.store_ready:
                self.changed.set()

    def _write_status(self) -> None:
        component_state.write_status(self.settings.paths.run_dir, "syncer", state="running",
                                     **self.metrics.status_json(), **self.applier.templates.status())

    def healthy(self) -> tuple[bool, dict]:
        """200 once nginx serves the first applied configuration; detail says what is wrong otherwise.

        What the API refuses (a 403 when the service account lacks a permission) is detail only: a liveness
        probe that restarted the controller for it would not give it the permission.
        """
        detail = {"store_synced": self.store_ready, **self.applier.health(), **watcher_freshness(self.settings),
                  "api_errors": dict(self.api_errors)}
        ok = self.store_ready and detail["nginx_serving"] and detail["watcher_fresh"]
        return ok, detail


class ProblemCount:
    """The applied model's problems counted (SyncerMetrics.change_problems) from how they changed since the last
    count: the incremental model says which of its plans' and groups' problems came and went (ProblemChanges)."""

    def __init__(self, metrics: SyncerMetrics) -> None:
        self.metrics = metrics
        self._uncounted = ANY_PROBLEMS
        self._counted_beside: tuple[Problem, ...] = ()  # the last count's beside the plans' and groups'

    def changed(self, changes: ProblemChanges) -> None:
        """The problems of a model made since the last count changed so (ANY_PROBLEMS: count them all)."""
        self._uncounted = self._uncounted.then(changes)

    def count(self, model: Model) -> list[str]:
        """Count `model`'s problems; the lines new since the last count, sorted."""
        changes, self._uncounted = self._uncounted, NO_PROBLEMS
        # Beside the plans' and groups': the model's others, and those added to its list after it was built.
        beside = (*changes.others, *model.problems[changes.built:])
        counted_beside, self._counted_beside = self._counted_beside, beside
        if changes.added is None:
            return self.metrics.set_problems(model.problems)
        return self.metrics.change_problems((*changes.added, *beside), (*changes.removed, *counted_beside))


def passthrough_table(model: Model) -> dict[str, object]:
    """What the proxy processes need: SNI host → endpoints, and how to read inbound connections."""
    table: dict[str, object] = {f"host/{host}": endpoints for host, endpoints in model.passthrough.items()}
    table["config"] = _passthrough_config(model)
    return table


def _passthrough_config(model: Model) -> dict[str, object]:
    return {"use_proxy_protocol": model.use_proxy_protocol, "proxy_protocol_header_timeout":
            duration_seconds(model.config.server.proxy_protocol_header_timeout), "listen_ipv6": model.config.listen_ipv6}


async def publish_passthrough(publisher: ClonePublisher, model: Model, hosts: ChangedKeys) -> None:
    """Bring the proxy processes' table to `model`'s at the passthrough hosts that may have changed since it was
    last published (None: any, and the table is compared whole): each sync compared and packed every host's
    entry (100,000 at 100,000 passthrough Ingresses) for the one a change touched."""
    if hosts is None:
        await publisher.replace_all(passthrough_table(model))
        return
    await publisher.set_many([("config", _passthrough_config(model)),
                              *((f"host/{host}", model.passthrough.get(host)) for host in hosts)])


WATCHER_STALE_SECONDS = 300.0
STATUS_PROBLEMS = 50  # the problem lines the status record shows


def watcher_freshness(settings: Settings) -> dict:
    """The watcher's last list/watch/scan activity; none for too long means the store may be stale."""
    for record in component_state.read_all(settings.paths.run_dir):
        if record.get("component") == "watcher":
            last = float(record.get("last_sync") or record.get("updated") or 0)
            age = time.time() - last
            return {"watcher_fresh": age < WATCHER_STALE_SECONDS, "watcher_last_sync_age_seconds": round(age, 1),
                    "watcher_errors": list(record.get("errors") or [])}
    return {"watcher_fresh": False, "watcher_last_sync_age_seconds": None, "watcher_errors": []}


async def main_async(settings: Settings) -> None:
    ensure_private_dir(settings.paths.run_dir)
    Path(settings.paths.state_dir).mkdir(parents=True, exist_ok=True)
    ctx = zmq.asyncio.Context()
    syncer = Syncer(settings, ctx)
    await syncer.applier.start()
    runner = await start_healthz_server(settings, healthy=syncer.healthy, metrics=syncer.metrics)
    try:
        # Cancelled on SIGTERM: the TaskGroup cancels and awaits every task (the status task releases its Lease).
        async with asyncio.TaskGroup() as tasks:
            for coro in (syncer.follow_store(), syncer.sync_loop(), syncer.watch_nginx(), syncer.passthrough.serve(),
                         syncer.metrics.collect_forever(), syncer.watch_template(), syncer.watch_geoip2_databases()):
                tasks.create_task(coro)
            if status_updates_enabled(settings):
                tasks.create_task(run_status_updates(settings, current_store=lambda: syncer.store,
                                                     synced_keys=lambda: syncer.synced_keys,
                                                     taken_ports=lambda: syncer.applier.taken_ports,
                                                     ingress_owners=lambda: syncer.ingress_owners,
                                                     after_sync=syncer.after_sync, errors=syncer.api_errors,
                                                     leadership=syncer.metrics.leadership))
    finally:
        await runner.cleanup()
        ctx.destroy(linger=0)


def run(settings: Settings) -> int:
    return run_process("syncer", settings=settings, main=lambda: main_async(settings))

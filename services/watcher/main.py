"""`pyngress watcher`: list and watch a source (manifests or the Kubernetes API), publish the object store.

The store is published with the clone pattern (services.common.clone) on the endpoints of
proto.endpoints; snapshots are served once the source's first listing is complete.
"""
from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import zmq.asyncio

from proto import endpoints
from services.common import logs
from services.common.clone import ClonePublisher
from services.common.component_state import write_status
from services.common.files import ensure_private_dir
from services.common.label_selector import parse_label_selector
from services.common.runner import StartupError, run_process
from services.common.settings import Settings
from services.watcher.namespace_selection import NamespaceSelection
from services.watcher.object_store import TrackedStore
from services.watcher.source import Source, StoreWriter

log = logging.getLogger(__name__)

STATUS_SECONDS = 1.0
SYNC_WAIT_LOG_SECONDS = 10.0


def _make_source(settings: Settings) -> tuple[Source, str]:
    if settings.source.manifests:
        from services.watcher.manifests import ManifestsSource
        return ManifestsSource(settings.source.manifests, settings=settings,
                               state_dir=settings.paths.state_dir), "manifests"
    # Imported here only: the manifests mode must not need the Kubernetes client at all.
    from services.watcher.kube_source import KubeSource
    return KubeSource(settings), "kubernetes"


def _status_fields(source: Source, *, source_name: str, store: TrackedStore) -> dict[str, Any]:
    return {
        "source": source_name,
        "objects": len(store),
        "ready": source.synced.is_set(),
        "last_event": store.last_event,
        "last_sync": getattr(source, "last_sync", None) or store.last_write,
        "errors": list(getattr(source, "errors", [])),
        "warnings": list(getattr(source, "warnings", [])),
    }


async def _write_status_forever(settings: Settings, *, source: Source, source_name: str,
                                store: TrackedStore) -> None:
    while True:
        try:
            fields = _status_fields(source, source_name=source_name, store=store)
            write_status(settings.paths.run_dir, "watcher", **fields)
        except OSError as err:
            log.warning("cannot write the status file", extra=logs.kv(run_dir=settings.paths.run_dir, error=err))
        await asyncio.sleep(STATUS_SECONDS)


async def _serve_once_synced(source: Source, *, publisher: ClonePublisher, store: TrackedStore) -> None:
    """Serve snapshots (and heartbeats) only once the store holds the source's first complete listing."""
    while True:
        try:
            await asyncio.wait_for(source.synced.wait(), SYNC_WAIT_LOG_SECONDS)
            break
        except asyncio.TimeoutError:
            log.info("waiting for the source's first complete listing before serving snapshots")
    log.info("store synced; serving snapshots", extra=logs.kv(objects=len(store)))
    await publisher.serve()


def _narrowed(store: TrackedStore, settings: Settings) -> StoreWriter:
    """The store the source writes to: through --watch-namespace-selector's filter when it is given."""
    if not settings.source.watch_namespace_selector:
        return store
    return NamespaceSelection(store, parse_label_selector(settings.source.watch_namespace_selector))


async def _main(settings: Settings) -> None:
    source, source_name = _make_source(settings)
    ctx = zmq.asyncio.Context()
    publisher = ClonePublisher(ctx, updates_endpoint=endpoints.watcher_updates(settings.paths.run_dir),
                               snapshot_endpoint=endpoints.watcher_snapshot(settings.paths.run_dir))
    store = TrackedStore(publisher)
    log.info("watcher started", extra=logs.kv(source=source_name, run_dir=settings.paths.run_dir,
                                              directory=settings.source.manifests or ""))
    try:
        async with asyncio.TaskGroup() as tasks:
            tasks.create_task(_serve_once_synced(source, publisher=publisher, store=store))
            tasks.create_task(source.run(_narrowed(store, settings)))
            tasks.create_task(_write_status_forever(settings, source=source, source_name=source_name, store=store))
    finally:
        publisher.close()
        ctx.term()


def run(settings: Settings) -> int:
    async def main() -> int | None:
        if settings.source.manifests and not Path(settings.source.manifests).is_dir():
            raise StartupError(f"--manifests {settings.source.manifests}: no such directory; give the directory "
                               "holding the manifest files")
        ensure_private_dir(settings.paths.run_dir)
        await _main(settings)
        return None
    return run_process("watcher", settings=settings, main=main)

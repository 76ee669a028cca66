"""What a watcher source is: something that keeps a StoreWriter equal to the objects it sees."""
from __future__ import annotations

import asyncio
from typing import Any, Iterable, Protocol


class StoreWriter(Protocol):
    """Implemented by services.common.clone.ClonePublisher; keys come from services.common.objects.object_key."""

    async def set_many(self, changes: Iterable[tuple[str, Any]]) -> None:
        """Set each (key, object) in order, in as few messages as it can; an object None deletes its key, and
        setting an equal value publishes nothing."""


class Source(Protocol):
    """Fills and follows a store.

    `synced` is set once the first complete listing is in the store: the watcher serves snapshots only
    from then on, so that a subscriber (re)starting with it never takes a half-filled store for the whole
    cluster and drops the routes missing from it.

    For the status file a source may also have these attributes (read with getattr, all optional):
    `errors: list[str]` (what the user must fix now), `warnings: list[str]`, and
    `last_sync: float | None` (unix time of the last successful list, scan or watch activity, whether or
    not anything changed; it tells a stuck watch from a quiet cluster).
    """

    synced: asyncio.Event

    async def run(self, store: StoreWriter) -> None:
        """Fill `store`, then keep it up to date until cancelled. Never returns on its own."""

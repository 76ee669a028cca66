"""A ClonePublisher serving on a run directory's watcher endpoints, with subscribers to it, for the clone tests."""
from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any, AsyncIterator, Callable

import zmq.asyncio

from proto import endpoints
from services.common.clone import ClonePublisher, CloneSubscriber


@contextlib.asynccontextmanager
async def published(run_dir: Path, **publisher_options: Any,
                    ) -> AsyncIterator[tuple[ClonePublisher, Callable[..., CloneSubscriber]]]:
    """(the publisher, serving; `subscribe(**options)` making a subscriber to it); everything closed after."""
    ctx = zmq.asyncio.Context()
    ups, snap = endpoints.watcher_updates(run_dir), endpoints.watcher_snapshot(run_dir)
    pub = ClonePublisher(ctx, updates_endpoint=ups, snapshot_endpoint=snap, **publisher_options)
    serve = asyncio.create_task(pub.serve())
    subscribers: list[CloneSubscriber] = []

    def subscribe(**options) -> CloneSubscriber:
        subscribers.append(CloneSubscriber(ctx, updates_endpoint=ups, snapshot_endpoint=snap, **options))
        return subscribers[-1]

    try:
        yield pub, subscribe
    finally:
        serve.cancel()
        for sub in subscribers:
            sub.close()
        pub.close()
        ctx.term()

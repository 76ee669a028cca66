"""A ClonePublisher serving on a run directory's watcher endpoints, with subscribers to it, for the clone tests."""
from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any, AsyncIterator, Callable

import zmq.asyncio

from proto import decode, endpoints
from services.common.clone import ClonePublisher, CloneSubscriber, Snapshot, Update
from services.common.ipc import bind_private


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


async def first_event_given(run_dir: Path, answers: list[list[bytes]]) -> Snapshot | Update:
    """The first thing a subscriber yields when a hand-made snapshot server (a ROUTER on the run directory's
    snapshot endpoint) answers its requests in turn with each list of raw messages in `answers`."""
    ctx = zmq.asyncio.Context()
    router = ctx.socket(zmq.ROUTER)
    router.setsockopt(zmq.LINGER, 0)
    bind_private(router, endpoints.watcher_snapshot(run_dir))
    sub = CloneSubscriber(ctx, updates_endpoint=endpoints.watcher_updates(run_dir),
                          snapshot_endpoint=endpoints.watcher_snapshot(run_dir))
    try:
        first = asyncio.create_task(anext(sub.events()))
        for messages in answers:
            identity, request = await asyncio.wait_for(router.recv_multipart(), 10)
            assert decode(request).type == "clone.snapshot_request"
            for message in messages:
                await router.send_multipart([identity, message])
        return await asyncio.wait_for(first, 10)
    finally:
        sub.close()
        router.close()
        ctx.term()

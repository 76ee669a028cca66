"""A real `pyngress watcher` whose store of Secrets adds up to three times the clone channel's message limit
(PYNGRESS_CLONE_MAX_MESSAGE_BYTES): every subscriber, a late one too, receives the whole store."""
import asyncio
import base64
import os

import zmq.asyncio

from proto import endpoints
from services.common.clone import CloneSubscriber, Snapshot

LIMIT = 1 << 20
WAIT_SECONDS = 20  # a hang guard, not a performance figure


def secret(name: str) -> str:
    blob = base64.b64encode(os.urandom(75_000)).decode()  # 100 KB, as a Secret's data is
    return f"apiVersion: v1\nkind: Secret\nmetadata:\n  name: {name}\n  namespace: tenant\ndata:\n  blob: {blob}\n"


def first_snapshot(run_dir) -> Snapshot:
    """What a subscriber starting now receives first, accepting messages of up to LIMIT bytes only."""
    async def fetch() -> Snapshot:
        ctx = zmq.asyncio.Context()
        subscriber = CloneSubscriber(ctx, updates_endpoint=endpoints.watcher_updates(run_dir),
                                     snapshot_endpoint=endpoints.watcher_snapshot(run_dir), max_message_bytes=LIMIT)
        try:
            return await asyncio.wait_for(anext(subscriber.events()), WAIT_SECONDS)
        finally:
            subscriber.close()
            ctx.term()
    return asyncio.run(fetch())


def test_a_store_three_times_the_message_limit_reaches_every_subscriber_whole(watcher, monkeypatch):
    monkeypatch.setenv("PYNGRESS_CLONE_MAX_MESSAGE_BYTES", str(LIMIT))
    for i in range(30):
        watcher.write(f"s{i}.yaml", secret(f"s{i}"))
    watcher.start()
    snapshot = first_snapshot(watcher.run_dir)
    assert sorted(snapshot.state) == sorted(f"Secret/tenant/s{i}" for i in range(30))
    assert sum(len(obj["data"]["blob"]) for obj in snapshot.state.values()) == 30 * 100_000

    watcher.write("late.yaml", secret("late"))  # a subscriber (re)started later gets the store as it is then
    watcher.wait_for_status(lambda s: s["objects"] == 31)
    assert len(first_snapshot(watcher.run_dir).state) == 31
    assert "refused" not in watcher.log.read_text()
    assert watcher.stop() == 0

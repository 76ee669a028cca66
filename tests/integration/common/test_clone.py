"""The clone pattern over real ZeroMQ ipc sockets: snapshot, ordered updates, recovery after gaps and restarts."""
import asyncio

import zmq.asyncio

from proto import decode, encode, endpoints
from services.common.clone import LARGE_MESSAGE_BYTES, ClonePublisher, CloneSubscriber, Snapshot, Update
from tests.support.clone import published


async def _next(it, timeout=5):
    return await asyncio.wait_for(it.__anext__(), timeout)


def test_late_subscriber_gets_snapshot_then_updates(tmp_path):
    async def scenario():
        async with published(tmp_path) as (pub, subscribe):
            await pub.set("a", 1)
            await pub.set("b", 2)
            events = subscribe().events()
            first = await _next(events)
            assert first == Snapshot({"a": 1, "b": 2})
            await asyncio.sleep(0.2)  # let the subscription reach the publisher
            await pub.set("a", None)
            await pub.set("c", 3)
            assert await _next(events) == Update("a", None)
            assert await _next(events) == Update("c", 3)
    asyncio.run(scenario())


def test_a_value_equal_but_for_the_order_of_its_keys_is_not_published_again(tmp_path):
    async def scenario():
        async with published(tmp_path) as (pub, subscribe):
            await pub.set("a", {"metadata": {"name": "a", "namespace": "ns"}, "spec": {"x": [1, 2]}})
            seq = pub.seq
            await pub.set("a", {"spec": {"x": [1, 2]}, "metadata": {"namespace": "ns", "name": "a"}})
            assert pub.seq == seq
            await pub.set("a", {"spec": {"x": [2, 1]}, "metadata": {"namespace": "ns", "name": "a"}})
            assert pub.seq == seq + 1 and len(pub) == 1
            assert await _next(subscribe().events()) == Snapshot({"a": {"spec": {"x": [2, 1]},
                                                                "metadata": {"namespace": "ns", "name": "a"}}})
    asyncio.run(scenario())


def test_restarted_publisher_is_detected_and_resnapshotted(tmp_path):
    async def scenario():
        ctx = zmq.asyncio.Context()
        ups, snap = endpoints.watcher_updates(tmp_path), endpoints.watcher_snapshot(tmp_path)
        pub = ClonePublisher(ctx, updates_endpoint=ups, snapshot_endpoint=snap)
        serve = asyncio.create_task(pub.serve())
        await pub.set("old", 1)
        sub = CloneSubscriber(ctx, updates_endpoint=ups, snapshot_endpoint=snap)
        events = sub.events()
        assert await _next(events) == Snapshot({"old": 1})
        serve.cancel(); pub.close()
        await asyncio.sleep(0.1)
        # a new process would start from seq 0 with a new epoch
        pub2 = ClonePublisher(ctx, updates_endpoint=ups, snapshot_endpoint=snap)
        serve2 = asyncio.create_task(pub2.serve())
        await pub2.set("new", 2)
        got = await _next(events)
        while not isinstance(got, Snapshot):
            got = await _next(events)
        assert got == Snapshot({"new": 2})
        serve2.cancel(); sub.close(); pub2.close(); ctx.term()
    asyncio.run(scenario())


def test_many_updates_at_full_speed_arrive_without_loss(tmp_path):
    async def scenario():
        async with published(tmp_path) as (pub, subscribe):
            events = subscribe().events()
            state = dict((await _next(events)).state)
            await asyncio.sleep(0.2)
            for i in range(20000):
                await pub.set(f"k{i}", i)
            while len(state) < 20000:
                ev = await _next(events)
                if isinstance(ev, Snapshot):
                    state = dict(ev.state)
                else:
                    state[ev.key] = ev.value
            assert state == {f"k{i}": i for i in range(20000)}
    asyncio.run(scenario())


def test_many_changes_at_once_travel_in_batches_and_a_lost_batch_fetches_a_snapshot(tmp_path):
    async def scenario():
        async with published(tmp_path) as (pub, subscribe):
            await pub.set("gone", 0)
            events, batches = subscribe().events(), subscribe().batches()
            assert await _next(events) == Snapshot({"gone": 0}) == await _next(batches)
            wire = zmq.asyncio.Context.instance().socket(zmq.SUB)
            wire.setsockopt(zmq.SUBSCRIBE, b"")
            wire.connect(endpoints.watcher_updates(tmp_path))
            await asyncio.sleep(0.2)  # let both subscriptions reach the publisher
            # Objects of some size, so that each batch is over LARGE_MESSAGE_BYTES and read as a large one.
            value = lambda i: {"n": i, "spec": "x" * 200}  # noqa: E731
            changes = [("gone", None), *((f"k{i}", value(i)) for i in range(2500)), ("k0", value(0))]  # last: no change
            await pub.set_many(changes)
            assert [await _next(events) for _ in range(2501)] == [Update(key, value) for key, value in changes[:-1]]
            received = [await _next(batches) for _ in range(3)]  # as the messages brought them
            assert [len(batch.items) for batch in received] == [1000, 1000, 501]
            assert [tuple(item) for batch in received for item in batch.items] == changes[:-1]
            raw = [await wire.recv() for _ in range(3)]
            assert min(map(len, raw)) > LARGE_MESSAGE_BYTES
            sent = [decode(data) for data in raw]
            assert [(env.type, env.seq, len(env.body["items"])) for env in sent] == [
                ("clone.updates", 1001, 1000), ("clone.updates", 2001, 1000), ("clone.updates", 2502, 501)]
            await pub.set_many([("one", 1)])  # one change is a plain clone.update
            assert (await _next(events), decode(await wire.recv()).type) == (Update("one", 1), "clone.update")

            pub.seq += 1  # a batch lost on the way
            await pub.set_many([("x", 1), ("y", 2)])
            assert await _next(events) == Snapshot({**{f"k{i}": value(i) for i in range(2500)}, "one": 1, "x": 1, "y": 2})
            await pub.set_many([("z", 1), ("x", None)])  # the next batch follows the snapshot
            assert [await _next(events) for _ in range(2)] == [Update("z", 1), Update("x", None)]
            wire.close()
    asyncio.run(scenario())


def test_a_gap_among_queued_updates_fetches_a_snapshot(tmp_path):
    async def scenario():
        async with published(tmp_path) as (pub, subscribe):
            events = subscribe().events()
            assert await _next(events) == Snapshot({})
            await asyncio.sleep(0.2)
            for i in range(10):
                await pub.set(f"k{i}", i)
            pub.seq += 1  # an update lost on the way
            for i in range(10, 20):
                await pub.set(f"k{i}", i)
            await asyncio.sleep(0.2)  # all twenty are queued at the subscriber: it reads them in one go
            assert [await _next(events) for _ in range(10)] == [Update(f"k{i}", i) for i in range(10)]
            assert await _next(events) == Snapshot({f"k{i}": i for i in range(20)})
            await pub.set("after", 1)  # the updates the snapshot holds are skipped; the next one follows
            assert await _next(events) == Update("after", 1)
    asyncio.run(scenario())


def test_other_tasks_run_while_a_long_burst_is_read(tmp_path):
    async def scenario():
        async with published(tmp_path) as (pub, subscribe):
            events = subscribe().events()
            await _next(events)
            await asyncio.sleep(0.2)
            for i in range(10000):
                await pub.set(f"k{i}", i)
            await asyncio.sleep(0.5)  # queued at the subscriber
            ticks = 0

            async def ticker():
                nonlocal ticks
                while True:
                    ticks += 1
                    await asyncio.sleep(0)

            async def read_all():
                count = 0
                async for _ in events:  # without a task per event (as wait_for would make): the reading's own turns
                    count += 1
                    if count == 10000:
                        return

            ticking = asyncio.create_task(ticker())
            await asyncio.wait_for(read_all(), 10)
            ticking.cancel()
            assert ticks >= 10  # a turn after each thousand updates (DRAIN_BATCH) at least
    asyncio.run(scenario())


def test_snapshot_requests_of_subscribers_that_left_are_not_answered_in_full(tmp_path):
    """Until the watcher's first listing is complete, nobody is served a snapshot, and each subscriber asks
    again every few seconds from a new socket: all those requests wait in the queue. Only the one whose asker is
    still there gets a whole snapshot (the others' cost one part, not one snapshot each)."""
    async def scenario():
        ctx = zmq.asyncio.Context()
        ups, snap = endpoints.watcher_updates(tmp_path), endpoints.watcher_snapshot(tmp_path)
        pub = ClonePublisher(ctx, updates_endpoint=ups, snapshot_endpoint=snap)
        await pub.set_many((f"k{i}", "x" * 1000) for i in range(20_000))  # 20 MB: parts of 8 MiB
        for _ in range(10):  # subscribers that asked and left, as a waiting one does every SNAPSHOT_TIMEOUT_SECONDS
            gone = ctx.socket(zmq.DEALER)
            gone.setsockopt(zmq.LINGER, 0)
            gone.connect(snap)
            await gone.send(encode("clone.snapshot_request", {}))
            await asyncio.sleep(0.01)
            gone.close()
        sub = CloneSubscriber(ctx, updates_endpoint=ups, snapshot_endpoint=snap)
        first = asyncio.create_task(anext(sub.events()))
        await asyncio.sleep(0.2)  # its request queued behind the others
        serve = asyncio.create_task(pub.serve())
        try:
            snapshot = await asyncio.wait_for(first, 30)
            assert isinstance(snapshot, Snapshot) and len(snapshot.state) == 20_000
            assert pub.snapshots_sent == 1
        finally:
            serve.cancel()
            sub.close()
            pub.close()
            ctx.term()
    asyncio.run(scenario())

"""The clone subscriber over real ZeroMQ ipc sockets, fed what a buggy or hostile publisher could send:
a snapshot with a bad item, and an update over the subscriber's size limit."""
import asyncio
import logging

import msgpack

from services.common.clone import Snapshot, Update
from tests.support.clone import first_event_given, published

LIMIT = 64 * 1024


async def _next(it, timeout=10):
    return await asyncio.wait_for(it.__anext__(), timeout)


def snapshot_bytes(items: list) -> bytes:
    """Packed directly: the codec's encode would refuse a bad item."""
    return msgpack.packb({"v": 1, "type": "clone.snapshot", "seq": 0, "body": {"epoch": "e", "items": items}},
                         use_bin_type=True)


def test_a_snapshot_with_a_bad_item_is_rejected_with_the_reason_and_asked_for_again(tmp_path, caplog):
    answers = [[snapshot_bytes([["a", 1], [7, "not a key"]])], [snapshot_bytes([["a", 1]])]]
    with caplog.at_level(logging.WARNING, logger="services.common.clone"):
        assert asyncio.run(first_event_given(tmp_path, answers)) == Snapshot({"a": 1})
    assert "rejected snapshot: clone.snapshot: field 'items'[1][0] must be str, got int" in caplog.text


def test_an_oversized_update_never_reaches_the_subscriber_which_resnapshots_and_goes_on(tmp_path):
    async def scenario():
        async with published(tmp_path) as (pub, subscribe):
            await pub.set("a", 1)
            events = subscribe(max_message_bytes=LIMIT).events()
            assert await _next(events) == Snapshot({"a": 1})
            await asyncio.sleep(0.2)  # let the subscription reach the publisher
            await pub.set("big", "x" * (2 * LIMIT))
            await asyncio.sleep(0.3)  # sent and dropped with its connection, before it leaves the state again
            await pub.set("big", None)
            await pub.set("b", 2)
            seen = []
            # Whatever the subscriber yields next (updates that got through, a new snapshot after the gap),
            # it converges without ever holding "big".
            state = {"a": 1}
            while state != {"a": 1, "b": 2}:
                event = await _next(events)
                seen.append(event)
                if isinstance(event, Snapshot):
                    state = dict(event.state)
                elif event.value is None:
                    state.pop(event.key, None)
                else:
                    state[event.key] = event.value
            assert not any(isinstance(e, Update) and e.key == "big" for e in seen)
            assert not any(isinstance(e, Snapshot) and "big" in e.state for e in seen)
            await pub.set("c", 3)
            assert await _next(events) == Update("c", 3)
    asyncio.run(scenario())

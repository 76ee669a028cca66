"""A store several times the clone channel's message limit, over real ZeroMQ ipc sockets: the snapshot travels in
parts each under the limit, a late subscriber gets all of it, and a snapshot missing a part is never applied."""
import asyncio
import logging

import msgpack
import pytest
import zmq
import zmq.asyncio

from proto import decode, encode, endpoints
from services.common.clone import Snapshot, Update
from tests.support.clone import first_event_given, published

LIMIT = 1 << 20  # the channel's limit in these tests; the store below adds up to three times it


def secret(i: int) -> dict:
    return {"kind": "Secret", "metadata": {"name": f"s{i}", "namespace": "tenant"},
            "data": {"blob": f"{i:02x}" * 50_000}}


STORE = {f"Secret/tenant/s{i}": secret(i) for i in range(30)}  # 30 values of 100 KB each: ten to a message


async def _next(it, timeout=10):
    return await asyncio.wait_for(it.__anext__(), timeout)


async def _raw_snapshot(run_dir) -> list[bytes]:
    """The messages the publisher answers a snapshot request with, as they travel."""
    dealer = zmq.asyncio.Context.instance().socket(zmq.DEALER)
    dealer.setsockopt(zmq.LINGER, 0)
    dealer.connect(endpoints.watcher_snapshot(run_dir))
    await dealer.send(encode("clone.snapshot_request", {}))
    messages = [await asyncio.wait_for(dealer.recv(), 10)]
    while decode(messages[-1]).type != "clone.snapshot":
        messages.append(await asyncio.wait_for(dealer.recv(), 10))
    dealer.close()
    return messages


def test_a_store_over_the_limit_reaches_a_subscriber_in_parts_each_under_the_limit(tmp_path):
    async def scenario():
        async with published(tmp_path, max_message_bytes=LIMIT) as (pub, subscribe):
            await pub.set_many(STORE.items())
            assert await _next(subscribe(max_message_bytes=LIMIT).events()) == Snapshot(STORE)
            wire = await _raw_snapshot(tmp_path)
            assert sum(map(len, wire)) > 2 * LIMIT and max(map(len, wire)) <= LIMIT
            sent = [decode(message) for message in wire]
            assert [env.type for env in sent] == ["clone.snapshot_part"] * (len(sent) - 1) + ["clone.snapshot"]
            assert [env.body["part"] for env in sent[:-1]] == [0, 1]
            assert sent[-1].body["parts"] == 2 and {env.seq for env in sent} == {pub.seq}
    asyncio.run(scenario())


def test_a_small_store_is_still_one_message(tmp_path):
    async def scenario():
        async with published(tmp_path, max_message_bytes=LIMIT) as (pub, subscribe):
            await pub.set_many([("a", 1), ("b", 2)])
            [message] = await _raw_snapshot(tmp_path)
            assert decode(message).body == {"epoch": pub.epoch, "items": [["a", 1], ["b", 2]]}
    asyncio.run(scenario())


def test_changes_adding_up_to_more_than_the_limit_arrive_in_batches_under_it(tmp_path):
    async def scenario():
        async with published(tmp_path, max_message_bytes=LIMIT) as (pub, subscribe):
            events = subscribe(max_message_bytes=LIMIT).events()
            assert await _next(events) == Snapshot({})
            wire = zmq.asyncio.Context.instance().socket(zmq.SUB)
            wire.setsockopt(zmq.SUBSCRIBE, b"")
            wire.connect(endpoints.watcher_updates(tmp_path))
            await asyncio.sleep(0.2)  # let both subscriptions reach the publisher
            await pub.set_many(STORE.items())
            assert [await _next(events) for _ in STORE] == [Update(key, value) for key, value in STORE.items()]
            sent = [await asyncio.wait_for(wire.recv(), 10) for _ in range(3)]
            assert max(map(len, sent)) <= LIMIT
            assert sum(len(decode(message).body["items"]) for message in sent) == len(STORE)
            wire.close()
    asyncio.run(scenario())


def test_a_late_subscriber_gets_the_whole_store_of_several_parts(tmp_path):
    async def scenario():
        async with published(tmp_path, max_message_bytes=LIMIT) as (pub, subscribe):
            first = subscribe(max_message_bytes=LIMIT)
            events = first.events()
            assert await _next(events) == Snapshot({})
            await asyncio.sleep(0.2)
            await pub.set_many(STORE.items())
            for _ in STORE:
                await _next(events)
            first.close()  # the subscriber's process stops; a new one starts while the store keeps changing
            await pub.set("Secret/tenant/s0", None)
            await pub.set("Secret/tenant/late", secret(99))
            expected = {**{k: v for k, v in STORE.items() if k != "Secret/tenant/s0"}, "Secret/tenant/late": secret(99)}
            restarted = subscribe(max_message_bytes=LIMIT).events()
            assert await _next(restarted) == Snapshot(expected)
            await asyncio.sleep(0.2)
            await pub.set("Secret/tenant/after", secret(100))  # and it follows the updates after the snapshot
            assert await _next(restarted) == Update("Secret/tenant/after", secret(100))
    asyncio.run(scenario())


def test_a_value_that_cannot_travel_alone_is_refused_and_the_others_go_on(tmp_path, caplog):
    async def scenario():
        async with published(tmp_path, max_message_bytes=LIMIT) as (pub, subscribe):
            await pub.set_many([("small", 1), ("huge", "small at first")])
            events = subscribe(max_message_bytes=LIMIT).events()
            assert await _next(events) == Snapshot({"small": 1, "huge": "small at first"})
            await asyncio.sleep(0.2)
            await pub.set_many([("huge", "x" * LIMIT), ("next", 2)])
            assert [await _next(events) for _ in range(2)] == [Update("huge", None), Update("next", 2)]
            assert await _next(subscribe(max_message_bytes=LIMIT).events()) == Snapshot({"small": 1, "next": 2})
    with caplog.at_level(logging.ERROR, logger="services.common.clone"):
        asyncio.run(scenario())
    assert f"refused huge: {LIMIT + 5} bytes packed, over the {LIMIT} bytes a clone message may carry" in caplog.text


def _message(msg_type: str, body: dict, seq: int = 7) -> bytes:
    """Packed directly: the codec's encode would refuse a bad item."""
    return msgpack.packb({"v": 1, "type": msg_type, "seq": seq, "body": body}, use_bin_type=True)


def _part(part: int, items: list, seq: int = 7) -> bytes:
    return _message("clone.snapshot_part", {"epoch": "e", "part": part, "items": items}, seq)


def _end(parts: int, items: list) -> bytes:
    return _message("clone.snapshot", {"epoch": "e", "parts": parts, "items": items})


COMPLETE = [_part(0, [["a", 1]]), _part(1, [["b", 2]]), _part(2, [["c", 3]]), _end(3, [["d", 4]])]


@pytest.mark.parametrize("answer, reason", [
    ([COMPLETE[0], COMPLETE[2], COMPLETE[3]], "part 2 came where part 1 was due"),
    ([COMPLETE[0], COMPLETE[1], COMPLETE[3]], "the snapshot ended after 3 part(s) and 2 came"),
    ([COMPLETE[0], _part(1, [["b", 2], [5, "bad key"]]), *COMPLETE[2:]],
     "clone.snapshot_part: field 'items'[1][0] must be str, got int"),
    ([COMPLETE[0], _part(1, [["b", 2]], seq=9), *COMPLETE[2:]], "a message of another snapshot (epoch e, seq 9)"),
    (COMPLETE[:3], "no snapshot from"),  # the publisher stopped before the end: it never comes
], ids=["part-lost", "last-part-lost", "garbled-part", "part-of-another-snapshot", "end-lost"])
def test_a_snapshot_missing_a_part_is_never_applied_and_is_asked_for_again(tmp_path, caplog, answer, reason):
    # The first thing the subscriber yields is the whole second answer, never a part of the first.
    with caplog.at_level(logging.INFO, logger="services.common.clone"):
        first = asyncio.run(first_event_given(tmp_path, [answer, COMPLETE]))
    assert first == Snapshot({"a": 1, "b": 2, "c": 3, "d": 4})
    assert reason in caplog.text

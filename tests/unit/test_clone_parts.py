"""A snapshot cut into parts under the channel's limit, and put back together only when every part came."""
import pytest

from proto import decode, pack_value
from services.common.clone_parts import (SNAPSHOT_PART_BYTES, IncompleteSnapshot, SnapshotAssembly, cut, fits_alone,
                                         snapshot_messages)

KIB = 1024


def _items(sizes: list[int]) -> list[tuple[str, bytes]]:
    return [(f"Secret/ns/s{i}", pack_value("x" * size)) for i, size in enumerate(sizes)]


def _assembled(messages: list[bytes]) -> dict:
    assembly = SnapshotAssembly()
    states = [assembly.add(decode(message)) for message in messages]
    assert states[:-1] == [None] * (len(messages) - 1)
    return states[-1]


@pytest.mark.parametrize("limit", [64 * KIB, 1024 * KIB, SNAPSHOT_PART_BYTES + 1024 * KIB])
def test_every_message_of_a_snapshot_is_within_the_limit_and_they_make_the_whole_store(limit):
    # Items of all sizes up to one just fitting alone, adding up to about five times the limit.
    sizes = [1, 100, limit // 3, limit - 300, 5 * KIB, limit // 2] * 3
    items = _items(sizes)
    assert all(fits_alone(key, packed, limit) for key, packed in items)
    messages = list(snapshot_messages("e", 9, items, max_message_bytes=limit))
    assert max(map(len, messages)) <= limit
    # A part holds several items only up to SNAPSHOT_PART_BYTES: a larger item travels alone.
    assert all(len(message) <= SNAPSHOT_PART_BYTES for message in messages if len(decode(message).body["items"]) > 1)
    assert _assembled(messages) == {key: "x" * size for (key, _), size in zip(items, sizes)}


def test_a_store_under_a_part_is_one_message_and_an_empty_one_too():
    assert len(list(snapshot_messages("e", 1, _items([1000] * 100), max_message_bytes=1024 * KIB))) == 1
    [empty] = snapshot_messages("e", 0, [], max_message_bytes=64 * KIB)
    assert decode(empty).body == {"epoch": "e", "items": []}


def test_a_value_over_the_limit_does_not_fit_alone():
    [(key, packed)] = _items([64 * KIB])
    assert not fits_alone(key, packed, 64 * KIB) and fits_alone(key, packed, 65 * KIB)


def test_runs_keep_the_order_and_bound_both_bytes_and_count():
    items = _items([10] * 7 + [500] + [10] * 3)
    runs = list(cut(items, budget=200, max_items=3))
    assert [item for run in runs for item in run] == items
    assert [len(run) for run in runs] == [3, 3, 1, 1, 3]  # the item over the budget alone in its run


def test_a_part_out_of_order_is_refused():
    messages = list(snapshot_messages("e", 3, _items([40 * KIB] * 6), max_message_bytes=64 * KIB))
    assembly = SnapshotAssembly()
    assembly.add(decode(messages[0]))
    with pytest.raises(IncompleteSnapshot, match="part 2 came where part 1 was due"):
        assembly.add(decode(messages[2]))

"""Clone messages of many items cut to fit the channel's largest message (proto/limits.py), and a snapshot put
back together from its parts.

A snapshot is sent as the ZeroMQ Guide's clone server sends one: the items, then an end carrying the sequence
the snapshot reflects (the Guide's KTHXBAI). Here the items travel many to a message: clone.snapshot_part
messages numbered from 0, then the clone.snapshot that ends them and says how many came. A snapshot that fits
in one part is that clone.snapshot alone, as before parts existed. The subscriber applies a snapshot only once
its end came after every part in order: a part lost, out of order or from another snapshot means asking again.
"""
from __future__ import annotations

import itertools
from typing import Any, Iterable, Iterator, Sequence

from proto import ITEMS_ENVELOPE_BYTES, Envelope, encode_snapshot, encode_snapshot_part, item_bytes

# A snapshot part holds this much at most (less when the channel's limit is smaller): the publisher builds one
# part at a time, so a store of hundreds of MiB is never copied whole into one message, and the watcher's other
# tasks get a turn between parts. A store under it (a few thousand objects) is one message, as before.
SNAPSHOT_PART_BYTES = 8 << 20


class IncompleteSnapshot(ValueError):
    """The parts received do not make one whole snapshot; the subscriber must ask again."""


def items_budget(max_message_bytes: int) -> int:
    """What the items of one message may add up to (item_bytes) under a channel limit of `max_message_bytes`."""
    return max_message_bytes - ITEMS_ENVELOPE_BYTES


def fits_alone(key: str, packed_value: bytes, max_message_bytes: int) -> bool:
    """Whether a message holding just this item stays within `max_message_bytes`."""
    return item_bytes(key, packed_value) <= items_budget(max_message_bytes)


def cut(items: Iterable[tuple[str, bytes]], *, budget: int, max_items: int | None = None,
        ) -> Iterator[list[tuple[str, bytes]]]:
    """The items in consecutive runs of at most `budget` bytes (item_bytes) and `max_items` items each; an item
    over the budget alone makes a run of its own."""
    run: list[tuple[str, bytes]] = []
    size = 0
    for key, packed in items:
        added = item_bytes(key, packed)
        if run and (size + added > budget or len(run) == max_items):
            yield run
            run, size = [], 0
        run.append((key, packed))
        size += added
    if run:
        yield run


def snapshot_messages(epoch: str, seq: int, items: Sequence[tuple[str, bytes]], *,
                      max_message_bytes: int) -> Iterator[bytes]:
    """The messages of one snapshot, parts first and the end last; each within `max_message_bytes` when every
    item fits_alone()."""
    budget = items_budget(min(max_message_bytes, SNAPSHOT_PART_BYTES))
    runs = cut(items, budget=budget)
    run = next(runs, [])
    part = 0
    for following in runs:
        yield encode_snapshot_part(epoch, seq, part, run)
        run, part = following, part + 1
    yield encode_snapshot(epoch, seq, run, parts=part)


class SnapshotAssembly:
    """The messages of one snapshot as they arrive, checked in order; add() returns the whole state once its end
    came after every part, and raises IncompleteSnapshot on anything else."""

    def __init__(self) -> None:
        self.epoch: str | None = None
        self.seq = 0
        self._items: list[tuple[str, Any]] = []
        self._parts = 0

    def add(self, env: Envelope) -> dict[str, Any] | None:
        """Take the next message; the snapshot's state when it was the end, None while parts are still due."""
        if env.type not in ("clone.snapshot_part", "clone.snapshot"):
            raise IncompleteSnapshot(f"a {env.type} message came among the snapshot's")
        if self._parts and (env.body["epoch"], env.seq) != (self.epoch, self.seq):
            raise IncompleteSnapshot(f"a message of another snapshot (epoch {env.body['epoch']}, seq {env.seq}) came "
                                     f"after {self._parts} part(s) of epoch {self.epoch}, seq {self.seq}")
        self.epoch, self.seq = env.body["epoch"], env.seq
        if env.type == "clone.snapshot_part":
            if env.body["part"] != self._parts:
                raise IncompleteSnapshot(f"part {env.body['part']} came where part {self._parts} was due")
            self._items += env.body["items"]
            self._parts += 1
            return None
        if env.body.get("parts", 0) != self._parts:
            raise IncompleteSnapshot(f"the snapshot ended after {env.body.get('parts', 0)} part(s) and {self._parts} "
                                     "came")
        return dict(itertools.chain(self._items, env.body["items"]))

"""The ZeroMQ Guide's *clone* pattern: a key-value state published to late and restarted subscribers.

Publisher: a PUB socket sends every change as `clone.update` with a sequence number (many changes at once as
`clone.updates`, one number each); a ROUTER socket answers `clone.snapshot_request` with the whole state and the
sequence it reflects, in parts when it is large (services/common/clone_parts.py); a heartbeat every second
carries the publisher's epoch (random per start) so that an idle subscriber notices a restarted publisher.

Subscriber: subscribes first, then asks for a snapshot, then applies only updates newer than it. A gap in
the sequence, or a new epoch, makes it fetch a fresh snapshot. Both sides set the high-water marks to 0
(unbounded): PUB/SUB silently drops messages at the default mark under load, and a dropped update here
would be a wrong route, not a slow one. Every socket bounds what it accepts (`proto.limits`): libzmq
drops a message over the limit with the connection it came on, and the subscriber, hearing nothing more,
reconnects and re-snapshots. So the publisher never sends one over it: snapshots and batches of updates are cut
to fit, and a value that could not travel alone is refused (its key is removed) with an error in the log.
"""
from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass
from typing import Any, AsyncIterator, Iterable, Sequence

import zmq
import zmq.asyncio

from proto import Envelope, ProtocolError, decode, encode, encode_update, encode_updates, pack_value, unpack_value
from proto.limits import CLONE_MAX_MESSAGE_BYTES, CLONE_REQUEST_MAX_MESSAGE_BYTES
from services.common.clone_parts import (IncompleteSnapshot, SnapshotAssembly, cut, fits_alone, items_budget,
                                         snapshot_messages)
from services.common.gc_pause import collector_paused, freeze_survivors
from services.common.ipc import bind_private

log = logging.getLogger(__name__)

HEARTBEAT_SECONDS = 1.0
SNAPSHOT_TIMEOUT_SECONDS = 3.0
# Without a message for this long (heartbeats come every second) the subscriber reconnects: the publisher
# may be gone, or our connection is, for good: libzmq does not reconnect a SUB that received a message over
# its size limit (a protocol error). Generous, so that a publisher busy for a few seconds costs nothing.
SILENCE_SECONDS = 5 * HEARTBEAT_SECONDS
# Updates read in one go before other tasks get a turn.
DRAIN_BATCH = 1000
# Updates a publisher sends in one clone.updates message, at most (about 0.6 MB of Kubernetes objects).
BATCH_ITEMS = 1000
# A message this large carries many values the subscriber's follower keeps (a snapshot, a batch of a scan or a
# relist).
LARGE_MESSAGE_BYTES = 64 * 1024


class ClonePublisher:
    """Owns a key-value state and publishes every change to it."""

    def __init__(self, ctx: zmq.asyncio.Context, *, updates_endpoint: str, snapshot_endpoint: str,
                 max_message_bytes: int = CLONE_MAX_MESSAGE_BYTES) -> None:
        """`max_message_bytes`: the largest message the subscribers accept (theirs must be the same)."""
        self.epoch = os.urandom(8).hex()
        self.max_message_bytes = max_message_bytes
        self.seq = 0
        # Each value packed (pack_value): a tenth of the memory of the objects (at 30,000 Kubernetes objects,
        # 9 MiB instead of 87), and a snapshot splices the bytes in without packing them again.
        self._packed: dict[str, bytes] = {}
        self._pub = ctx.socket(zmq.PUB)
        self._pub.setsockopt(zmq.SNDHWM, 0)
        self._pub.setsockopt(zmq.LINGER, 0)
        self._pub.setsockopt(zmq.MAXMSGSIZE, CLONE_REQUEST_MAX_MESSAGE_BYTES)  # it receives subscriptions
        bind_private(self._pub, updates_endpoint)
        # A PUB socket never blocks a send (it would drop at the high-water mark, which is off): sent directly,
        # not through the event loop's futures, which cost several times the send itself.
        self._pub_now: zmq.Socket[bytes] = zmq.Socket.shadow(self._pub.underlying)
        self._router = ctx.socket(zmq.ROUTER)
        self._router.setsockopt(zmq.SNDHWM, 0)
        self._router.setsockopt(zmq.LINGER, 0)
        self._router.setsockopt(zmq.MAXMSGSIZE, CLONE_REQUEST_MAX_MESSAGE_BYTES)
        # A send to a requester that is gone fails instead of vanishing: see _send_snapshot.
        self._router.setsockopt(zmq.ROUTER_MANDATORY, 1)
        bind_private(self._router, snapshot_endpoint)
        self.snapshots_sent = 0  # whole snapshots sent; one asked for by a requester that left is not counted
        self.keys_compared = 0  # keys whose new value was packed and compared with the kept one (set_many)

    def __len__(self) -> int:
        return len(self._packed)

    async def set(self, key: str, value: Any) -> None:
        """Set `key` to `value` (None deletes it) and publish the change; unchanged values are not sent."""
        await self.set_many(((key, value),))

    async def set_many(self, changes: Iterable[tuple[str, Any]]) -> None:
        """Set each key to its value (None deletes it) and publish what changed: one change as clone.update, more
        as clone.updates of up to BATCH_ITEMS each (fewer when they would not fit in a message). A scan or relist
        of 30,000 objects then costs both sides a message per thousand objects, not one per object (about 15 us
        each to encode, send, read and check)."""
        changed = ((key, packed) for key, value in changes if (packed := self._changed(key, value)) is not None)
        for batch in cut(changed, budget=items_budget(self.max_message_bytes), max_items=BATCH_ITEMS):
            self._publish(batch)

    def _changed(self, key: str, value: Any) -> bytes | None:
        """Keep `key`'s new value; what to publish for it (None: nothing changed)."""
        self.keys_compared += 1
        packed = pack_value(value)
        if value is not None and not fits_alone(key, packed, self.max_message_bytes):
            # Sent, it would cut every subscriber's connection, and every snapshot after it would too.
            log.error("refused %s: %d bytes packed, over the %d bytes a clone message may carry; it is left out "
                      "of the store: make the object smaller (an API server keeps none over 1.5 MiB, a manifests "
                      "file can hold any)", key, len(packed), self.max_message_bytes)
            value, packed = None, pack_value(None)
        if value is None:
            if key not in self._packed:
                return None
            del self._packed[key]
            return packed
        old = self._packed.get(key)
        # Equal bytes are an equal value; equal values may differ in bytes only by the order of their keys.
        if old is not None and (old == packed or unpack_value(old) == value):
            return None
        self._packed[key] = packed
        return packed

    def _publish(self, batch: list[tuple[str, bytes]]) -> None:
        self.seq += len(batch)
        if len(batch) == 1:
            key, packed = batch[0]
            self._pub_now.send(encode_update(self.epoch, self.seq, key, packed))
        else:
            self._pub_now.send(encode_updates(self.epoch, self.seq, batch))

    async def replace_all(self, new_state: dict[str, Any]) -> None:
        """Make the state equal to `new_state`, publishing exactly the difference."""
        await self.set_many([*((k, None) for k in self._packed if k not in new_state), *new_state.items()])

    async def serve(self) -> None:
        """Answer snapshot requests and send heartbeats until cancelled."""
        heartbeat = asyncio.create_task(self._heartbeat())
        try:
            while True:
                frames = await self._router.recv_multipart()
                identity, payload = frames[0], frames[-1]
                try:
                    env = decode(payload)
                except ProtocolError as err:
                    log.warning("rejected snapshot request: %s", err)
                    continue
                if env.type != "clone.snapshot_request":
                    log.warning("rejected message of type %s on the snapshot socket", env.type)
                    continue
                await self._send_snapshot(identity)
        finally:
            heartbeat.cancel()

    async def _send_snapshot(self, identity: bytes) -> None:
        # The state as it is now, with its sequence: changes made while the parts go out are updates after it.
        items, seq = list(self._packed.items()), self.seq
        for message in snapshot_messages(self.epoch, seq, items, max_message_bytes=self.max_message_bytes):
            try:
                await self._router.send_multipart([identity, message])
            except zmq.ZMQError as err:
                if err.errno != zmq.EHOSTUNREACH:
                    raise
                # The requester gave up and left (a subscriber asks again every SNAPSHOT_TIMEOUT_SECONDS until the
                # store is synced, each time from a new socket, and every request waits in the queue): the rest of
                # its snapshot is not built. Otherwise a first listing of 100,000 objects that took a minute
                # would be followed by a whole snapshot for each of the dozens of requests queued meanwhile,
                # before the one a subscriber still waits for.
                return
            await asyncio.sleep(0)  # other tasks get a turn between parts
        self.snapshots_sent += 1

    async def _heartbeat(self) -> None:
        while True:
            await asyncio.sleep(HEARTBEAT_SECONDS)
            await self._pub.send(encode("clone.heartbeat", {"epoch": self.epoch}, self.seq))

    def close(self) -> None:
        self._pub.close()
        self._router.close()


@dataclass(frozen=True)
class Snapshot:
    """The publisher's whole state; replaces whatever the subscriber had."""
    state: dict[str, Any]


@dataclass(frozen=True)
class Update:
    """One key changed; `value` None means the key was deleted."""
    key: str
    value: Any


@dataclass(frozen=True)
class Updates:
    """Keys changed, in order, as one message brought them: (key, value) pairs, value None for a deleted key."""
    items: Sequence[Sequence[Any]]


class CloneSubscriber:
    """Follows a ClonePublisher: yields a Snapshot first (and after any gap), then Updates in order."""

    def __init__(self, ctx: zmq.asyncio.Context, *, updates_endpoint: str, snapshot_endpoint: str,
                 max_message_bytes: int = CLONE_MAX_MESSAGE_BYTES) -> None:
        self._ctx = ctx
        self._updates_endpoint = updates_endpoint
        self._snapshot_endpoint = snapshot_endpoint
        self._max_message_bytes = max_message_bytes
        self._sub = self._subscribe()
        self.epoch: str | None = None
        self.seq = 0

    def _subscribe(self) -> zmq.asyncio.Socket:
        sub = self._ctx.socket(zmq.SUB)
        sub.setsockopt(zmq.RCVHWM, 0)
        sub.setsockopt(zmq.LINGER, 0)
        sub.setsockopt(zmq.MAXMSGSIZE, self._max_message_bytes)
        sub.setsockopt(zmq.SUBSCRIBE, b"")
        sub.connect(self._updates_endpoint)
        return sub

    async def _fetch_snapshot(self) -> Snapshot:
        """A whole snapshot: asked for again (on a new connection, so that nothing of the last answer remains)
        until one arrives complete."""
        while True:
            dealer = self._ctx.socket(zmq.DEALER)
            dealer.setsockopt(zmq.LINGER, 0)
            dealer.setsockopt(zmq.RCVHWM, 0)
            dealer.setsockopt(zmq.MAXMSGSIZE, self._max_message_bytes)
            dealer.connect(self._snapshot_endpoint)
            try:
                await dealer.send(encode("clone.snapshot_request", {}))
                snapshot = await self._receive_snapshot(dealer)
                if snapshot is not None:
                    return snapshot
                log.info("no snapshot from %s within %s s (none is served before the publisher is ready, and a "
                         "message over %d bytes is dropped); asking again",
                         self._snapshot_endpoint, SNAPSHOT_TIMEOUT_SECONDS, self._max_message_bytes)
            except (ProtocolError, IncompleteSnapshot) as err:
                log.warning("rejected snapshot: %s; asking again", err)
            finally:
                dealer.close()

    async def _receive_snapshot(self, dealer: zmq.asyncio.Socket) -> Snapshot | None:
        """The snapshot's messages put together; None when one is not there in time."""
        assembly = SnapshotAssembly()
        while await dealer.poll(SNAPSHOT_TIMEOUT_SECONDS * 1000):
            state = assembly.add(_decode_kept(await dealer.recv()))
            if state is not None:
                self.epoch, self.seq = assembly.epoch, assembly.seq
                return Snapshot(state)
        return None

    async def events(self) -> AsyncIterator[Snapshot | Update]:
        """A Snapshot, then each change as an Update (and a Snapshot again after a gap)."""
        async for event in self.batches():
            if isinstance(event, Snapshot):
                yield event
            else:
                for key, value in event.items:
                    yield Update(key, value)

    async def batches(self) -> AsyncIterator[Snapshot | Updates]:
        """As events(), with the changes of each message together: a follower of tens of thousands of changes
        applies them in a loop of its own instead of one event each (a few microseconds apiece)."""
        yield await self._fetch_snapshot()
        while True:
            if not await self._sub.poll(SILENCE_SECONDS * 1000):
                log.warning("nothing from %s for %s s (the publisher is down, or a message over %d bytes cut the "
                            "connection); reconnecting and fetching a new snapshot",
                            self._updates_endpoint, SILENCE_SECONDS, self._max_message_bytes)
                self._sub.close()
                self._sub = self._subscribe()  # subscribed again before the snapshot: no update falls between
                yield await self._fetch_snapshot()
                continue
            # Everything already queued is read without the event loop's futures: an awaited recv costs about
            # 40 us, ten times the decoding, and a relist or a full scan arrives as tens of thousands of updates.
            # The loop gets a turn after every DRAIN_BATCH of them.
            incoming: zmq.Socket[bytes] = zmq.Socket.shadow(self._sub.underlying)
            drained = 0
            while drained < DRAIN_BATCH:
                try:
                    data = incoming.recv(zmq.NOBLOCK)
                except zmq.Again:
                    break
                items = self._read_updates(data)
                if items is None:
                    yield await self._fetch_snapshot()
                    break
                if items:
                    yield Updates(items)
                drained += max(1, len(items))
            await asyncio.sleep(0)

    def _read_updates(self, data: bytes) -> Sequence[Sequence[Any]] | None:
        """The (key, value) changes a message carries (none: nothing to apply), or None when only a new snapshot
        is safe (a message we cannot read, a gap, a restarted publisher)."""
        try:
            env = _decode_kept(data)
        except ProtocolError as err:
            # A message we cannot read may have been an update: only a new snapshot is safe.
            log.warning("rejected update (%s); fetching a new snapshot", err)
            return None
        if env.type == "clone.heartbeat":
            if env.body["epoch"] != self.epoch or env.seq > self.seq:
                log.info("publisher restarted or updates were missed; fetching a new snapshot")
                return None
            return []
        if env.type == "clone.update":
            items = [(env.body["key"], env.body["value"])]
        elif env.type == "clone.updates":
            items = env.body["items"]
        else:
            return []
        first = env.seq - len(items) + 1
        if env.body["epoch"] == self.epoch and env.seq <= self.seq:
            return []  # already contained in the snapshot
        if env.body["epoch"] != self.epoch or first != self.seq + 1:
            log.info("gap in updates (have %s, got %s to %s); fetching a new snapshot", self.seq, first, env.seq)
            return None
        self.seq = env.seq
        return items

    def close(self) -> None:
        self._sub.close()


def _decode_kept(data: bytes) -> Envelope:
    """decode(), for a message whose values the follower keeps. A large one is decoded with the collector off and
    what it holds frozen (services/common/gc_pause.py), as the watcher does with a scan: otherwise the collections
    during the decode go through every object decoded so far, and later ones through all of them again (30,000
    objects: 0.45 s to read with the collector on, 0.16 s so)."""
    if len(data) < LARGE_MESSAGE_BYTES:
        return decode(data)
    with collector_paused():
        env = decode(data)
        freeze_survivors()
    return env

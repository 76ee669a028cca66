"""The connection loop's deadlines: never early, and those due close together expire in one turn of the loop."""
import threading
import time

from services.proxy.event_loop import Deadlines, EventLoop

SECONDS = 0.5  # its slack: a twentieth, 25 ms
ENTRIES = 30
SPACING = 0.002  # what a burst of connections leaves: one entry every 2 ms


def test_deadlines_run_no_earlier_than_due_and_those_due_together_in_one_turn():
    loop = EventLoop()
    added: dict[int, float] = {}
    expired: dict[int, float] = {}
    all_expired = threading.Event()

    def expire(item: int) -> None:
        expired[item] = time.monotonic()
        if len(expired) == ENTRIES:
            all_expired.set()

    deadlines = Deadlines(loop, SECONDS, expire)

    def add(item: int) -> None:
        added[item] = time.monotonic()
        deadlines.add(item)

    loop.start("test-deadlines")
    try:
        for item in range(ENTRIES):
            loop.call_soon_threadsafe(lambda item=item: add(item))
            time.sleep(SPACING)
        assert all_expired.wait(10), f"{len(expired)} of {ENTRIES} deadlines ran"
    finally:
        loop.stop_threadsafe()
        loop.join(5)

    assert all(expired[item] >= added[item] + SECONDS for item in added)
    assert sorted(expired, key=expired.__getitem__) == list(range(ENTRIES))  # in the order added
    # One turn expires all it finds due: its entries share a moment. One wake-up per entry (every 2 ms) made
    # each a turn of its own.
    moments = sorted(expired.values())
    turns = 1 + sum(1 for earlier, later in zip(moments, moments[1:]) if later - earlier > 0.001)
    assert turns <= 1 + ENTRIES * SPACING / (SECONDS / 20) + 2, f"{turns} turns for {ENTRIES} deadlines"

"""The watcher's store: the clone publisher, plus when it last changed (for the status file)."""
from __future__ import annotations

import time
from typing import Any, Iterable

from services.common.clone import ClonePublisher


class TrackedStore:
    """A StoreWriter over a ClonePublisher that records when the store last changed."""

    def __init__(self, publisher: ClonePublisher) -> None:
        self.publisher = publisher
        self.last_event: float | None = None   # the store last changed
        self.last_write: float | None = None   # the source last wrote, changed or not

    def __len__(self) -> int:
        return len(self.publisher)

    def _note(self, seq_before: int) -> None:
        self.last_write = time.time()
        if self.publisher.seq != seq_before:
            self.last_event = self.last_write

    async def set_many(self, changes: Iterable[tuple[str, Any]]) -> None:
        seq = self.publisher.seq
        await self.publisher.set_many(changes)
        self._note(seq)

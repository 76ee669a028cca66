"""What a watcher source is: something that keeps a StoreWriter equal to the objects it sees."""
from __future__ import annotations

from typing import Any, Protocol


class StoreWriter(Protocol):
    """Implemented by services.common.clone.ClonePublisher; keys come from services.common.objects.object_key."""

    async def set(self, key: str, value: Any) -> None:
        """Set one object; None deletes it. Setting an equal value publishes nothing."""

    async def replace_all(self, new_state: dict[str, Any]) -> None:
        """Make the whole store equal to `new_state`, publishing exactly the difference (used after a relist)."""


class Source(Protocol):
    async def run(self, store: StoreWriter) -> None:
        """Fill `store`, then keep it up to date until cancelled. Never returns on its own."""

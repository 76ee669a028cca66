"""A table handed out as a snapshot per model, made from the last one with a change's entries, without a copy.

The incremental model changes a few hosts of a large table per change, and each Model must keep its own table: the
syncer builds the next model in a thread while the event loop reads the last one (the dashboard, /metrics). Copied
whole, the routes table cost each change about 10 ms at 100,000 hosts (the entries' reference counts, all over the
heap). A Layered is a base dict that is never changed once handed out, and the entries changed since (a dict copied
per snapshot, kept small): it is folded into a new base once it holds more than about sqrt(2 * base) entries, so a
change costs O(sqrt(N)) entries copied, amortized, instead of N.
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping
from math import isqrt
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")
_GONE = object()  # an entry deleted since the base
_ABSENT = object()
_SMALL = 64  # a changed part this small is never folded


class Layered(Mapping[K, V], Generic[K, V]):
    """An immutable mapping: `base` (never changed) with `over`'s entries in front (_GONE: deleted)."""

    __slots__ = ("_base", "_over", "_len")

    def __init__(self, base: dict[K, V] | None = None, over: dict[K, object] | None = None, length: int | None = None):
        self._base: dict[K, V] = {} if base is None else base
        self._over: dict[K, object] = {} if over is None else over
        self._len = len(self._base) if length is None else length

    def __getitem__(self, key: K) -> V:
        value = self._over.get(key, _ABSENT)
        if value is _ABSENT:
            return self._base[key]
        if value is _GONE:
            raise KeyError(key)
        return value  # type: ignore[return-value]  # an entry of over other than _GONE is a V

    def get(self, key: K, default: V | None = None) -> V | None:  # type: ignore[override]
        value = self._over.get(key, _ABSENT)
        if value is _ABSENT:
            return self._base.get(key, default)
        return default if value is _GONE else value  # type: ignore[return-value]

    def __contains__(self, key: object) -> bool:
        value = self._over.get(key, _ABSENT)  # type: ignore[arg-type]  # any key may be asked about
        return key in self._base if value is _ABSENT else value is not _GONE

    def __iter__(self) -> Iterator[K]:
        over = self._over
        yield from (key for key in self._base if key not in over)
        yield from (key for key, value in over.items() if value is not _GONE)

    def __len__(self) -> int:
        return self._len

    def __repr__(self) -> str:
        return f"Layered({dict(self.items())!r})"

    def changed(self, entries: Mapping[K, V | None]) -> Layered[K, V]:
        """A new snapshot: this one with `entries` set (None: deleted); this one is left as it is."""
        length = self._len
        for key, value in entries.items():
            length += (value is not None) - (key in self)
        over = {**self._over, **{key: _GONE if value is None else value for key, value in entries.items()}}
        if len(over) <= max(_SMALL, isqrt(2 * len(self._base))):
            return Layered(self._base, over, length)
        base = dict(self._base)
        for key, entry in over.items():
            if entry is _GONE:
                base.pop(key, None)
            else:
                base[key] = entry  # type: ignore[assignment]  # an entry of over other than _GONE is a V
        return Layered(base, {}, length)

"""Keys at which a table may differ from an earlier one: a set, or None when any key may (nothing narrowed it)."""
from __future__ import annotations

ChangedKeys = frozenset[str] | None


def union(first: ChangedKeys, second: ChangedKeys) -> ChangedKeys:
    """The keys changed by `first` and then by `second` (None when either says any key may have changed)."""
    return None if first is None or second is None else first | second

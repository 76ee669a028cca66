"""The order in which objects claim what they share: oldest first, as ingress-nginx and the Gateway API take it."""
from __future__ import annotations

import sys
from datetime import datetime, timezone
from typing import Any, Mapping

_NEWEST = datetime.max.replace(tzinfo=timezone.utc)


def creation_order(obj: Mapping[str, Any], *, namespace: str, name: str) -> tuple[datetime, str]:
    """Oldest first: creationTimestamp (missing or unreadable counts as newest), then "namespace/name"."""
    stamp = (obj.get("metadata") or {}).get("creationTimestamp")
    when = _NEWEST
    if isinstance(stamp, datetime):  # YAML loaders turn unquoted timestamps into datetimes
        when = stamp
    elif isinstance(stamp, str):
        try:
            when = datetime.fromisoformat(stamp)
        except ValueError:
            pass
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when, sys.intern(f"{namespace}/{name}")  # one copy with the plan's own ref (build.plan_ingress)

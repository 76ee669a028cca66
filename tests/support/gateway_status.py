"""Reading the Gateway API status pyngress writes, for the model and e2e tests: each entry's conditions by type, and
whether they observed the object's generation."""
from __future__ import annotations

from typing import Any


def conditions(entry: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """An entry's (a status, a listener's, a route parent's) conditions: type → (status, reason)."""
    return {c["type"]: (c["status"], c["reason"]) for c in entry.get("conditions") or ()}


def observed(obj: dict[str, Any], entries: list[dict[str, Any]]) -> bool:
    """Whether every condition of `entries` observed `obj`'s generation."""
    return all(c.get("observedGeneration") == obj["metadata"]["generation"] for e in entries for c in e["conditions"])


def listener_status(status: dict[str, Any], name: str) -> dict[str, Any]:
    """The status.listeners entry of listener `name`."""
    [found] = [item for item in status["listeners"] if item["name"] == name]
    return found

"""The message types and the shape of each body.

A schema maps a field name to its expected type(s); a field whose name ends in "?" is optional.
`object` accepts anything (used for opaque payloads such as Kubernetes objects, which the
receiver validates itself).
"""
from __future__ import annotations

from typing import Any


class SchemaError(ValueError):
    """A body that does not match its message type's schema."""


NONE = type(None)

BODY_SCHEMAS: dict[str, dict[str, Any]] = {
    # Clone pattern (ZeroMQ Guide, chapter 5): state updates, snapshots and liveness.
    "clone.update": {"epoch": str, "key": str, "value": object},
    "clone.heartbeat": {"epoch": str},
    "clone.snapshot_request": {},
    "clone.snapshot": {"epoch": str, "items": list},
    # Load-balancing broker between cniserver and the cniworker pool.
    # slots: how many requests the worker runs at once (0: it is draining before it exits).
    "cni.worker_ready": {"pid": int, "slots?": int},
    "cni.request": {"id": str, "env": dict, "config": bytes},
    "cni.reply": {"id": str, "ok": bool, "result?": dict, "error?": dict},
}


def check_body(msg_type: str, body: dict[str, Any]) -> None:
    schema = BODY_SCHEMAS[msg_type]
    for field, expected in schema.items():
        name = field.rstrip("?")
        if name not in body:
            if field.endswith("?"):
                continue
            raise SchemaError(f"missing field {name!r}")
        if expected is object:
            continue
        if not isinstance(body[name], expected) or (expected is int and isinstance(body[name], bool)):
            raise SchemaError(f"field {name!r} must be {getattr(expected, '__name__', expected)}, "
                              f"got {type(body[name]).__name__}")
    unknown = body.keys() - {f.rstrip("?") for f in schema}
    if unknown:
        raise SchemaError(f"unknown field(s) {', '.join(sorted(map(str, unknown)))}")

"""The message types and the shape of each body, checked in depth on encode and on decode.

A schema maps a field name to its shape; a field whose name ends in "?" is optional. A shape is a
type (`str`, `int` — a bool is not an int here —, `bool`, `bytes`), `object` for an opaque payload
that the receiver validates itself (a Kubernetes object), or a nested shape: `ListOf`, `Pair`,
`MapOf`. Checking every level here means a receiver can index, iterate and `dict()` a decoded body
without meeting a type it did not expect.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeAlias


class SchemaError(ValueError):
    """A body that does not match its message type's schema."""


@dataclass(frozen=True)
class ListOf:
    """A list whose every item has the shape `item`."""
    item: Shape


@dataclass(frozen=True)
class Pair:
    """A list of exactly two items, e.g. a [key, value] entry (msgpack has no tuples)."""
    first: Shape
    second: Shape


@dataclass(frozen=True)
class MapOf:
    """A map whose every key has the shape `key` and every value the shape `value`."""
    key: Shape
    value: Shape


Shape: TypeAlias = type | ListOf | Pair | MapOf

BODY_SCHEMAS: dict[str, dict[str, Shape]] = {
    # Clone pattern (ZeroMQ Guide, chapter 5): state updates, snapshots and liveness.
    "clone.update": {"epoch": str, "key": str, "value": object},
    # Several updates at once (a scan or a relist of thousands of objects): the envelope's seq is the last one's,
    # so items[i] is update number seq - len(items) + 1 + i; a value None deletes its key, as in clone.update.
    "clone.updates": {"epoch": str, "items": ListOf(Pair(str, object))},
    "clone.heartbeat": {"epoch": str},
    "clone.snapshot_request": {},
    # A snapshot ends with clone.snapshot (the Guide's KTHXBAI), which carries the sequence it reflects. One too
    # large for a message comes first as clone.snapshot_part messages numbered from 0, each with the same epoch
    # and seq; `parts` on the end says how many came (absent: none, the whole snapshot in the one message).
    "clone.snapshot_part": {"epoch": str, "part": int, "items": ListOf(Pair(str, object))},
    "clone.snapshot": {"epoch": str, "parts?": int, "items": ListOf(Pair(str, object))},
    # Load-balancing broker between cniserver and the cniworker pool.
    # slots: how many requests the worker runs at once (0: it is draining before it exits).
    "cni.worker_ready": {"pid": int, "slots?": int},
    "cni.request": {"id": str, "env": MapOf(str, str), "config": bytes},
    # result: a CNI result; error: a CNI error (code, msg, details), whose content the broker checks
    # itself so that a malformed one still answers the caller rather than dropping the reply.
    "cni.reply": {"id": str, "ok": bool, "result?": MapOf(str, object), "error?": MapOf(str, object)},
}


def check_body(msg_type: str, body: dict[str, Any]) -> None:
    """Raise SchemaError naming the first field (and the place inside it) that does not match."""
    schema = BODY_SCHEMAS[msg_type]
    for field, shape in schema.items():
        name = field.rstrip("?")
        if name in body:
            _check(shape, body[name], f"field {name!r}")
        elif not field.endswith("?"):
            raise SchemaError(f"missing field {name!r}")
    unknown = body.keys() - {f.rstrip("?") for f in schema}
    if unknown:
        raise SchemaError(f"unknown field(s) {', '.join(sorted(map(str, unknown)))}")


def describe(shape: Shape) -> str:
    """How a shape reads in an error message, e.g. "list of [str, object]"."""
    if isinstance(shape, ListOf):
        return f"list of {describe(shape.item)}"
    if isinstance(shape, Pair):
        return f"[{describe(shape.first)}, {describe(shape.second)}]"
    if isinstance(shape, MapOf):
        return f"map of {describe(shape.key)} to {describe(shape.value)}"
    return shape.__name__


def _check(shape: Shape, value: Any, where: str) -> None:
    if shape is object:
        return
    if isinstance(shape, ListOf):
        _require(isinstance(value, list), shape, value, where)
        for index, item in enumerate(value):
            _check(shape.item, item, f"{where}[{index}]")
    elif isinstance(shape, Pair):
        _require(isinstance(value, list) and len(value) == 2, shape, value, where)
        _check(shape.first, value[0], f"{where}[0]")
        _check(shape.second, value[1], f"{where}[1]")
    elif isinstance(shape, MapOf):
        _require(isinstance(value, dict), shape, value, where)
        for key, item in value.items():
            _check(shape.key, key, f"{where} key {_short(key)}")
            _check(shape.value, item, f"{where}[{_short(key)}]")
    else:
        _require(isinstance(value, shape) and not (shape is int and isinstance(value, bool)), shape, value, where)


def _require(ok: bool, shape: Shape, value: Any, where: str) -> None:
    if not ok:
        raise SchemaError(f"{where} must be {describe(shape)}, got {_kind(value)}")


def _kind(value: Any) -> str:
    """The type of a bad value, never the value itself (it may be large, or a secret)."""
    if value is None:
        return "nil"
    if isinstance(value, list):
        return f"list of {len(value)} item(s)"
    return type(value).__name__


def _short(key: Any) -> str:
    text = repr(key)
    return text if len(text) <= 60 else text[:57] + "..."

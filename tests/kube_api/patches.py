"""The PATCH bodies the API server takes: JSON merge patch (RFC 7386), JSON patch (RFC 6902), and
strategic merge patch, which for the kinds served here is taken as a merge patch (lists are replaced
whole, not merged by key)."""
from __future__ import annotations

import copy
from typing import Any

MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"


class PatchError(ValueError):
    """A patch that cannot be applied (422 Unprocessable Entity on the real server)."""


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge key by key, null deletes a key, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _without_order_hints(patch: Any) -> Any:
    """Drop strategic merge's `$setElementOrder/...` hints; refuse the directives that change meaning."""
    if isinstance(patch, list):
        return [_without_order_hints(item) for item in patch]
    if not isinstance(patch, dict):
        return patch
    result = {}
    for key, value in patch.items():
        if key.startswith("$setElementOrder/"):
            continue
        if key.startswith("$"):
            raise PatchError(f"strategic merge directive {key!r} is not supported by the test API server")
        result[key] = _without_order_hints(value)
    return result


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    return merge_patch(target, _without_order_hints(patch))


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _split_pointer(pointer: str) -> list[str]:
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise PatchError(f"invalid JSON pointer {pointer!r}: must be empty or start with '/'")
    return [_unescape(token) for token in pointer[1:].split("/")]


def _index(container: list, token: str, for_insert: bool) -> int:
    if token == "-" and for_insert:
        return len(container)
    if not token.isdigit() or (len(token) > 1 and token.startswith("0")):
        raise PatchError(f"invalid array index {token!r}")
    index = int(token)
    if index > len(container) or (index == len(container) and not for_insert):
        raise PatchError(f"array index {index} out of range")
    return index


def _parent(doc: Any, tokens: list[str]) -> Any:
    node = doc
    for token in tokens[:-1]:
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list):
            node = node[_index(node, token, for_insert=False)]
        else:
            raise PatchError(f"path element {token!r} does not exist")
    return node


def _get(doc: Any, pointer: str) -> Any:
    tokens = _split_pointer(pointer)
    if not tokens:
        return doc
    parent, last = _parent(doc, tokens), tokens[-1]
    if isinstance(parent, dict) and last in parent:
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(parent, last, for_insert=False)]
    raise PatchError(f"path {pointer!r} does not exist")


def _add(doc: Any, pointer: str, value: Any) -> Any:
    tokens = _split_pointer(pointer)
    if not tokens:
        return value
    parent, last = _parent(doc, tokens), tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, for_insert=True), value)
    else:
        raise PatchError(f"cannot add at {pointer!r}: its parent is not an object or array")
    return doc


def _remove(doc: Any, pointer: str) -> Any:
    tokens = _split_pointer(pointer)
    if not tokens:
        raise PatchError("cannot remove the whole document")
    parent, last = _parent(doc, tokens), tokens[-1]
    if isinstance(parent, dict) and last in parent:
        del parent[last]
    elif isinstance(parent, list):
        del parent[_index(parent, last, for_insert=False)]
    else:
        raise PatchError(f"cannot remove {pointer!r}: it does not exist")
    return doc


def json_patch(target: Any, operations: Any) -> Any:
    """RFC 6902: add, remove, replace, move, copy and test, applied in order, all or nothing."""
    if not isinstance(operations, list):
        raise PatchError("a JSON patch must be a list of operations")
    doc = copy.deepcopy(target)
    for op in operations:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise PatchError(f"invalid JSON patch operation {op!r}: needs 'op' and 'path'")
        kind, path = op["op"], op["path"]
        if kind in ("add", "replace", "test") and "value" not in op:
            raise PatchError(f"JSON patch operation {kind!r} at {path!r} needs a 'value'")
        if kind == "add":
            doc = _add(doc, path, copy.deepcopy(op["value"]))
        elif kind == "remove":
            doc = _remove(doc, path)
        elif kind == "replace":
            _get(doc, path)  # must exist
            doc = _add(_remove(doc, path), path, copy.deepcopy(op["value"])) if path else copy.deepcopy(op["value"])
        elif kind in ("move", "copy"):
            if "from" not in op:
                raise PatchError(f"JSON patch operation {kind!r} needs 'from'")
            value = copy.deepcopy(_get(doc, op["from"]))
            if kind == "move":
                doc = _remove(doc, op["from"])
            doc = _add(doc, path, value)
        elif kind == "test":
            if _get(doc, path) != op["value"]:
                raise PatchError(f"JSON patch test failed at {path!r}")
        else:
            raise PatchError(f"unknown JSON patch operation {kind!r}")
    return doc

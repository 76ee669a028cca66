"""labelSelector and fieldSelector, parsed as the API server parses them, into predicates on objects."""
from __future__ import annotations

import re
from typing import Any, Callable

Predicate = Callable[[dict[str, Any]], bool]

_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?"
_KEY = rf"(?:[a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?{_NAME}"
_VALUE = rf"(?:{_NAME})?"
_NOT_EXISTS = re.compile(rf"!\s*(?P<key>{_KEY})")
_SET = re.compile(rf"(?P<key>{_KEY})\s+(?P<op>in|notin)\s*\((?P<values>[^()]*)\)")
_EQUALITY = re.compile(rf"(?P<key>{_KEY})\s*(?P<op>==|=|!=)\s*(?P<value>{_VALUE})")
_EXISTS = re.compile(rf"(?P<key>{_KEY})")
_VALUE_ONLY = re.compile(_VALUE)

SUPPORTED_FIELDS = ("metadata.name", "metadata.namespace")


class SelectorError(ValueError):
    """A selector the API server would reject with 400 Bad Request."""


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside the parentheses of an `in (...)` set."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts]


def _labels(obj: dict[str, Any]) -> dict[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def _requirement(text: str) -> Predicate:
    if m := _NOT_EXISTS.fullmatch(text):
        key = m["key"]
        return lambda obj: key not in _labels(obj)
    if m := _SET.fullmatch(text):
        key, values = m["key"], {v.strip() for v in m["values"].split(",")}
        if not values or any(not _VALUE_ONLY.fullmatch(v) for v in values):
            raise SelectorError(f"unable to parse requirement: invalid values in {text!r}")
        if m["op"] == "in":
            return lambda obj: _labels(obj).get(key) in values
        return lambda obj: _labels(obj).get(key) not in values  # notin also selects objects without the key
    if m := _EQUALITY.fullmatch(text):
        key, value = m["key"], m["value"]
        if m["op"] == "!=":
            return lambda obj: _labels(obj).get(key) != value  # also selects objects without the key
        return lambda obj: _labels(obj).get(key) == value
    if m := _EXISTS.fullmatch(text):
        key = m["key"]
        return lambda obj: key in _labels(obj)
    raise SelectorError(f"unable to parse requirement: {text!r}")


def label_selector(text: str | None) -> Predicate:
    """`a=b,c!=d,e in (f,g),h notin (i),j,!k` → a predicate; an empty selector selects everything."""
    if not text or not text.strip():
        return lambda obj: True
    requirements = [_requirement(part) for part in _split_top_level(text)]
    return lambda obj: all(req(obj) for req in requirements)


def _field_value(obj: dict[str, Any], field: str) -> str:
    meta = obj.get("metadata") or {}
    return meta.get(field.split(".", 1)[1]) or ""


def _field_requirement(text: str, kind_plural: str) -> Predicate:
    m = re.fullmatch(r"\s*([A-Za-z0-9.]+)\s*(==|=|!=)\s*([^,]*?)\s*", text)
    if not m:
        raise SelectorError(f"invalid selector: {text!r}; expected field=value, field==value or field!=value")
    field, op, value = m.groups()
    if field not in SUPPORTED_FIELDS:
        raise SelectorError(f'field label not supported: {field} (for {kind_plural}; supported: '
                            f'{", ".join(SUPPORTED_FIELDS)})')
    if op == "!=":
        return lambda obj: _field_value(obj, field) != value
    return lambda obj: _field_value(obj, field) == value


def field_selector(text: str | None, kind_plural: str) -> Predicate:
    """`metadata.name=x,metadata.namespace!=y` → a predicate; an empty selector selects everything."""
    if not text or not text.strip():
        return lambda obj: True
    requirements = [_field_requirement(part, kind_plural) for part in text.split(",")]
    return lambda obj: all(req(obj) for req in requirements)

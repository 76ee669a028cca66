"""Kubernetes label selectors in their text form (`kubectl -l`, `--watch-namespace-selector`).

The grammar is the API server's (k8s.io/apimachinery labels.Parse), requirements joined by commas:
`key=value`, `key==value`, `key!=value`, `key in (v1,v2)`, `key notin (v1,v2)`, `key` (exists) and `!key`
(does not exist). `!=` and `notin` also match objects without the key, as there. An empty selector matches
everything.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping

_NAME_PART = r"[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_KEY = rf"(?:[a-z0-9](?:[-a-z0-9.]{{0,251}}[a-z0-9])?/)?{_NAME_PART}"
_VALUE = rf"(?:{_NAME_PART})?"
_REQUIREMENT = re.compile(
    rf"(?P<absent>!)\s*(?P<absent_key>{_KEY})"
    rf"|(?P<set_key>{_KEY})\s+(?P<set_op>in|notin)\s*\((?P<values>[^()]*)\)"
    rf"|(?P<eq_key>{_KEY})\s*(?P<eq_op>==|=|!=)\s*(?P<value>{_VALUE})"
    rf"|(?P<key>{_KEY})")
_VALUE_ONLY = re.compile(_VALUE)


class LabelSelectorError(ValueError):
    """A selector the API server would refuse too."""


@dataclass(frozen=True)
class _Requirement:
    key: str
    operator: str  # "in", "notin", "exists" or "!exists"; "=" is "in" with one value, "!=" "notin"
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.operator == "exists":
            return self.key in labels
        if self.operator == "!exists":
            return self.key not in labels
        present = labels.get(self.key) in self.values
        return present if self.operator == "in" else not present


@dataclass(frozen=True)
class LabelSelector:
    """A parsed selector; `text` is what it was parsed from."""
    text: str
    requirements: tuple[_Requirement, ...]

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        return all(requirement.matches(labels or {}) for requirement in self.requirements)


def _split_requirements(text: str) -> list[str]:
    """Split on the commas outside `in (...)` value lists."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(char)
    parts.append("".join(current).strip())
    return parts


def _requirement(text: str) -> _Requirement:
    match = _REQUIREMENT.fullmatch(text)
    if match is None:
        raise LabelSelectorError(f"{text!r} is not a label requirement: expected key=value, key!=value, "
                                 "key in (a,b), key notin (a,b), key or !key")
    if match["absent"]:
        return _Requirement(match["absent_key"], "!exists")
    if match["set_key"]:
        values = [value.strip() for value in match["values"].split(",")]
        if not all(values) or not all(_VALUE_ONLY.fullmatch(value) for value in values):
            raise LabelSelectorError(f"{text!r}: the values in parentheses must be label values, comma-separated")
        return _Requirement(match["set_key"], match["set_op"], frozenset(values))
    if match["eq_key"]:
        return _Requirement(match["eq_key"], "notin" if match["eq_op"] == "!=" else "in", frozenset([match["value"]]))
    return _Requirement(match["key"], "exists")


def parse_label_selector(text: str) -> LabelSelector:
    """`team=a,env in (prod,staging),!legacy` → a LabelSelector; raises LabelSelectorError saying what is wrong."""
    if not text.strip():
        return LabelSelector(text, ())
    return LabelSelector(text, tuple(_requirement(part) for part in _split_requirements(text)))

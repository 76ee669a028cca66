"""ReferenceGrants: which references into a namespace are allowed from which kinds of other namespaces.

A reference to an object in another namespace is allowed only when a ReferenceGrant in the target's namespace
lists the referring kind and namespace in `from` and the target's kind (and name, when given) in `to`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable


@dataclass(frozen=True)
class _Grant:
    namespace: str  # the targets' namespace
    sources: frozenset[tuple[str, str, str]]  # (group, kind, namespace)
    targets: frozenset[tuple[str, str, str | None]]  # (group, kind, name or None for any)


class ReferenceGrants:
    def __init__(self, grants: Iterable[tuple[str, dict[str, Any]]]) -> None:
        self._grants: list[_Grant] = []
        # The target namespaces asked about, when recorded (recording()): a route's plan depends on their grants.
        self._asked: set[str] | None = None
        for namespace, obj in grants:
            spec = obj.get("spec") or {}
            sources = frozenset((f.get("group") or "", f.get("kind") or "", f.get("namespace") or "")
                                for f in spec.get("from") or () if isinstance(f, dict))
            targets = frozenset((t.get("group") or "", t.get("kind") or "", t.get("name") or None)
                                for t in spec.get("to") or () if isinstance(t, dict))
            self._grants.append(_Grant(namespace, sources, targets))

    def allows(self, *, source: tuple[str, str, str], target: tuple[str, str, str, str]) -> bool:
        """Whether an object of (group, kind, namespace) `source` may refer to (group, kind, namespace, name)
        `target`; always within one namespace."""
        group, kind, namespace, name = target
        if source[2] == namespace:
            return True
        if self._asked is not None:
            self._asked.add(namespace)
        return any(grant.namespace == namespace and source in grant.sources
                   and ((group, kind, None) in grant.targets or (group, kind, name) in grant.targets)
                   for grant in self._grants)

    def in_namespace(self, namespace: str) -> tuple[_Grant, ...]:
        """The grants of one target namespace, as read: equal tuples allow the same references."""
        return tuple(grant for grant in self._grants if grant.namespace == namespace)

    def recording(self, asked: set[str]) -> ReferenceGrants:
        """These grants, adding each target namespace asked about (in another namespace than the source's) to
        `asked`."""
        view = ReferenceGrants(())
        view._grants, view._asked = self._grants, asked
        return view

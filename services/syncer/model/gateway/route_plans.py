"""Each route's plan kept from one build to the next while what it was planned from is unchanged.

A plan (httproutes.plan_route, grpcroutes.plan_grpc_route, tlsroutes.plan_tls_route) reads only its route and the
ReferenceGrants of the namespaces its references cross into: it is kept while the route is the same object (or an
equal one, as after a new snapshot) and those namespaces' grants are equal. Planning every route again made each
model at 10,000 HTTPRoutes take 1.1 s, whatever had changed (BENCHMARKS.md).
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable

from .fields import RouteRejected
from .reference_grants import ReferenceGrants

Planner = Callable[..., Any]  # (route, *, namespace, name, order, grants) → a plan, or raises RouteRejected


@dataclass(slots=True)
class _Kept:
    route: dict[str, Any]
    order: tuple[datetime, str]
    grants: tuple[tuple[str, tuple[Any, ...]], ...]  # (namespace, its grants) for each namespace asked about
    plan: Any  # None when rejected
    rejected: RouteRejected | None  # why, when rejected: raised again as a new RouteRejected each time


class RoutePlans:
    """Route plans by (kind, namespace, name); `made` counts the plans made (not reused) since creation."""

    def __init__(self) -> None:
        self._kept: dict[tuple[str, str, str], _Kept] = {}
        self._seen: set[tuple[str, str, str]] = set()
        self.made = 0

    def plan(self, planner: Planner, route: dict[str, Any], *, kind: str, namespace: str, name: str,
             order: tuple[datetime, str], grants: ReferenceGrants) -> Any:
        """planner's plan of `route`, kept or made; raises its RouteRejected."""
        key = (kind, namespace, name)
        self._seen.add(key)
        kept = self._kept.get(key)
        if kept is None or not self._still(kept, route, order, grants):
            asked: set[str] = set()
            plan: Any = None
            rejected: RouteRejected | None = None
            self.made += 1
            try:
                plan = planner(route, namespace=namespace, name=name, order=order, grants=grants.recording(asked))
            except RouteRejected as err:
                rejected = RouteRejected(str(err), reason=err.reason)  # not its traceback: the planner's frames
            kept = _Kept(route=route, order=order, plan=plan, rejected=rejected,
                         grants=tuple((ns, grants.in_namespace(ns)) for ns in sorted(asked)))
            self._kept[key] = kept
        if kept.rejected is not None:
            raise RouteRejected(str(kept.rejected), reason=kept.rejected.reason)
        return kept.plan

    def forget(self, key: tuple[str, str, str]) -> None:
        """Forget the plan of one route (kind, namespace, name), gone from the store."""
        self._kept.pop(key, None)
        self._seen.discard(key)

    def forget_unseen(self) -> None:
        """Forget the plans of routes not asked for since the last call (gone from the store)."""
        for key in self._kept.keys() - self._seen:
            del self._kept[key]
        self._seen = set()

    @staticmethod
    def _still(kept: _Kept, route: dict[str, Any], order: tuple[datetime, str], grants: ReferenceGrants) -> bool:
        return ((kept.route is route or kept.route == route) and kept.order == order
                and all(grants.in_namespace(ns) == was for ns, was in kept.grants))

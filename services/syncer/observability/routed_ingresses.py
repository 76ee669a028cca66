"""Which Ingresses the applied routes name, and which of them are orphaned (ingress-nginx's orphan_ingress: a route
whose Service is missing, or whose backend has no ready endpoint), kept up to date by each model's changes.

Found again from every route at every scrape, this held the syncer's event loop 3.7 s at 100,000 Ingresses; here a
model's TableChanges say which hosts and backends to look at again (all of them only when the model says any may
have changed: the first model, or one built afresh), so that the work of one change is that of its hosts.
"""
from __future__ import annotations

from collections import Counter
from typing import Iterable, Mapping

from services.syncer.model.types import HostRoutes, Model

# (Ingress "namespace/name", "no-service" or "no-endpoint")
Orphan = tuple[str, str]


class RoutedIngresses:
    """The Ingresses of the applied routes and their orphans, by the host whose routes name them."""

    def __init__(self) -> None:
        self.ingresses: Counter[str] = Counter()  # Ingress → routes that name it (present while above 0)
        self.orphans: Counter[Orphan] = Counter()  # orphan → routes that make it one
        self.orphans_ever: set[Orphan] = set()    # reported 0 once they are served again
        # Ingresses whose last route went since take_gone() (their request series go with them).
        self._gone: set[str] = set()
        self._hosts: dict[str, tuple[tuple[str, str | None], ...]] = {}  # host → its routes' (Ingress, backend)
        self._host_orphans: dict[str, tuple[Orphan, ...]] = {}
        self._hosts_of_backend: dict[str, set[str]] = {}
        self.hosts_looked_at = 0  # hosts whose routes were read again (a count of the work changes cost)

    def note(self, model: Model) -> None:
        """Bring these to `model`, looking only at the hosts and backends its `changed` names."""
        hosts, backends = model.changed.routes, model.changed.backends
        if hosts is None or backends is None:
            looked = set(self._hosts) | model.routes.keys()
        else:
            looked = set(hosts)
            for backend in backends:
                looked |= self._hosts_of_backend.get(backend, set())
        for host in looked:
            self._forget(host)
            host_routes = model.routes.get(host)
            if host_routes is not None:
                self._learn(host, host_routes, model.backends)
        self.hosts_looked_at += len(looked)

    def take_gone(self) -> set[str]:
        """The Ingresses no route names any longer, since the last call."""
        gone, self._gone = {ingress for ingress in self._gone if not self.ingresses[ingress]}, set()
        return gone

    def current_orphans(self) -> set[Orphan]:
        return set(self.orphans)

    def _forget(self, host: str) -> None:
        for ingress, backend in self._hosts.pop(host, ()):
            _decrement(self.ingresses, ingress, self._gone)
            if backend is not None:
                users = self._hosts_of_backend.get(backend)
                if users is not None:
                    users.discard(host)
                    if not users:
                        del self._hosts_of_backend[backend]
        for orphan in self._host_orphans.pop(host, ()):
            _decrement(self.orphans, orphan, None)

    def _learn(self, host: str, host_routes: HostRoutes, backends: Mapping[str, list[str]]) -> None:
        entries = tuple((route.ingress, route.backend) for route in _routes_of(host_routes) if route.ingress)
        orphans = []
        for ingress, backend in entries:
            self.ingresses[ingress] += 1
            if backend is None:
                orphans.append((ingress, "no-service"))
                continue
            self._hosts_of_backend.setdefault(backend, set()).add(host)
            if not backends.get(backend):
                orphans.append((ingress, "no-endpoint"))
        self.orphans.update(orphans)
        self.orphans_ever.update(orphans)
        self._hosts[host] = entries
        if orphans:
            self._host_orphans[host] = tuple(orphans)


def _routes_of(host_routes: HostRoutes) -> Iterable:
    yield from host_routes.exact.values()
    yield from host_routes.prefix.values()
    if host_routes.default is not None:
        yield host_routes.default


def _decrement(counts: Counter, key: object, emptied: set | None) -> None:
    counts[key] -= 1
    if counts[key] <= 0:
        del counts[key]
        if emptied is not None:
            emptied.add(key)

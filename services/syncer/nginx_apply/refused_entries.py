"""The table entries nginx's Lua refused (TablePusher.refused), as problems of the objects they came from.

nginx applies every other entry of a push; a refused key keeps its last good value there (or stays absent). So
the owner of that entry is told, as for anything else the syncer refuses: the Ingresses with routes on a refused
host or to a refused backend, the Secret of a refused certificate.
"""
from __future__ import annotations

from typing import Iterable, Mapping

from services.common.changed_keys import ChangedKeys
from services.syncer.model.problems import Problem
from services.syncer.model.types import HostRoutes, Route

KEPT = "nginx keeps what it served before for it, if anything"


class RefusedBackendUsers:
    """The Ingresses that route to each backend nginx refuses, by host. A backend newly refused costs one pass over
    every route; while it stays refused, each model's changed hosts only: found by a pass over every route at every
    apply, this cost a change O(hosts) for as long as any backend entry was refused."""

    def __init__(self) -> None:
        self._users: dict[str, dict[str, frozenset[str]]] = {}  # refused backend → host → Ingresses routing to it
        self.hosts_looked_at = 0  # hosts whose routes were read (a count of the work, for the tests)

    def of(self, backends: Iterable[str], routes: Mapping[str, HostRoutes],
           changed: ChangedKeys) -> dict[str, list[str]]:
        """Each of `backends` (those refused now) → the Ingresses whose routes name it, sorted. `changed`: the hosts
        whose routes may differ from the last call's `routes` (None: any)."""
        wanted = set(backends)
        for backend in self._users.keys() - wanted:
            del self._users[backend]
        new = wanted - self._users.keys()
        if changed is None:
            new = wanted
        else:
            self._look_at(wanted - new, ((host, routes.get(host)) for host in changed), len(changed))
        if new:
            for backend in new:
                self._users[backend] = {}
            self._look_at(new, routes.items(), len(routes))
        return {backend: sorted({ingress for ingresses in self._users[backend].values() for ingress in ingresses})
                for backend in wanted}

    def _look_at(self, backends: set[str], hosts: Iterable[tuple[str, HostRoutes | None]], count: int) -> None:
        if not backends:
            return
        self.hosts_looked_at += count
        for host, host_routes in hosts:
            found: dict[str, set[str]] = {backend: set() for backend in backends}
            for route in _routes_of(host_routes):
                for backend, ingress in _owners(route):
                    if backend in found and ingress:
                        found[backend].add(ingress)
            for backend, ingresses in found.items():
                if ingresses:
                    self._users[backend][host] = frozenset(ingresses)
                else:
                    self._users[backend].pop(host, None)


def refused_problems(refused: Mapping[str, Mapping[str, str]], routes: Mapping[str, HostRoutes],
                     backend_users: RefusedBackendUsers, changed: ChangedKeys = None) -> list[Problem]:
    """A problem per refused entry and object it came from, in the order of tables and keys. `backend_users`: kept
    from one call to the next; `changed`: the hosts whose routes may differ from the last call's (None: any)."""
    problems: list[Problem] = []
    for key, why in sorted(refused.get("routes", {}).items()):
        message = f"nginx refused the routes of host {key} ({why}); {KEPT}"
        problems += _for_ingresses(_ingresses(_routes_of(routes.get(key))), f"host {key}", message)
    backends = refused.get("backends", {})
    users = backend_users.of(backends, routes, changed)
    for key, why in sorted(backends.items()):
        message = f"nginx refused the endpoints of backend {key} ({why}); {KEPT}"
        problems += _for_ingresses(users[key], f"backend {key}", message)
    for key, why in sorted(refused.get("certificates", {}).items()):
        kind, _, name = key.partition("/")
        obj = {"certs": f"Secret {name}", "hosts": f"TLS host {name}"}.get(kind, "--default-ssl-certificate")
        problems.append(Problem.error(obj, f"nginx refused it ({why}); {KEPT}"))
    return problems


def _for_ingresses(ingresses: list[str], fallback: str, message: str) -> list[Problem]:
    return [Problem.error(f"Ingress {ref}", message) for ref in ingresses] or [Problem.error(fallback, message)]


def _routes_of(host_routes: HostRoutes | None) -> Iterable[Route]:
    if host_routes is None:
        return ()
    default = (host_routes.default,) if host_routes.default is not None else ()
    return (*host_routes.exact.values(), *host_routes.prefix.values(), *default)


def _owners(route: Route) -> Iterable[tuple[str | None, str]]:
    """(backend, Ingress) pairs of a route: its own and its canary's."""
    yield route.backend, route.ingress
    if route.canary is not None:
        yield route.canary.backend, route.canary.ingress


def _ingresses(routes: Iterable[Route]) -> list[str]:
    return sorted({ingress for route in routes for _, ingress in _owners(route) if ingress})

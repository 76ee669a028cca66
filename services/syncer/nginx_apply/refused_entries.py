"""The table entries nginx's Lua refused (TablePusher.refused), as problems of the objects they came from.

nginx applies every other entry of a push; a refused key keeps its last good value there (or stays absent). So
the owner of that entry is told, as for anything else the syncer refuses: the Ingresses with routes on a refused
host or to a refused backend, the Secret of a refused certificate.
"""
from __future__ import annotations

from typing import Iterable, Mapping

from services.syncer.model.problems import Problem
from services.syncer.model.types import HostRoutes, Route

KEPT = "nginx keeps what it served before for it, if anything"


def refused_problems(refused: Mapping[str, Mapping[str, str]], routes: Mapping[str, HostRoutes]) -> list[Problem]:
    """A problem per refused entry and object it came from, in the order of tables and keys."""
    problems: list[Problem] = []
    for key, why in sorted(refused.get("routes", {}).items()):
        message = f"nginx refused the routes of host {key} ({why}); {KEPT}"
        problems += _for_ingresses(_ingresses(_routes_of(routes.get(key))), f"host {key}", message)
    backends = refused.get("backends", {})
    if backends:
        by_backend = _ingresses_by_backend(routes)
        for key, why in sorted(backends.items()):
            message = f"nginx refused the endpoints of backend {key} ({why}); {KEPT}"
            problems += _for_ingresses(sorted(by_backend.get(key, ())), f"backend {key}", message)
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


def _ingresses_by_backend(routes: Mapping[str, HostRoutes]) -> dict[str, set[str]]:
    """Backend name → the Ingresses routing to it (visited only when nginx refused a backend)."""
    found: dict[str, set[str]] = {}
    for host_routes in routes.values():
        for route in _routes_of(host_routes):
            for backend, ingress in _owners(route):
                if backend and ingress:
                    found.setdefault(backend, set()).add(ingress)
    return found

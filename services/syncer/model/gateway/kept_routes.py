"""What one build of the Gateway API part keeps for the next, so that a changed route costs work for the routes that
share its host names only (build.py).

Each route's record holds its plan, its attachments and what the tables made of it (its warnings, backends,
profiles, files); the records are indexed by the host names they are attached with, and the hosts by the wildcards
that cover them. When only routes changed, a host's entry can change only if a changed route was or is attached
with that host, with a wildcard covering it, or with any host ("_"): those hosts are made again, from the routes
attached with them or with the layers under them (tables.py), and every other host's entry, every other route's
record, is kept. Whatever else changed (a Gateway, a ReferenceGrant, a Service or Secret read, an Ingress taking a
host), the part is made whole, which fills these anew.

`work` counts what the builds did (routes attached, routes and hosts given to the tables), so that tests can count
the work per change rather than time it.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, Hashable, Iterable, Mapping, TypeVar

from services.nginxconf.config import LocationProfile

from ..backends import ResolvedBackend, ServiceRef
from ..problems import Problem
from ..types import CATCH_ALL_HOST
from .attachment import Attachment
from .httproutes import RoutePlan
from .listeners import Listener
from .objects import GatewayObjects
from .reference_grants import ReferenceGrants
from .route_plans import RoutePlans
from .tables import TablesKept
from .tlsroutes import TlsPassthrough, TlsRoutePlan

RouteKey = tuple[str, str, str]  # (kind, namespace, name)
ROUTE_KINDS = ("HTTPRoute", "GRPCRoute", "TLSRoute")  # in the order a build takes them
Rank = tuple[int, tuple[datetime, str]]  # the kind's place in ROUTE_KINDS, then creation order

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


@dataclass
class Frame:
    """What every route is attached and tabled against; made again only in a whole build."""
    objects: GatewayObjects
    grants: ReferenceGrants
    listeners: list[Listener]
    our_gateways: frozenset[str]
    problems: list[Problem]  # the Gateways' and listeners'


@dataclass(slots=True)
class RouteRecord:
    key: RouteKey
    rank: Rank
    plan: RoutePlan | None  # None: rejected
    tls_plan: TlsRoutePlan | None  # a TLSRoute's
    problems: list[Problem]  # its rejection, or why it did not attach, and its plan's warnings
    attachments: list[Attachment]
    table_problems: list[Problem] = field(default_factory=list)
    backends: dict[str, list[str]] = field(default_factory=dict)
    profiles: dict[str, LocationProfile] = field(default_factory=dict)
    ssl_files: dict[str, bytes] = field(default_factory=dict)
    resolved: dict[ServiceRef, ResolvedBackend] = field(default_factory=dict)

    @property
    def ref(self) -> str:
        """"Kind namespace/name", as problems name it."""
        return f"{self.key[0]} {self.key[1]}/{self.key[2]}"

    @property
    def hosts(self) -> set[str]:
        """The host names its rules are tabled for (TLSRoutes' go to the passthrough proxy instead)."""
        if self.key[0] == "TLSRoute":
            return set()
        return {host for attachment in self.attachments for host in attachment.hosts}


class _Counted(Generic[K, V]):
    """A union of the routes' mappings that forgets a key when no route gives it any more."""

    def __init__(self) -> None:
        self.values: dict[K, V] = {}
        self._counts: dict[K, int] = {}

    def add(self, items: Mapping[K, V]) -> None:
        for key, value in items.items():
            self._counts[key] = self._counts.get(key, 0) + 1
            self.values[key] = value

    def remove(self, items: Iterable[K]) -> None:
        for key in items:
            count = self._counts[key] - 1
            if count:
                self._counts[key] = count
            else:
                del self._counts[key], self.values[key]


@dataclass
class Work:
    """What the builds did, counted (not timed)."""
    attached: int = 0  # routes planned (or kept planned) and attached
    routes_tabled: int = 0  # routes given to the tables
    hosts_tabled: int = 0  # hosts whose entries were made again or checked


def label_suffixes(host: str) -> list[str]:
    """"a.b.example.com" → ["b.example.com", "example.com", "com"]; a wildcard's start the same way after "*"."""
    labels = host.split(".")
    return [".".join(labels[i:]) for i in range(1, len(labels))]


class GatewayKept:
    """The kept route plans (route_plans.py), tables (tables.py) and route records of the last build."""

    def __init__(self) -> None:
        self.plans = RoutePlans()
        self.tables = TablesKept()
        self.work = Work()
        self.frame: Frame | None = None
        self._clear()

    def _clear(self) -> None:
        self.records: dict[RouteKey, RouteRecord] = {}
        self._order: list[tuple[Rank, RouteKey]] = []  # every record's, sorted
        self._noted: set[RouteKey] = set()  # the records with problems
        self._tls: set[RouteKey] = set()  # the TLSRoutes' records
        self._by_host: dict[str, set[RouteKey]] = {}  # a host → the routes attached with it
        self._covered: dict[str, set[str]] = {}  # "example.com" → the hosts of _by_host ending in ".example.com"
        self.routes: dict[str, dict[str, Any]] = {}  # host → its Gateway rules (the tables' JSON)
        self.tls_secrets: dict[str, str] = {}
        self.backends: _Counted[str, list[str]] = _Counted()
        self.profiles: _Counted[str, LocationProfile] = _Counted()
        self.ssl_files: _Counted[str, bytes] = _Counted()
        self.resolved: _Counted[ServiceRef, ResolvedBackend] = _Counted()
        self.passthrough = TlsPassthrough()

    def start_whole(self, frame: Frame | None) -> None:
        """Forget the records (the plans and tables are kept: each checks what it was made from)."""
        self._clear()
        self.frame = frame

    # --- records ------------------------------------------------------------------------------------

    def forget(self, key: RouteKey) -> set[str]:
        """Drop a route's record; the hosts it was tabled for."""
        record = self.records.pop(key, None)
        if record is None:
            return set()
        del self._order[bisect.bisect_left(self._order, (record.rank, key))]
        self._noted.discard(key)
        self._tls.discard(key)
        self.drop_outputs(record)
        hosts = record.hosts
        for host in hosts:
            members = self._by_host[host]
            members.discard(key)
            if not members:
                del self._by_host[host]
                for suffix in label_suffixes(host):
                    covered = self._covered[suffix]
                    covered.discard(host)
                    if not covered:
                        del self._covered[suffix]
        return hosts

    def add(self, record: RouteRecord) -> set[str]:
        """Keep a route's record (its outputs come from the tables: set_outputs); the hosts it is tabled for."""
        key = record.key
        self.records[key] = record
        bisect.insort(self._order, (record.rank, key))
        if record.problems:
            self._noted.add(key)
        if key[0] == "TLSRoute":
            self._tls.add(key)
        hosts = record.hosts
        for host in hosts:
            if host not in self._by_host:
                self._by_host[host] = set()
                for suffix in label_suffixes(host):
                    self._covered.setdefault(suffix, set()).add(host)
            self._by_host[host].add(key)
        return hosts

    def drop_outputs(self, record: RouteRecord) -> None:
        self.backends.remove(record.backends)
        self.profiles.remove(record.profiles)
        self.ssl_files.remove(record.ssl_files)
        self.resolved.remove(record.resolved)
        record.table_problems, record.backends, record.profiles, record.ssl_files, record.resolved = [], {}, {}, {}, {}
        if not record.problems:
            self._noted.discard(record.key)

    def set_outputs(self, record: RouteRecord, *, table_problems: list[Problem], backends: dict[str, list[str]],
                    profiles: dict[str, LocationProfile], ssl_files: dict[str, bytes],
                    resolved: dict[ServiceRef, ResolvedBackend]) -> None:
        """What the tables made of a kept record (after drop_outputs)."""
        record.table_problems, record.backends, record.profiles = table_problems, backends, profiles
        record.ssl_files, record.resolved = ssl_files, resolved
        self.backends.add(backends)
        self.profiles.add(profiles)
        self.ssl_files.add(ssl_files)
        self.resolved.add(resolved)
        if table_problems:
            self._noted.add(record.key)

    # --- what a change reaches ----------------------------------------------------------------------

    def tabled_hosts(self) -> set[str]:
        return set(self._by_host)

    def hosts_reached(self, changed: Iterable[str]) -> set[str] | None:
        """The hosts whose entries a change of the routes tabled for `changed` hosts can change, with the hosts of
        the layers under them (a wildcard covering them, "_"), which their entries are made from; None: every
        host (a route for any host changed)."""
        reached: set[str] = set()
        if not changed:
            return reached
        for host in changed:
            if host == CATCH_ALL_HOST:
                return None
            reached.add(host)
            if host.startswith("*."):
                reached |= self._covered.get(host[2:], set())
        layers: set[str] = set()
        for host in reached:
            layers.update(wildcard for suffix in label_suffixes(host)
                          if (wildcard := f"*.{suffix}") in self._by_host)
        if CATCH_ALL_HOST in self._by_host:
            layers.add(CATCH_ALL_HOST)
        return reached | layers

    def routes_of(self, hosts: Iterable[str]) -> list[RouteRecord]:
        """The records tabled for any of `hosts`, oldest first (as a whole build takes them)."""
        keys = set().union(*(self._by_host.get(host, set()) for host in hosts))
        return sorted((self.records[key] for key in keys), key=lambda record: (record.rank, record.key))

    def tabled_routes(self) -> list[RouteRecord]:
        """Every record tabled for some host, oldest first."""
        return [self.records[key] for _, key in self._order if self.records[key].hosts]

    def tls_routes(self) -> list[RouteRecord]:
        """The TLSRoutes' records, oldest first."""
        return sorted((self.records[key] for key in self._tls), key=lambda record: (record.rank, record.key))

    def problems(self) -> list[Problem]:
        """The Gateways' problems, then each route's (its own, then its tables'), oldest route first."""
        found = list(self.frame.problems) if self.frame is not None else []
        for key in sorted(self._noted, key=lambda key: (self.records[key].rank, key)):
            found += self.records[key].problems + self.records[key].table_problems
        return found

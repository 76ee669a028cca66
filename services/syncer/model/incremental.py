"""The Model kept up to date object by object: a change rebuilds only what depends on it.

build.build_model() builds the whole Model from the store: at 10,000 Ingresses half a second for any
change. IncrementalModel gives the same Model (tests/unit/syncer/test_incremental.py checks it after every
step of random change sequences) by keeping:
- each of our Ingresses' plan (build.plan_one), remade when the Ingress changes or when a Secret or
  ConfigMap it read (auth-secret, proxy-ssl-secret, auth-tls-secret, auth-proxy-set-headers, custom-headers)
  changes;
- groups of plans that share host names (build.plan_names): Ingresses that share none cannot change each
  other's routes, so each group is merged on its own (build.merge_plans), and merged again only when one of
  its plans changes or a Service, EndpointSlice or TLS Secret the merge read changes.
What every read of the store goes through records the keys read, so these dependencies are exact. What
depends on the whole cluster (the controller ConfigMap, IngressClasses, nginx's refused profiles) starts
everything afresh when it changes; build.assemble_model() then joins the groups, each time. The routes table
(Ingress routes with the Gateway rules laid over them) is kept too, made again for the hosts a change touched, each
model taking a snapshot of it (layered.py): copied whole, it cost each change 10-20 ms at 100,000 hosts. The Gateway API part
(model/gateway/) is kept whole while nothing it read changes: the Gateway API objects and Namespaces (kept apart
here, sorted by kind as they change: a scan of the store for them took 9 ms at 10,000 Ingresses), the Services, EndpointSlices and Secrets it
resolved, and the owners of the hosts it asked about (Ingress hosts). When only EndpointSlices it read change, only
its backends' endpoints are resolved again; else it is built again, each route's plan kept while its route and
grants are unchanged (gateway/route_plans.py), each rule's action and host entry while what made it is
(gateway/tables.py): 1.7 s at 10,000 HTTPRoutes for any change, when all is made afresh. When only routes changed,
it is built from the last one with the changed keys: only the routes sharing their host names are tabled again
(gateway/kept_routes.py).
"""
from __future__ import annotations

import sys
from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Callable, Iterable

from services.common import changed_keys
from services.common.changed_keys import ChangedKeys
from services.common.gc_pause import collector_paused, freeze_survivors
from services.common.settings import Settings

from .backends import SERVICE_NAME_LABEL, BackendResolver, ResolvedBackend, ServiceRef
from .build import (AnnotationParser, IngressOwners, IngressPlan, Merged, annotation_parser, assemble_model,
                    auth_resolver, creation_order, files_named, merge_plans, plan_names, plan_one)
from .configmap import ControllerConfig, load_controller_config
from .gateway import GatewayKept, GatewayModel, GatewayObjects, build_gateway, is_gateway_input
from .gateway.build import joined_entries
from .gateway.kept_routes import Work
from .gateway.objects import GATEWAY_KINDS
from .ingress_class import IngressClassFilter
from .kept_tables import KeptTables
from .problems import Problem
from .shared_strings import share_strings
from .tls import TlsSecrets
from .layered import Layered
from .types import HostRoutes, Model, TableChanges

# The kinds whose changes are followed object by object; any other kind (IngressClass) starts afresh.
_FOLLOWED = frozenset({"Ingress", "Service", "EndpointSlice", "Secret", "ConfigMap", "Namespace", *GATEWAY_KINDS})


_SLICES_OF = "EndpointSlices of/"


def _slices_of(namespace: str, service: str) -> str:
    """The dependency on the EndpointSlices of one Service."""
    return f"{_SLICES_OF}{namespace}/{service}"


class _Recording(Mapping):
    """A read-only view of `mapping` that adds each key looked up (as `name(key)`) to `reads`."""

    def __init__(self, mapping: Mapping, reads: set[str], name: Callable[[Any], str]) -> None:
        self._mapping, self._reads, self._name = mapping, reads, name

    def __getitem__(self, key: Any) -> Any:
        self._reads.add(self._name(key))
        return self._mapping[key]

    def get(self, key: Any, default: Any = None) -> Any:
        self._reads.add(self._name(key))
        return self._mapping.get(key, default)

    def __contains__(self, key: object) -> bool:
        self._reads.add(self._name(key))
        return key in self._mapping

    def __iter__(self) -> Iterator:
        raise TypeError("a recorded mapping cannot be listed: its dependencies would be every key")

    def __len__(self) -> int:
        return len(self._mapping)


def _kind_key(kind: str) -> Callable[[tuple[str, str]], str]:
    return lambda key: f"{kind}/{key[0]}/{key[1]}"


class _LoggedResolver(BackendResolver):
    """A BackendResolver that keeps what it found for each Service reference it resolved."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.resolved: dict[ServiceRef, ResolvedBackend] = {}

    def resolve(self, ref: ServiceRef) -> ResolvedBackend:
        found = self.resolved[ref] = super().resolve(ref)
        return found


@dataclass
class _GatewayPart:
    """The Gateway API part of the last model, and what building it read."""
    model: GatewayModel
    reads: set[str]  # store keys, and EndpointSlices of a Service
    hosts: set[str]  # the hosts whose Ingress owner it asked about
    resolved: dict[ServiceRef, ResolvedBackend]


class _SlicesByService(Mapping):
    """(namespace, service) → the EndpointSlices of that Service, as BackendResolver reads them."""

    def __init__(self, slices: dict[tuple[str, str], tuple[dict[str, Any], ...]]) -> None:
        self._slices = slices

    def __getitem__(self, key: tuple[str, str]) -> Any:
        return self._slices[key]

    def __iter__(self) -> Iterator:
        return iter(self._slices)

    def __len__(self) -> int:
        return len(self._slices)


# What is kept per Ingress and per group is kept small (slots, tuples): at 10,000 Ingresses each byte saved per
# entry is 10 kB, and a set or dict of one member costs 216 or 232 bytes where a tuple of one costs 48.

# What a plan keeps of its resolver's files when it has none: two empty dicts a plan took 12 MiB at 100,000 Ingresses.
_NO_FILES: Mapping[str, bytes] = MappingProxyType({})


@dataclass(slots=True)
class _PlanEntry:
    order: tuple[Any, str]  # model.creation_order: oldest first
    plan: IngressPlan | None  # None: rejected (its problems say why)
    problems: list[Problem]
    reads: tuple[str, ...]  # the store keys planning read
    auth_files: Mapping[str, bytes] = field(repr=False)  # _NO_FILES when none (most plans)
    ssl_files: Mapping[str, bytes] = field(repr=False)
    names: tuple[str, ...] = ()  # build.plan_names, when planned


class _PlanFiles:
    """The files the plans need (htpasswd, proxy-ssl: name → content) with how many plans need each, and the names
    touched since taken: kept as plans come and go, so that a model does not gather them from every plan that has
    one (10,000 at 10,000 Ingresses with basic auth)."""

    def __init__(self) -> None:
        self.auth: dict[str, bytes] = {}
        self.ssl: dict[str, bytes] = {}
        self._users: dict[tuple[int, str], int] = {}  # (table, name) → plans needing it
        self._touched: set[str] = set()

    def add(self, entry: _PlanEntry) -> None:
        for index, (table, files) in enumerate(((self.auth, entry.auth_files), (self.ssl, entry.ssl_files))):
            for name, content in files.items():
                table[name] = content
                self._users[index, name] = self._users.get((index, name), 0) + 1
                self._touched.add(name)

    def remove(self, entry: _PlanEntry) -> None:
        for index, (table, files) in enumerate(((self.auth, entry.auth_files), (self.ssl, entry.ssl_files))):
            for name in files:
                users = self._users.pop((index, name)) - 1
                if users:
                    self._users[index, name] = users
                else:
                    del table[name]
                self._touched.add(name)

    def take_touched(self) -> frozenset[str]:
        touched = frozenset(self._touched)
        self._touched.clear()
        return touched


@dataclass(frozen=True, slots=True)
class _GroupMerge:
    """A group's Merged as tuples of (name, value) pairs: most groups are one Ingress, with one host, one backend
    and one profile, and most of Merged's tables are empty."""
    routes: tuple[tuple[str, Any], ...]
    backends: tuple[tuple[str, list[str]], ...]
    passthrough: tuple[tuple[str, list[str]], ...]
    profiles: tuple[tuple[str, Any], ...]
    tls_secrets: tuple[tuple[str, str], ...]
    snippet_servers: tuple[tuple[str, str], ...]
    problems: tuple[Problem, ...]

    @classmethod
    def of(cls, merged: Merged) -> "_GroupMerge":
        return cls(routes=tuple(merged.routes.items()), backends=tuple(merged.backends.items()),
                   passthrough=tuple(merged.passthrough.items()), profiles=tuple(merged.profiles.items()),
                   tls_secrets=tuple(merged.tls_secrets.items()), snippet_servers=tuple(merged.snippet_servers),
                   problems=tuple(merged.problems))


@dataclass(slots=True)
class _Group:
    keys: tuple[str, ...]  # the store keys of its Ingresses
    merged: _GroupMerge
    reads: tuple[str, ...]  # the store keys (and EndpointSlices of a Service) merging read


class _Several(set):
    """Two or more members of one key of a _Dependents."""


class _Dependents:
    """key → what depends on it (Ingress keys, group numbers). Most keys have one dependent, kept as it is; a set
    only from two on."""

    def __init__(self) -> None:
        self._of: dict[str, Any] = {}

    def add(self, key: str, member: Any) -> None:
        current = self._of.get(key)
        if current is None:
            self._of[key] = member
        elif isinstance(current, _Several):
            current.add(member)
        elif current != member:
            self._of[key] = _Several((current, member))

    def discard(self, key: str, member: Any) -> None:
        current = self._of.get(key)
        if isinstance(current, _Several):
            current.discard(member)
            if len(current) == 1:
                self._of[key] = next(iter(current))
        elif current is not None and current == member:
            del self._of[key]

    def of(self, key: str) -> Iterable[Any]:
        current = self._of.get(key)
        if current is None:
            return ()
        return current if isinstance(current, _Several) else (current,)


class _Totals:
    """The groups' merges joined, kept as groups come and go. Hosts belong to one group; a backend or a
    profile can belong to several (the same Service or settings), which all hold the same value."""

    def __init__(self) -> None:
        self.merged = Merged(routes={}, backends={}, passthrough={}, profiles={}, tls_secrets={},
                             snippet_servers=[], problems=[])
        self._snippets: dict[str, tuple[str, str]] = {}
        self._users: dict[tuple[str, str], int] = {}  # ("backend" or "profile", name) → groups holding it
        # The hosts and backends whose entries were added or removed since take_touched().
        self._touched_routes: set[str] = set()
        self._touched_backends: set[str] = set()
        # The passthrough hosts, and the files named by profiles, added or removed since take_side_touched().
        self._touched_passthrough: set[str] = set()
        self._touched_files: set[str] = set()

    def add(self, group: _GroupMerge) -> None:
        total = self.merged
        total.routes.update(group.routes)
        self._touch(group)
        total.passthrough.update(group.passthrough)
        total.tls_secrets.update(group.tls_secrets)
        self._snippets.update((server[0], server) for server in group.snippet_servers)
        for kind, table, mine in (("backend", total.backends, group.backends),
                                  ("profile", total.profiles, group.profiles)):
            table.update(mine)  # type: ignore[arg-type]  # each table with its own group's entries
            for name, _ in mine:
                self._users[kind, name] = self._users.get((kind, name), 0) + 1

    def remove(self, group: _GroupMerge) -> None:
        total = self.merged
        self._touch(group)
        tables: tuple[tuple[dict[str, Any], tuple[tuple[str, Any], ...]], ...] = (
            (total.routes, group.routes), (total.passthrough, group.passthrough),
            (total.tls_secrets, group.tls_secrets))
        for table, mine in tables:
            for key, _ in mine:
                del table[key]
        for host, _ in group.snippet_servers:
            del self._snippets[host]
        for kind, table, mine in (("backend", total.backends, group.backends),
                                  ("profile", total.profiles, group.profiles)):
            for name, _ in mine:
                self._users[kind, name] -= 1
                if not self._users[kind, name]:
                    del self._users[kind, name], table[name]

    def _touch(self, group: _GroupMerge) -> None:
        self._touched_routes.update(host for host, _ in group.routes)
        self._touched_backends.update(name for name, _ in group.backends)
        self._touched_passthrough.update(host for host, _ in group.passthrough)
        for _, profile in group.profiles:
            self._touched_files.update(files_named(profile))

    def take_touched(self) -> tuple[frozenset[str], frozenset[str]]:
        """The hosts and backends touched since the last call: (routes, backends)."""
        touched = frozenset(self._touched_routes), frozenset(self._touched_backends)
        self._touched_routes.clear()
        self._touched_backends.clear()
        return touched

    def take_side_touched(self) -> tuple[frozenset[str], frozenset[str]]:
        """The passthrough hosts, and the files named by the profiles, touched since the last call."""
        touched = frozenset(self._touched_passthrough), frozenset(self._touched_files)
        self._touched_passthrough.clear()
        self._touched_files.clear()
        return touched

    def joined(self, problems: list[Problem]) -> Merged:
        return Merged(routes=self.merged.routes, backends=self.merged.backends, passthrough=self.merged.passthrough,
                      profiles=self.merged.profiles, tls_secrets=self.merged.tls_secrets,
                      snippet_servers=list(self._snippets.values()), problems=problems)


@dataclass(frozen=True)
class SideChanges:
    """What may differ beside the tables TableChanges names, since the changes were last taken: the passthrough
    table's hosts, the htpasswd files and the proxy-ssl files by name. None: any (a model built afresh)."""
    passthrough: ChangedKeys = None
    auth_files: ChangedKeys = None
    ssl_files: ChangedKeys = None

    def then(self, later: SideChanges) -> SideChanges:
        """These changes and then `later`'s."""
        return SideChanges(changed_keys.union(self.passthrough, later.passthrough),
                           changed_keys.union(self.auth_files, later.auth_files),
                           changed_keys.union(self.ssl_files, later.ssl_files))


NO_SIDE_CHANGES = SideChanges(frozenset(), frozenset(), frozenset())
ANY_SIDE_CHANGES = SideChanges()


@dataclass(frozen=True)
class ProblemChanges:
    """How the problems of the last model differ from those of the model before the changes were last taken: the
    plans' and groups' problems added and removed (None: start from the model's whole list, built afresh), and the
    others (the ConfigMap's, the Gateway API's, the default backend's...: few), whole."""
    added: tuple[Problem, ...] | None
    removed: tuple[Problem, ...]
    others: tuple[Problem, ...]
    built: int  # how many problems the model had as built (more may be added to its list after: nginx's refusals)

    def then(self, later: ProblemChanges) -> ProblemChanges:
        """These changes and then `later`'s."""
        if self.added is None or later.added is None:
            return replace(later, added=None, removed=())
        return replace(later, added=self.added + later.added, removed=self.removed + later.removed)


ANY_PROBLEMS = ProblemChanges(added=None, removed=(), others=(), built=0)
NO_PROBLEMS = ProblemChanges(added=(), removed=(), others=(), built=0)
_PLAN, _GROUP, _OTHER = 1, 2, 3  # where a problem comes among those of its object


class _KeptProblems:
    """The plans' and groups' problems sorted by object (an Ingress's plan's, then its group's, each in the order
    found, as build_model sorts them), kept as plans and groups come and go, with those added and removed since
    taken: each model gathered them from every plan and group that had any and sorted them all (10,000 at 10,000
    rejected Ingresses), and the syncer counted and formatted them all again."""

    def __init__(self) -> None:
        self.problems: list[Problem] = []
        self._keys: list[tuple[str, int]] = []  # (object, _PLAN or _GROUP) of each
        self.bulk = True  # built afresh: sorted once at the end (rebuild), not problem by problem
        self.added: list[Problem] = []
        self.removed: list[Problem] = []
        self.others: tuple[Problem, ...] = ()  # those placed among them in the last model
        self.built = 0

    def add(self, problems: Iterable[Problem], rank: int) -> None:
        if self.bulk:
            return
        for problem in problems:
            at = bisect_right(self._keys, (problem.object, rank))
            self._keys.insert(at, (problem.object, rank))
            self.problems.insert(at, problem)
            self.added.append(problem)

    def remove(self, problems: Iterable[Problem], rank: int) -> None:
        if self.bulk:
            return
        for problem in problems:
            at = bisect_left(self._keys, (problem.object, rank))
            while self.problems[at] is not problem:  # the object's other problems: a few
                at += 1
            del self._keys[at], self.problems[at]
            self.removed.append(problem)

    def rebuild(self, plans: Iterable[Iterable[Problem]], groups: Iterable[Iterable[Problem]]) -> None:
        keyed = [((problem.object, rank), problem) for rank, sources in ((_PLAN, plans), (_GROUP, groups))
                 for source in sources for problem in source]
        keyed.sort(key=lambda pair: pair[0])  # stable: each object's in the order found
        self._keys, self.problems = [key for key, _ in keyed], [problem for _, problem in keyed]
        self.bulk = False

    def placed(self, others: list[Problem]) -> list[Problem]:
        """All the model's problems sorted by object: `others` (in the order found) placed among the kept ones,
        after those of the same object, by bisection: the kept ones are copied, not sorted again."""
        self.others = tuple(others)
        placed: list[Problem] = []
        start = 0
        for problem in sorted(others, key=lambda problem: problem.object):
            at = bisect_left(self._keys, (problem.object, _OTHER))
            placed += self.problems[start:at]
            placed.append(problem)
            start = at
        placed += self.problems[start:]
        self.built = len(placed)
        return placed


@dataclass
class _Cluster:
    """What holds for the whole cluster: when any input of it changes, everything is built afresh."""
    config: ControllerConfig
    problems: list[Problem]
    reads: set[str]  # the store keys the controller ConfigMap's reading looked at
    parser: AnnotationParser
    accept: IngressClassFilter
    refused_profiles: dict[str, str]
    previous_configmap: dict[str, str]


class IncrementalModel:
    """build_model's result, kept up to date with the changed store keys since the last update."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        # Kept even afresh: a plan reads only its route and ReferenceGrants, each action and host entry is checked
        # before it is kept, and the routes' records are made again in a whole build.
        self._gateway_kept = GatewayKept()
        self.gateway_builds = 0  # how many times the Gateway API part was built (not kept)
        # Hosts whose joined entry (Ingress routes and Gateway rules) was made, and whose Gateway rules were compared
        # with the last model's, since this model was created: a change's share is what it touched.
        self.hosts_joined = 0
        self.gateway_hosts_compared = 0
        self._side_changes = SideChanges()  # since take_side_changes()
        self._problems_afresh = True  # since take_problem_changes()
        self._clear()

    def _clear(self) -> None:
        self._cluster: _Cluster | None = None
        self._store: dict[str, dict[str, Any]] = {}
        self._services: dict[tuple[str, str], dict[str, Any]] = {}
        self._secrets: dict[tuple[str, str], dict[str, Any]] = {}
        # A tuple per Service: a dict of its one slice took 20 MiB more at 100,000 Services.
        self._slices: dict[tuple[str, str], tuple[dict[str, Any], ...]] = {}
        # The Gateway API objects and Namespaces, so that each model's Gateway part does not scan the whole store.
        self._gateway_inputs: dict[str, dict[str, Any]] = {}
        self._gateway_objects = GatewayObjects()  # the same, sorted by kind
        # The Ingresses' routes with the Gateway rules laid over them, made again host by host as they change: each
        # model's routes (layered.py).
        self._joined: Layered[str, HostRoutes] = Layered()
        # The last model's backends, TLS hosts and certificates, changed at the keys a change touches (kept_tables.py).
        self.kept = KeptTables()
        self._plans: dict[str, _PlanEntry] = {}
        self._plans_reading = _Dependents()  # store key → plans whose planning read it
        self._by_name = _Dependents()  # host name → planned Ingresses naming it
        self._groups: dict[int, _Group] = {}
        self._group_of: dict[str, int] = {}  # Ingress key → its group
        self._groups_reading = _Dependents()  # store key → groups whose merge read it
        self._next_group = 0
        self._totals = _Totals()
        self._files = _PlanFiles()
        # The few plans and groups with problems, so that a build afresh does not visit every one, and their problems.
        self._noted_plans: set[str] = set()
        self._noted_groups: set[int] = set()
        self._problems = _KeptProblems()
        self._beside_routes: frozenset[str] = frozenset()  # the last model's TableChanges.beside_routes
        self._gateway: _GatewayPart | None = None  # the last model's
        self._gateway_stale = True  # to be built again
        self._gateway_slices: set[str] = set()  # EndpointSlices of a Service it read that changed since
        # The Gateway API keys changed since it was built, when nothing else it read did (None: built whole).
        self._gateway_changed: set[str] | None = None

    def update(self, store: Mapping[str, dict[str, Any]], changed: Iterable[str] | None, *,
               refused_profiles: Mapping[str, str] | None = None,
               previous_configmap: Mapping[str, str] | None = None) -> Model:
        """The Model of `store`, which differs from the last update's only at the keys `changed` (None: at
        any key, such as after a new snapshot)."""
        refused, previous = dict(refused_profiles or {}), dict(previous_configmap or {})
        changed = set(changed) if changed is not None else None
        cluster = self._cluster
        with collector_paused():  # services/common/gc_pause.py
            # A change to most of the store (a first scan that caught only some files) is cheaper built afresh: 0.7 s
            # at 10,000 Ingresses, against 1.1 s following 28,000 changes one by one.
            afresh = (changed is None or cluster is None or cluster.refused_profiles != refused
                      or cluster.previous_configmap != previous or len(changed) > len(store) // 2
                      or any(key in cluster.reads or key.split("/", 1)[0] not in _FOLLOWED for key in changed))
            if afresh:
                self._start_afresh(store, refused, previous)
            else:
                assert changed is not None  # not afresh
                self._follow(store, changed)
            model = self._assemble(store, afresh)
            if afresh:
                # Frozen before the collector is back on, the model too: its first collection would otherwise go
                # through everything a build from scratch allocated.
                freeze_survivors()
            return model

    # --- from scratch -------------------------------------------------------------------------------

    def _start_afresh(self, store: Mapping[str, dict[str, Any]], refused: dict[str, str],
                      previous: dict[str, str]) -> None:
        self._clear()
        reads: set[str] = set()
        config, problems = load_controller_config(_Recording(store, reads, str), self.settings.ingress.configmap,
                                                  previous)
        classes = [obj for key, obj in store.items() if key.startswith("IngressClass/")]
        self._cluster = _Cluster(config=config, problems=problems, reads=reads,
                                 parser=annotation_parser(config, self.settings),
                                 accept=IngressClassFilter.from_classes(classes, self.settings),
                                 refused_profiles=refused, previous_configmap=previous)
        ingresses = []
        for key, obj in store.items():
            self._index(key, None, obj)
            if key.startswith("Ingress/"):
                ingresses.append(key)
        self._store = dict(store)
        for key in ingresses:
            self._replan(key)
        self._regroup(set(self._plans))
        self._problems.rebuild((self._plans[key].problems for key in self._noted_plans),
                               (self._groups[group].merged.problems for group in self._noted_groups))
        self._problems_afresh = True

    # --- one change at a time -----------------------------------------------------------------------

    def _follow(self, store: Mapping[str, dict[str, Any]], changed: set[str]) -> None:
        replan: set[str] = set()
        stale_groups: set[int] = set()
        for key in changed:
            old, new = self._store.get(key), store.get(key)
            if new is None:
                self._store.pop(key, None)
            else:
                self._store[key] = new
            dependencies = self._index(key, old, new)
            for dependency in dependencies:
                replan.update(self._plans_reading.of(dependency))
                stale_groups.update(self._groups_reading.of(dependency))
            self._gateway_follows(key, dependencies)
            if key.startswith("Ingress/"):
                replan.add(key)
        for key in replan:
            if key in self._group_of:
                stale_groups.add(self._group_of[key])
            self._replan(key)
        touched = set(replan)
        for group in stale_groups:
            touched |= self._drop_group(group)
        self._regroup({key for key in touched if key in self._plans})

    def _gateway_follows(self, key: str, dependencies: set[str]) -> None:
        """Forget the Gateway part if `key` changes what it read; note the EndpointSlices that change only its
        endpoints."""
        part = self._gateway
        if part is None:
            return
        if is_gateway_input(key):
            self._gateway_stale = True
            if self._gateway_changed is not None:
                self._gateway_changed.add(key)
            return
        for dependency in dependencies & part.reads:
            if dependency.startswith(_SLICES_OF):
                self._gateway_slices.add(dependency)
            else:
                self._gateway_stale, self._gateway_changed = True, None

    def _index(self, key: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> set[str]:
        """Keep the by-kind indexes of `key`; returns what depends on it (store keys, EndpointSlices of a
        Service)."""
        if new is not None:
            share_strings(new)
        # Shared too: the by-kind indexes keep the namespace and name of every Service, Secret and EndpointSlice.
        kind, namespace, name = map(sys.intern, key.split("/", 2))
        if is_gateway_input(key):
            self._put(self._gateway_inputs, key, new)
            self._gateway_objects.put(key, new)
        if kind == "Service":
            self._put(self._services, (namespace, name), new)
        elif kind == "Secret":
            self._put(self._secrets, (namespace, name), new)
        elif kind == "EndpointSlice":
            services = {service for obj in (old, new) if obj is not None
                        if (service := self._service_of(obj)) is not None}
            for service in services:
                slices = tuple(obj for obj in self._slices.get((namespace, service), ())
                               if (obj.get("metadata") or {}).get("name") != name)
                if new is not None and self._service_of(new) == service:
                    slices += (new,)
                if slices:
                    self._slices[namespace, service] = slices
                else:
                    self._slices.pop((namespace, service), None)
            return {_slices_of(namespace, service) for service in services}
        return {key}

    @staticmethod
    def _put(index: dict[Any, dict[str, Any]], key: Any, obj: dict[str, Any] | None) -> None:
        if obj is None:
            index.pop(key, None)
        else:
            index[key] = obj

    @staticmethod
    def _service_of(obj: dict[str, Any]) -> str | None:
        return ((obj.get("metadata") or {}).get("labels") or {}).get(SERVICE_NAME_LABEL)

    # --- plans --------------------------------------------------------------------------------------

    def _replan(self, key: str) -> None:
        """Plan the Ingress at `key` again (or forget it: gone, or not ours)."""
        entry = self._plans.pop(key, None)
        self._noted_plans.discard(key)
        if entry is not None:
            for read in entry.reads:
                self._plans_reading.discard(read, key)
            for name in entry.names:
                self._by_name.discard(name, key)
            self._files.remove(entry)
            self._problems.remove(entry.problems, _PLAN)
        ingress = self._store.get(key)
        assert self._cluster is not None
        if ingress is None or not self._cluster.accept.is_ours(ingress):
            return
        _, namespace, name = map(sys.intern, key.split("/", 2))  # the plan's records keep the namespace
        reads: set[str] = set()
        secrets = _Recording(self._secrets, reads, _kind_key("Secret"))
        auth = auth_resolver(self._cluster.config, secrets, _Recording(self._store, reads, str))
        plan, problems = plan_one(namespace, name, ingress, parser=self._cluster.parser,
                                  strict_path_types=self._cluster.config.strict_validate_path_type, auth=auth,
                                  refused_profiles=self._cluster.refused_profiles, secrets=secrets)
        entry = _PlanEntry(order=creation_order(ingress, namespace=namespace, name=name), plan=plan,
                           problems=problems, reads=tuple(reads), auth_files=auth.files or _NO_FILES,
                           ssl_files=auth.ssl_files or _NO_FILES,
                           names=tuple(plan_names(plan)) if plan is not None else ())
        self._plans[key] = entry
        if entry.problems:
            self._noted_plans.add(key)
            self._problems.add(entry.problems, _PLAN)
        self._files.add(entry)
        for read in reads:
            self._plans_reading.add(read, key)
        for name in entry.names:
            self._by_name.add(name, key)

    # --- groups -------------------------------------------------------------------------------------

    def _drop_group(self, group: int) -> set[str]:
        """Forget a group's merge; returns its Ingresses."""
        dropped = self._groups.pop(group)
        self._noted_groups.discard(group)
        self._problems.remove(dropped.merged.problems, _GROUP)
        self._totals.remove(dropped.merged)
        for read in dropped.reads:
            self._groups_reading.discard(read, group)
        for key in dropped.keys:
            if self._group_of.get(key) == group:
                del self._group_of[key]
        return set(dropped.keys)

    def _regroup(self, keys: set[str]) -> None:
        """Merge the groups that the planned Ingresses `keys` (ungrouped) now belong to: each one's Ingresses
        linked by shared names, taking in (and merging again) the groups they reach."""
        pending = {key for key in keys if self._plans[key].plan is not None}
        while pending:
            start = pending.pop()
            members, frontier = {start}, [start]
            while frontier:
                for name in self._plans[frontier.pop()].names:
                    for other in self._by_name.of(name):
                        if other in members:
                            continue
                        reached = self._drop_group(self._group_of[other]) if other in self._group_of else {other}
                        reached -= members
                        members |= reached
                        frontier.extend(reached)
            pending -= members
            self._merge_group(members)

    def _recorded(self, reads: set[str]) -> tuple[_LoggedResolver, TlsSecrets]:
        """A resolver and TLS Secrets that add the store keys they read (and EndpointSlices of a Service) to
        `reads`."""
        resolver = _LoggedResolver(_Recording(self._services, reads, _kind_key("Service")),
                                   slices=_Recording(_SlicesByService(self._slices), reads,
                                                     lambda key: _slices_of(*key)),
                                   allow_external_name=not self.settings.ingress.disable_svc_external_name)
        return resolver, TlsSecrets(_Recording(self._secrets, reads, _kind_key("Secret")),
                                    self.settings.ingress.default_ssl_certificate)

    def _merge_group(self, keys: set[str]) -> None:
        assert self._cluster is not None
        reads: set[str] = set()
        plans = [entry.plan for entry in sorted((self._plans[key] for key in keys), key=lambda e: e.order)]
        resolver, secrets = self._recorded(reads)
        merged = merge_plans([plan for plan in plans if plan is not None], config=self._cluster.config,
                             settings=self.settings, resolver=resolver, secrets=secrets)
        group = self._next_group
        self._next_group += 1
        kept = _GroupMerge.of(merged)
        self._groups[group] = _Group(keys=tuple(keys), merged=kept, reads=tuple(reads))
        self._totals.add(kept)
        if merged.problems:
            self._noted_groups.add(group)
            self._problems.add(kept.problems, _GROUP)
        for key in keys:
            self._group_of[key] = group
        for read in reads:
            self._groups_reading.add(read, group)

    # --- the Model ----------------------------------------------------------------------------------

    def _assemble(self, store: Mapping[str, dict[str, Any]], afresh: bool) -> Model:
        assert self._cluster is not None
        routes, backends = self._totals.take_touched()
        gateway_before = self._gateway.model if self._gateway is not None else None
        before = gateway_before.routes if gateway_before is not None else {}
        gateway = self._gateway_model(routes)
        touched = self._side_touched(routes, gateway_before, gateway)  # taken afresh too: they start empty then
        self._side_changes = self._side_changes.then(SideChanges() if afresh else touched)
        # The hosts whose Gateway rules changed: marking them all made each sync push every one (10,000 at 10,000
        # HTTPRoutes, 0.4 s after an Ingress change). Only those the build made again are compared.
        if gateway.routes is before:
            gateway_hosts: frozenset[str] = frozenset()
        else:
            looked = before.keys() | gateway.routes.keys() if gateway.changed_hosts is None else gateway.changed_hosts
            self.gateway_hosts_compared += len(looked)
            gateway_hosts = frozenset(host for host in looked if before.get(host) != gateway.routes.get(host))
        config = self._cluster.config.server
        # Afresh, every host is touched (the totals and the Gateway part start empty).
        entries = joined_entries(routes | gateway_hosts, self._totals.merged.routes, gateway.routes,
                                 redirect_code=config.redirect_code, no_tls_redirect=config.no_tls_redirect_locations)
        self.hosts_joined += len(entries)
        self._joined = self._joined.changed(entries)
        changed = TableChanges() if afresh else TableChanges(routes | gateway_hosts, backends | self._beside_routes)
        resolver = BackendResolver(self._services, slices=_SlicesByService(self._slices),
                                   allow_external_name=not self.settings.ingress.disable_svc_external_name)
        model = assemble_model(store, settings=self.settings, config=self._cluster.config, secrets=self._secrets,
                               resolver=resolver, merged=self._totals.joined([]), problems=self._cluster.problems,
                               auth_files=self._files.auth, ssl_files=self._files.ssl, changed=changed,
                               gateway_inputs=self._gateway_inputs, gateway=gateway, joined_routes=self._joined,
                               kept=self.kept, place_problems=self._problems.placed)
        self._beside_routes = model.changed.beside_routes
        return model

    def _side_touched(self, routes: frozenset[str], gateway_before: GatewayModel | None,
                      gateway: GatewayModel) -> SideChanges:
        """What this model may change beside the tables (SideChanges), from the plans and groups that changed.
        `routes`: the Ingress hosts touched, whose TLSRoute passthrough entries they may take or leave."""
        passthrough, profile_files = self._totals.take_side_touched()
        files = self._files.take_touched() | profile_files
        changes = SideChanges(passthrough | routes, files, files)
        if gateway is not gateway_before:
            # The Gateway API part was made again: its TLSRoutes' hosts, its profiles' files may all have changed.
            if any(model.passthrough.hosts for model in (gateway_before, gateway) if model is not None):
                changes = replace(changes, passthrough=None)
            if any(_names_files(model) for model in (gateway_before, gateway) if model is not None):
                changes = replace(changes, auth_files=None, ssl_files=None)
        return changes

    def take_problem_changes(self) -> ProblemChanges:
        """How the last model's problems differ from those of the last model when this was last called."""
        kept = self._problems
        changes = ProblemChanges(added=None if self._problems_afresh else tuple(kept.added), removed=tuple(kept.removed),
                                 others=kept.others, built=kept.built)
        kept.added, kept.removed, self._problems_afresh = [], [], False
        return changes

    def take_side_changes(self) -> SideChanges:
        """What the models made since the last call may have changed beside the tables (SideChanges)."""
        changes, self._side_changes = self._side_changes, NO_SIDE_CHANGES
        return changes

    # --- the Gateway API part -----------------------------------------------------------------------

    def _gateway_model(self, touched_hosts: frozenset[str]) -> GatewayModel:
        """The Gateway API part, kept, with its endpoints resolved again, or built again. `touched_hosts`: the hosts
        whose Ingress entries changed since the last model."""
        part = None if self._gateway_stale else self._gateway
        if self._gateway is not None and not touched_hosts.isdisjoint(self._gateway.hosts):
            part, self._gateway_changed = None, None  # an Ingress took or left a host a route names
        if self._gateway_slices:
            part = self._endpoints_moved(part) if part is not None else None
            if part is None:
                self._gateway_changed = None  # more than endpoints moved, or beside a route change: built whole
        self._gateway_slices = set()
        if part is None:
            part = self._build_gateway()
        self._gateway, self._gateway_stale = part, False
        return part.model

    def _endpoints_moved(self, part: _GatewayPart) -> _GatewayPart | None:
        """`part` with the endpoints of the Services whose EndpointSlices changed resolved again; None when what
        changed is more than their endpoints (a backend found or lost), or when TLSRoutes pass some through (their
        endpoints are in the passthrough table)."""
        if part.model.passthrough.hosts:
            return None
        resolver = BackendResolver(self._services, slices=_SlicesByService(self._slices),
                                   allow_external_name=not self.settings.ingress.disable_svc_external_name)
        backends = dict(part.model.backends)
        resolved = dict(part.resolved)
        for ref, was in part.resolved.items():
            if _slices_of(ref.namespace, ref.service) not in self._gateway_slices:
                continue
            now = resolver.resolve(ref)
            if replace(now, endpoints=()) != replace(was, endpoints=()):
                return None
            resolved[ref] = now
            if now.name is not None and not now.refused:
                backends[now.name] = list(now.endpoints)
        return _GatewayPart(model=replace(part.model, backends=backends), reads=part.reads, hosts=part.hosts,
                            resolved=resolved)

    def _build_gateway(self) -> _GatewayPart:
        self.gateway_builds += 1
        reads: set[str] = set()
        hosts: set[str] = set()
        resolver, secrets = self._recorded(reads)
        owners = _Recording(IngressOwners(self._totals.merged.routes), hosts, str)
        previous, changed = self._gateway, self._gateway_changed
        model = build_gateway(self._gateway_objects, settings=self.settings, resolver=resolver,
                              secrets=secrets, ingress_owners=owners, kept=self._gateway_kept, changed=changed,
                              previous=previous.model if previous is not None else None)
        self._gateway_changed = set()
        if previous is not None and changed is not None:
            # Built from the last one: what that one read still counts.
            reads |= previous.reads
            hosts |= previous.hosts
        return _GatewayPart(model=model, reads=reads, hosts=hosts, resolved=model.resolved)

    @property
    def route_plans_made(self) -> int:
        """How many Gateway API route plans were made (not kept) since this model was created."""
        return self._gateway_kept.plans.made

    @property
    def gateway_work(self) -> Work:
        """What the Gateway API builds did, counted (gateway/kept_routes.py Work)."""
        return self._gateway_kept.work


def _names_files(gateway: GatewayModel) -> bool:
    """Whether the Gateway API part has files of its own or profiles that name files."""
    return bool(gateway.ssl_files) or any(any(files_named(profile)) for profile in gateway.profiles.values())

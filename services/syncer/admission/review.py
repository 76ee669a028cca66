"""The admission decision on one Ingress: what the syncer's own model would make of it, before it is stored.

Each review plans the Ingress with model/build.py's plan_one (annotations, paths, backends, Secrets, the
location profile's check, PCRE for regexes) and merges it with the Ingresses it shares host names with
(merge_plans: host ownership, strict-host-ownership, passthrough, canaries, backends refused), as the syncer
would. An error the syncer reports denies; a warning is allowed and handed back as a warning. Beyond the syncer,
as ingress-nginx's webhook decides:
- a host and path another Ingress of our class defines is denied, naming that Ingress (the syncer would keep it
  for the oldest and warn the other); updating the same Ingress is no conflict;
- an annotation value the syncer would set aside (ignore with a warning) is denied when it holds nginx
  configuration syntax (a quote, a brace, ';', '#', a newline): not a slip of format but a value written to
  inject configuration (the IngressNightmare family); so is a valid value (a regular expression, which the
  syncer pushes to Lua as data) holding a quote, ';' or a newline. Neither is ever rendered;
- with --disable-catch-all an Ingress with a spec.defaultBackend is denied (the syncer would ignore it whole).
An Ingress of another class, or of a namespace the controller does not serve (--watch-namespace, and
--watch-namespace-selector, matched against the store's Namespace objects: the watcher publishes them with that
flag, `pyngress lint` reads them from the manifests or the cluster), is allowed untouched.
Nothing is written and nothing is run: no nginx -t on what a client sent.

Gateway API objects (HTTPRoute, GRPCRoute, TLSRoute, Gateway) are judged by gateway_review.py, with the
syncer's gateway model, beside their parent Gateways and the routes sharing their host names.

Cost: the store's Ingresses are indexed once (replace_store) and kept by apply_change: which Ingresses name each
host, and which define each host + path. A review plans the reviewed Ingress and the few that share its host
names (their plans cached until they, a Secret or a ConfigMap change), never the whole model. EndpointSlices are not
kept: endpoints change nothing decided here, and they were a third of the store's memory (BENCHMARKS.md, "memory at
100,000 Ingresses").
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Iterable, Iterator, Mapping

from services.common.label_selector import parse_label_selector
from services.common.settings import Settings

from ..annotations import ANNOTATIONS, InvalidAnnotation
from ..annotations.access_control import is_access_control
from ..annotations.base import InvalidValue
from ..annotations.snippets import is_snippet
from ..model.backends import BackendResolver
from ..model.build import (AnnotationParser, IngressPlan, IngressRejected, PathRule, annotation_parser,
                           auth_resolver, creation_order, merge_plans, plan_ingress, plan_names, plan_one)
from ..model.configmap import ControllerConfig, load_controller_config
from ..model.gateway import is_gateway_input
from ..model.gateway.objects import GATEWAY_GROUP
from ..model.ingress_class import IngressClassFilter
from ..model.problems import Problem
from ..model.shared_strings import share_strings
from ..model.tls import TlsSecrets
from .gateway_review import REVIEWED_KINDS, GatewayContext, GatewayIndex, review_gateway_object

# What lets a value break out of the nginx argument it is written into: a quote, a brace, ';', '#' (a comment
# to the end of the line), a newline or another control character.
_CONFIGURATION_SYNTAX = re.compile(r"[\"'{};#\x00-\x1f\x7f]")
# Of those, what even a valid value (a regular expression) never needs: a quote, ';', a control character.
_BREAKOUT = re.compile(r"[\"';\x00-\x1f\x7f]")


@dataclass(frozen=True)
class Verdict:
    """The answer to one review. `errors` are the reasons for a denial, one each; `message` joins them."""
    allowed: bool
    message: str = ""  # when denied: what is wrong and what to change
    warnings: tuple[str, ...] = ()  # values the syncer ignores with a warning (kubectl prints them)
    errors: tuple[str, ...] = ()

    @classmethod
    def of(cls, errors: Iterable[str], warnings: Iterable[str]) -> Verdict:
        errors, warnings = tuple(dict.fromkeys(errors)), tuple(dict.fromkeys(warnings))
        return cls(allowed=not errors, message="\n".join(errors), warnings=warnings, errors=errors)


ALLOWED = Verdict(allowed=True)

# The store keys a review never reads (the resolvers are given no EndpointSlices): not kept.
_UNREAD = "EndpointSlice/"


def drop_unread(store: dict[str, dict[str, Any]]) -> None:
    """Remove from a snapshot's store, in place, what the Reviewer would not keep. Done before it indexes the rest,
    their memory goes back to the system; after, the index's allocations would hold most of it."""
    for key in [key for key in store if key.startswith(_UNREAD)]:
        del store[key]

RouteKey = tuple[str, str, str]  # (host, "exact" or "prefix", path) as the model's route tables key them


@dataclass(frozen=True, slots=True)
class _Indexed:
    """What the index keeps of one of our Ingresses: enough to find its neighbours and its routes."""
    names: tuple[str, ...]  # build.plan_names
    routes: tuple[RouteKey, ...]  # empty for a canary, which shares its main Ingress's routes


@dataclass(frozen=True)
class _Cluster:
    """What holds for every Ingress: rebuilt when the controller ConfigMap or an IngressClass changes."""
    config: ControllerConfig
    problems: tuple[Problem, ...]
    parser: AnnotationParser
    accept: IngressClassFilter


def _members(index: dict[Any, set[str]], key: Any) -> set[str]:
    return index.get(key) or set()


def _discard(index: dict[Any, set[str]], key: Any, member: str) -> None:
    members = index[key]
    members.discard(member)
    if not members:
        del index[key]


class Reviewer:
    """The syncer's decision on one Ingress at a time, against the watcher's store."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._prefix = settings.ingress.annotations_prefix + "/"
        selector = settings.source.watch_namespace_selector
        self._namespace_selector = parse_label_selector(selector) if selector else None
        self.replace_store({})

    # --- the store ------------------------------------------------------------------------------------

    def replace_store(self, store: Mapping[str, dict[str, Any]]) -> None:
        """The watcher's store ("Kind/namespace/name" → object, as build_model takes it), whole."""
        self._store: dict[str, dict[str, Any]] = {key: obj for key, obj in store.items() if not key.startswith(_UNREAD)}
        self._services: dict[tuple[str, str], dict[str, Any]] = {}
        self._secrets: dict[tuple[str, str], dict[str, Any]] = {}
        self._namespaces: dict[str, dict[str, Any]] = {}  # Namespace objects, for --watch-namespace-selector
        self._gateway = GatewayIndex()
        for key, obj in self._store.items():
            share_strings(obj)  # one copy of each repeated string, as in the syncer's model: 29 MiB at 100,000 Ingresses
            self._index_kind(key, obj)
            if is_gateway_input(key):
                self._gateway.apply_change(key, obj)
        self._reindex()

    def apply_change(self, key: str, obj: dict[str, Any] | None) -> None:
        """One object set (None: deleted)."""
        if key.startswith(_UNREAD):
            return
        if obj is None:
            self._store.pop(key, None)
        else:
            share_strings(obj)
            self._store[key] = obj
        kind = key.partition("/")[0]
        self._index_kind(key, obj)
        if is_gateway_input(key):
            self._gateway.apply_change(key, obj)
        if kind in ("IngressClass", "Namespace") or key == self._configmap_key:
            self._reindex()
        elif kind == "Ingress":
            self._plans.pop(key, None)
            self._unindex(key)
            if obj is not None:
                self._index_ingress(key, obj)
        elif kind in ("Secret", "ConfigMap"):
            self._plans.clear()  # a plan reads Secrets and ConfigMaps (auth, client certificates, headers)

    @property
    def cluster_problems(self) -> tuple[Problem, ...]:
        """What is wrong with the controller ConfigMap (the syncer reports the same)."""
        return self._cluster.problems

    @property
    def _configmap_key(self) -> str | None:
        configmap = self.settings.ingress.configmap
        return f"ConfigMap/{configmap}" if configmap else None

    def _index_kind(self, key: str, obj: dict[str, Any] | None) -> None:
        kind, namespace, name = key.split("/", 2)
        if kind == "Namespace":
            if obj is None:
                self._namespaces.pop(name, None)
            else:
                self._namespaces[name] = obj
            return
        table = self._services if kind == "Service" else self._secrets if kind == "Secret" else None
        if table is None:
            return
        if obj is None:
            table.pop((namespace, name), None)
        else:
            table[namespace, name] = obj

    def _reindex(self) -> None:
        """Read the cluster-wide settings and index every Ingress afresh."""
        config, problems = load_controller_config(self._store, self.settings.ingress.configmap)
        classes = [obj for key, obj in self._store.items() if key.startswith("IngressClass/")]
        self._cluster = _Cluster(config=config, problems=tuple(problems),
                                 parser=annotation_parser(config, self.settings),
                                 accept=IngressClassFilter.from_classes(classes, self.settings))
        self._indexed: dict[str, _Indexed] = {}
        self._by_name: dict[str, set[str]] = {}  # host name → our Ingresses naming it
        self._by_route: dict[RouteKey, set[str]] = {}  # host + path → our Ingresses defining it
        self._plans: dict[str, tuple[IngressPlan | None, tuple[Any, str]]] = {}  # plan_one's, with creation order
        for key, obj in self._store.items():
            if key.startswith("Ingress/"):
                self._index_ingress(key, obj)

    def _index_ingress(self, key: str, ingress: dict[str, Any]) -> None:
        _, namespace, name = key.split("/", 2)
        # The shape only: whether its Secrets are usable changes nothing of which hosts and paths it names.
        try:
            if not self.judges(ingress):
                return
            annotations = self._cluster.parser.parse((ingress.get("metadata") or {}).get("annotations") or {})
            plan = plan_ingress(ingress, namespace=namespace, name=name, annotations=annotations,
                                profile=annotations.profile,
                                strict_path_types=self._cluster.config.strict_validate_path_type)
        except (IngressRejected, InvalidAnnotation, AttributeError, TypeError):
            return  # refused whole by the syncer: it serves nothing
        entry = _Indexed(names=tuple(plan_names(plan)),
                         routes=() if annotations.canary is not None else tuple(_route_keys(plan.paths)))
        self._indexed[key] = entry
        for host in entry.names:
            self._by_name.setdefault(host, set()).add(key)
        for route in entry.routes:
            self._by_route.setdefault(route, set()).add(key)

    def _unindex(self, key: str) -> None:
        entry = self._indexed.pop(key, None)
        if entry is None:
            return
        for host in entry.names:
            _discard(self._by_name, host, key)
        for route in entry.routes:
            _discard(self._by_route, route, key)

    # --- a review -------------------------------------------------------------------------------------

    def judges(self, ingress: Mapping[str, Any]) -> bool:
        """Whether `ingress` is this controller's to judge: of its class, in a namespace it serves."""
        meta = _mapping(ingress.get("metadata"))
        return (self._serves_namespace(meta.get("namespace") or "default")
                and self._cluster.accept.is_ours({**ingress, "metadata": meta}))

    def _serves_namespace(self, namespace: str) -> bool:
        watched = self.settings.source.watch_namespace
        if watched and namespace != watched:
            return False
        if self._namespace_selector is None or not self._namespaces:
            return True  # no selector, or no Namespace to match it against: cannot tell, so judged
        # A namespace not among them is held back by the watcher, as ingress-nginx ignores its Ingresses.
        labels = _mapping(_mapping(self._namespaces.get(namespace, {}).get("metadata")).get("labels"))
        return namespace in self._namespaces and self._namespace_selector.matches(labels)

    def review(self, ingress: Mapping[str, Any], *, operation: str = "CREATE") -> Verdict:
        """What the syncer would do with `ingress` (as the API server would store it) next to the store's."""
        if operation == "DELETE":
            return ALLOWED
        meta = _mapping(ingress.get("metadata"))
        obj = {**ingress, "metadata": meta}
        namespace = meta.get("namespace") or "default"
        name = meta.get("name") or meta.get("generateName") or ""
        if is_gateway_object(obj):
            return self._review_gateway(obj, namespace=namespace, name=name)
        if not self.judges(obj):
            return ALLOWED  # not ours: another controller's to judge
        spec = obj.get("spec")
        if self.settings.ingress.disable_catch_all and isinstance(spec, dict) and spec.get("defaultBackend") is not None:
            return Verdict.of(["spec.defaultBackend makes a catch-all Ingress, and the controller runs with "
                               "--disable-catch-all; remove spec.defaultBackend"], ())
        injections = self._injections(_mapping(meta.get("annotations")))
        errors = list(injections.values())
        warnings: list[str] = []
        key = f"Ingress/{namespace}/{name}"
        # A parser of its own: the shared one caches each distinct set of annotations, and reviews of objects never
        # stored must not grow the webhook's memory.
        plan, problems = self._plan(namespace, name, obj, annotation_parser(self._cluster.config, self.settings))
        if plan is not None:
            conflicts = self._conflicts(key, plan)
            errors += conflicts.values()
            # The paths denied above are left out of the merge, which would only warn about them again.
            kept = replace(plan, paths=tuple(rule for rule in plan.paths if _route_key(rule) not in conflicts))
            problems += self._merge_problems(key, kept, creation_order(obj, namespace=namespace, name=name))
        for problem in problems:
            if problem.is_error:
                errors.append(problem.message)
            elif not problem.message.startswith(tuple(injections)):  # set aside, and denied above
                warnings.append(problem.message)
        return Verdict.of(errors, warnings)

    def _review_gateway(self, obj: Mapping[str, Any], *, namespace: str, name: str) -> Verdict:
        """A route or Gateway: what the syncer's gateway model says about it (gateway_review.py)."""
        if not self._serves_namespace(namespace):
            return ALLOWED
        context = GatewayContext(services=self._services, secrets=self._secrets, ingress_owners=_IngressOwners(self),
                                 ingress_hosts=lambda host: host in self._by_name)
        decision = review_gateway_object(obj, kind=str(obj.get("kind")), namespace=namespace, name=name,
                                         index=self._gateway, settings=self.settings, context=context)
        if decision is None:
            return ALLOWED  # not ours: another controller's to judge
        return Verdict.of([p.message for p in decision.problems if p.is_error],
                          [p.message for p in decision.problems if not p.is_error])

    def ingress_owner(self, host: str) -> str | None:
        """The namespace of the oldest of our Ingresses naming `host` (it owns the host), or None."""
        named = self._by_name.get(host)
        return min(named, key=self._order).split("/")[1] if named else None

    def _plan(self, namespace: str, name: str, ingress: Mapping[str, Any],
              parser: AnnotationParser) -> tuple[IngressPlan | None, list[Problem]]:
        auth = auth_resolver(self._cluster.config, self._secrets, self._store)
        return plan_one(namespace, name, ingress, parser=parser,
                        strict_path_types=self._cluster.config.strict_validate_path_type, auth=auth,
                        refused_profiles={}, secrets=self._secrets)

    def _injections(self, annotations: Mapping[str, Any]) -> dict[str, str]:
        """The annotation values written to inject configuration: how the model names each value (its problems
        start so) → why it is denied."""
        found = {}
        for full_name, value in sorted(annotations.items()):
            name = full_name.removeprefix(self._prefix)
            annotation = ANNOTATIONS.get(name)
            # Snippets are configuration by design: allowed or refused whole.
            if (annotation is None or not full_name.startswith(self._prefix) or not isinstance(value, str)
                    or is_snippet(name) or not _CONFIGURATION_SYNTAX.search(value)):
                continue
            named = str(InvalidAnnotation(full_name, value=value, reason=""))
            try:
                annotation.validate(value)
            except InvalidValue as err:
                if not is_access_control(name):  # else the model denies it already
                    found[named] = named + (f"{err}; the value holds nginx configuration syntax (a quote, brace, "
                                            "';', '#' or line break), which could inject configuration: refused "
                                            "rather than ignored")
                continue
            if _BREAKOUT.search(value):
                # A valid regex (auth-tls-match-cn, canary-by-header-pattern) is data to pyngress, never rendered;
                # written with these it is the IngressNightmare shape, which no real name or header needs.
                found[named] = named + ("it holds a quote, ';' or a line break, the shape of a configuration "
                                        "injection (CVE-2025-1097, CVE-2025-1974); remove them")
        return found

    def _conflicts(self, key: str, plan: IngressPlan) -> dict[RouteKey, str]:
        """The reviewed Ingress's routes that another of our Ingresses defines → why it is denied."""
        if plan.annotations.canary is not None:
            return {}
        conflicts = {}
        for route in _route_keys(plan.paths):
            others = _members(self._by_route, route) - {key}
            if others:
                owner = min(others, key=self._order).split("/", 1)[1]
                host, kind, path = route
                conflicts[route] = (f"host {host} {kind} path {path} is already defined in Ingress {owner}; serve it "
                                    "from that Ingress, or use another host or path")
        return conflicts

    def _merge_problems(self, key: str, plan: IngressPlan, order: tuple[Any, str]) -> list[Problem]:
        """The problems merging gives `plan` among the Ingresses that share a host name with it, oldest first."""
        neighbours = set().union(*(_members(self._by_name, host) for host in plan_names(plan))) - {key}
        ordered = [(order, plan)]
        for other in neighbours:
            other_plan, other_order = self._neighbour_plan(other)
            if other_plan is not None:
                ordered.append((other_order, other_plan))
        ordered.sort(key=lambda item: item[0])
        resolver = BackendResolver(self._services, slices={},  # endpoints change nothing that is decided here
                                   allow_external_name=not self.settings.ingress.disable_svc_external_name)
        merged = merge_plans([p for _, p in ordered], config=self._cluster.config, settings=self.settings,
                             resolver=resolver,
                             secrets=TlsSecrets(self._secrets, self.settings.ingress.default_ssl_certificate))
        return [problem for problem in merged.problems if problem.object == f"Ingress {plan.ref}"]

    def _neighbour_plan(self, key: str) -> tuple[IngressPlan | None, tuple[Any, str]]:
        if key not in self._plans:
            _, namespace, name = key.split("/", 2)
            ingress = self._store[key]
            plan, _ = self._plan(namespace, name, ingress, self._cluster.parser)
            self._plans[key] = plan, creation_order(ingress, namespace=namespace, name=name)
        return self._plans[key]

    def _order(self, key: str) -> tuple[Any, str]:
        _, namespace, name = key.split("/", 2)
        return creation_order(self._store[key], namespace=namespace, name=name)


def is_gateway_object(obj: Mapping[str, Any]) -> bool:
    """Whether `obj` is a Gateway API kind this review judges (by its apiVersion's group and kind)."""
    group = str(obj.get("apiVersion") or "").partition("/")[0]
    return group == GATEWAY_GROUP and obj.get("kind") in REVIEWED_KINDS


class _IngressOwners(Mapping[str, str]):
    """Host → the namespace whose Ingress owns it, read when asked (a review asks about a route's few hosts)."""

    def __init__(self, reviewer: Reviewer) -> None:
        self._reviewer = reviewer

    def __getitem__(self, host: str) -> str:
        owner = self._reviewer.ingress_owner(host)
        if owner is None:
            raise KeyError(host)
        return owner

    def __iter__(self) -> Iterator[str]:
        raise TypeError("the owners are read host by host, never listed")

    def __len__(self) -> int:
        raise TypeError("the owners are read host by host, never counted")


def _mapping(value: Any) -> dict[str, Any]:
    """`value` when it is a mapping, else an empty one: a hand-written object may have any shape."""
    return value if isinstance(value, dict) else {}


def _route_key(rule: PathRule) -> RouteKey:
    return rule.host, rule.kind, rule.path


def _route_keys(rules: Iterable[PathRule]) -> list[RouteKey]:
    return [_route_key(rule) for rule in rules]

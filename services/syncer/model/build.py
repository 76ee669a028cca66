"""The object store → the Model (types.py): which host and path go to which backend, with what settings.

Pure and deterministic: no I/O, and the same store always gives an equal Model with sorted tables, because
the syncer compares models to decide what to reload or push. Semantics follow ingress-nginx:
- only our Ingresses count (ingress_class.py); they are taken oldest first (creationTimestamp, then
  "namespace/name"), and on a conflict (same host, path and path kind) the oldest keeps it;
- an Ingress with anything invalid (annotation value, host, path, backend) is dropped whole, with a
  problem saying what to change, and the others keep working;
- a WARNING problem (problems.py) is informational: the object is served.
"""
from __future__ import annotations

import re
import sys
from collections import ChainMap
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable, Iterator, Mapping

from services.common.settings import Settings
from services.nginxconf.config import DEFAULT_PROFILE, BlockLists, LocationProfile, NginxConfig
from services.nginxconf.geoip2 import GeoIP2
from services.nginxconf.render import RenderError, auth_endpoint, auth_upstream, check_profile
from services.nginxconf.request_metrics import layout_of

from ..annotations import IngressAnnotations, InvalidAnnotation, Risk, parse_annotations
from ..annotations.affinity import route_cookie_path
from ..annotations.base import InvalidValue
from ..annotations.ratelimit import zone_name
from ..annotations.validators import pcre_regex
from ..annotations.www_redirect import other_spelling
from .auth_secrets import AuthResolver
from .backends import BackendResolver, ResolvedBackend, ServiceRef, index_endpoint_slices
from .client_auth import ClientAuthRejected, resolve_client_auth
from .configmap import ControllerConfig, load_controller_config
from .configmap_server_keys import ticket_key_file
from .creation import creation_order
from .dh_param import dh_param
from .gateway import GatewayModel, GatewayObjects, build_gateway, with_gateway_routes
from .gateway.listeners import ports_beside_streams
from .gateway.tlsroutes import passthrough_beside
from .ingress_class import IngressClassFilter
from .problems import Problem
from .stream_services import stream_services
from .kept_tables import KeptTables
from .tls import TlsEntry, TlsSecrets, certificate_for, hsts_header, names_match
from .types import CATCH_ALL_HOST, CanaryRoute, ClientAuth, HostRoutes, Model, Route, TableChanges

# pathType → which HostRoutes table the path goes to. ImplementationSpecific is matched as a prefix.
PATH_KINDS = {"Exact": "exact", "Prefix": "prefix", "ImplementationSpecific": "prefix"}
# The path characters the Lua router takes as plain text (RFC 3986 path characters minus quotes and ';').
_PATH = re.compile(r"/[A-Za-z0-9\-._~%!$&()*+,=:@/]*")
# ConfigMap strict-validate-path-type (the default): Exact and Prefix paths as ingress-nginx allows them.
_STRICT_PATH = re.compile(r"/[A-Za-z0-9._\-/]*")
_MAX_REGEX = 1024
_SPACE = re.compile(r"[\s\x00-\x1f\x7f]")
_LABEL = r"[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?"
_HOST = re.compile(rf"(?:\*\.)?{_LABEL}(?:\.{_LABEL})*")
_NAME = re.compile(r"[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?")  # Service and port names (DNS labels)
_NAME_253 = re.compile(rf"(?=.{{1,253}}$){_LABEL}(?:\.{_LABEL})*")  # object names (DNS subdomains)


def _namespace_of(ref: str) -> str:
    """The namespace of an Ingress's "namespace/name"."""
    return ref.partition("/")[0]


class IngressRejected(ValueError):
    """Something in an Ingress's spec that drops the whole Ingress; the message says what to change."""


@dataclass(frozen=True, kw_only=True, slots=True)
class PathRule:
    host: str
    kind: str  # "exact" or "prefix"
    path: str
    service: ServiceRef


@dataclass(frozen=True, kw_only=True, slots=True)
class IngressPlan:
    """One valid Ingress, ready to merge."""
    ref: str  # "namespace/name"
    namespace: str
    hosts: tuple[str, ...]  # in rule order, without repeats; CATCH_ALL_HOST for rules without host
    paths: tuple[PathRule, ...]
    default_backend: ServiceRef | None
    annotations: IngressAnnotations
    profile: LocationProfile
    tls: tuple[TlsEntry, ...]
    client_auth: ClientAuth | None = None  # auth-tls-*, checked by the router on this Ingress's routes


def _service_ref(backend: Any, *, namespace: str, where: str, cluster_ip: bool) -> ServiceRef:
    if not isinstance(backend, dict) or not isinstance(backend.get("service"), dict):
        if isinstance(backend, dict) and "resource" in backend:
            raise IngressRejected(f"{where}: resource backends are not supported; use backend.service")
        raise IngressRejected(f"{where}: backend needs service.name and service.port")
    service = backend["service"]
    name, port = service.get("name"), service.get("port") or {}
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise IngressRejected(f"{where}: backend service name {name!r} must be a DNS label such as my-service")
    number, port_name = port.get("number"), port.get("name")
    if number is not None:
        if isinstance(number, bool) or not isinstance(number, int) or not 0 < number < 65536:
            raise IngressRejected(f"{where}: backend service port number {number!r} must be 1-65535")
        return ServiceRef(namespace=namespace, service=name, port=number, cluster_ip=cluster_ip)
    if isinstance(port_name, str) and _NAME.fullmatch(port_name):
        return ServiceRef(namespace=namespace, service=name, port=port_name, cluster_ip=cluster_ip)
    raise IngressRejected(f"{where}: backend service port needs a number (1-65535) or a name such as http")


def _host(rule: Mapping[str, Any]) -> str:
    host = rule.get("host")
    if not host:
        return CATCH_ALL_HOST
    # ASCII first: str.lower() folds some non-ASCII letters into ASCII ones (the Kelvin sign becomes "k").
    lowered = host.lower() if isinstance(host, str) and host.isascii() else ""
    if len(lowered) > 253 or not _HOST.fullmatch(lowered):
        raise IngressRejected(f"host {host!r} must be a DNS name such as app.example.com or *.example.com")
    return host if lowered == host else lowered  # the store's string, shared (model/shared_strings.py), if it can


def _regex_path(path: Any, *, where: str) -> str:
    """use-regex: a regular expression, matched case-insensitively from the start of the URI by router.lua."""
    if not isinstance(path, str) or not path.startswith("/") or len(path) > _MAX_REGEX or _SPACE.search(path):
        raise IngressRejected(f"{where}: with use-regex a path must be a regular expression starting with / and "
                              f"without spaces or control characters, at most {_MAX_REGEX} characters")
    try:
        pcre_regex(path, ignore_case=True, anchored=True)  # rewrite.lua compiles "^" .. path, flags "ijo"
    except InvalidValue as err:
        raise IngressRejected(f"{where}: {err}") from None
    return path


def _plain_path(path: Any, *, path_type: str, kind: str, strict_path_types: bool, where: str) -> str:
    if not isinstance(path, str) or not _PATH.fullmatch(path):
        raise IngressRejected(f"{where}: a path must start with / and contain only letters, digits and "
                              "-._~%!$&()*+,=:@/ (regular expressions are not supported)")
    if strict_path_types and path_type != "ImplementationSpecific" and not _STRICT_PATH.fullmatch(path):
        raise IngressRejected(f"{where}: with pathType {path_type} a path may hold only letters, digits and "
                              "'.', '_', '-', '/' (the ConfigMap's strict-validate-path-type); use pathType "
                              "ImplementationSpecific for other characters")
    if kind == "prefix":
        # Kubernetes: prefix "/foo/" matches "/foo" too, so it is the same prefix as "/foo".
        path = path.rstrip("/") or "/"
    return path


def _path_rule(entry: Mapping[str, Any], *, namespace: str, host: str, strict_path_types: bool,
               cluster_ip: bool, regex: bool) -> PathRule:
    path, path_type = entry.get("path") or "/", entry.get("pathType") or "ImplementationSpecific"
    where = f"host {host} path {path!r}"
    kind = PATH_KINDS.get(path_type)
    if kind is None:
        raise IngressRejected(f"{where}: pathType {path_type!r} must be Exact, Prefix or ImplementationSpecific")
    if regex and path_type == "ImplementationSpecific":
        path = _regex_path(path, where=where)
    else:
        path = _plain_path(path, path_type=path_type, kind=kind, strict_path_types=strict_path_types, where=where)
    return PathRule(host=host, kind=kind, path=path,
                    service=_service_ref(entry.get("backend"), namespace=namespace, where=where,
                                         cluster_ip=cluster_ip))


def plan_ingress(ingress: Mapping[str, Any], *, namespace: str, name: str,
                 annotations: IngressAnnotations, profile: LocationProfile,
                 strict_path_types: bool = True) -> IngressPlan:
    """Validate one Ingress's spec; raise IngressRejected saying what to change.

    `profile` is what the annotations make of its location settings (auth_secrets.AuthResolver).
    """
    spec = ingress.get("spec") or {}
    hosts: dict[str, None] = {}
    paths: list[PathRule] = []
    for rule in spec.get("rules") or ():
        host = _host(rule)
        hosts[host] = None
        for entry in (rule.get("http") or {}).get("paths") or ():
            paths.append(_path_rule(entry, namespace=namespace, host=host, strict_path_types=strict_path_types,
                                    cluster_ip=annotations.service_upstream, regex=annotations.use_regex))
    default = spec.get("defaultBackend")
    return IngressPlan(
        ref=sys.intern(f"{namespace}/{name}"), namespace=namespace, hosts=tuple(hosts), paths=tuple(paths),
        default_backend=(_service_ref(default, namespace=namespace, where="defaultBackend",
                                      cluster_ip=annotations.service_upstream)
                         if default is not None else None),
        annotations=annotations, profile=profile,
        tls=tuple(_tls_entry(entry) for entry in spec.get("tls") or ()),
    )


def _tls_entry(entry: Mapping[str, Any]) -> TlsEntry:
    hosts = entry.get("hosts") or ()
    secret_name = entry.get("secretName") or None
    if (not isinstance(hosts, list) or not all(isinstance(h, str) for h in hosts)
            or not (secret_name is None or isinstance(secret_name, str) and _NAME_253.fullmatch(secret_name))):
        raise IngressRejected(f"tls entry for {hosts!r}: hosts must be a list of host names and secretName "
                              "the name of a Secret in the Ingress's namespace")
    return TlsEntry(tuple(h.lower() for h in hosts), secret_name)


class AnnotationParser:
    """parse_annotations, once per distinct set of our annotations: Ingresses often share them."""

    def __init__(self, prefix: str, max_risk: Risk, *, blocked_words: tuple[str, ...] = (),
                 allow_snippets: bool = False,
                 defaults: Mapping[str, tuple[str, tuple[str, ...]]] | None = None) -> None:
        self.prefix, self.max_risk, self.blocked_words = prefix, max_risk, blocked_words
        self.allow_snippets = allow_snippets
        self._start = prefix + "/"
        # The ConfigMap's defaults for annotations: name → (value, the names any of which, on an Ingress, overrides
        # it). They come from the administrator: not checked for blocked words.
        self._defaults = {self._start + name: (value, tuple(self._start + n for n in names))
                          for name, (value, names) in (defaults or {}).items()}
        self._cache: dict[tuple[tuple[str, str], ...], IngressAnnotations | InvalidAnnotation] = {}

    def parse(self, annotations: Mapping[str, Any]) -> IngressAnnotations:
        ours = {k: v for k, v in annotations.items() if k.startswith(self._start)}
        self._refuse_blocked_words(ours)
        for name, (value, overridden_by) in self._defaults.items():
            if not any(alias in ours for alias in overridden_by):
                ours[name] = value
        if not all(isinstance(v, str) for v in ours.values()):
            return parse_annotations(ours, prefix=self.prefix, max_risk=self.max_risk,
                                         allow_snippets=self.allow_snippets)
        key = tuple(sorted(ours.items()))
        result = self._cache.get(key)
        if result is None:
            try:
                result = parse_annotations(ours, prefix=self.prefix, max_risk=self.max_risk,
                                         allow_snippets=self.allow_snippets)
            except InvalidAnnotation as err:
                result = err
            self._cache[key] = result
        if isinstance(result, InvalidAnnotation):
            raise result
        return result

    def _refuse_blocked_words(self, ours: Mapping[str, Any]) -> None:
        """The ConfigMap's annotation-value-word-blocklist, as ingress-nginx applies it: a value of one of our
        annotations holding any listed word (as a substring) refuses the Ingress."""
        for name, value in sorted(ours.items()):
            for word in self.blocked_words:
                if isinstance(value, str) and word in value:
                    raise InvalidAnnotation(name, value=value,
                                            reason=f"it contains {word!r}, a word the ConfigMap's "
                                                   "annotation-value-word-blocklist forbids")


@dataclass(kw_only=True)
class StoreIndex:
    """The store sorted by kind once per build, keyed by (namespace, name) from the store keys."""
    ingresses: list[tuple[str, str, dict[str, Any]]]
    ingress_classes: list[dict[str, Any]]
    services: dict[tuple[str, str], dict[str, Any]]
    endpoint_slices: list[tuple[str, dict[str, Any]]]
    secrets: dict[tuple[str, str], dict[str, Any]]

    @classmethod
    def of(cls, store: Mapping[str, dict[str, Any]]) -> StoreIndex:
        index = cls(ingresses=[], ingress_classes=[], services={}, endpoint_slices=[], secrets={})
        for key, obj in store.items():
            kind, namespace, name = key.split("/", 2)
            if kind == "Ingress":
                index.ingresses.append((namespace, name, obj))
            elif kind == "Service":
                index.services[namespace, name] = obj
            elif kind == "EndpointSlice":
                index.endpoint_slices.append((namespace, obj))
            elif kind == "Secret":
                index.secrets[namespace, name] = obj
            elif kind == "IngressClass":
                index.ingress_classes.append(obj)
        return index


class _Merger:
    """Merges valid Ingresses, oldest first, into routes, backends and passthrough hosts."""

    def __init__(self, config: ControllerConfig, *, resolver: BackendResolver, problems: list[Problem]) -> None:
        self.config = config
        self.resolver = resolver
        self.problems = problems
        self.routes: dict[str, HostRoutes] = {}
        self.host_owner: dict[str, IngressPlan] = {}  # the oldest Ingress of each host sets its TLS behaviour
        self.backends: dict[str, list[str]] = {}
        self.passthrough: dict[str, list[str]] = {}
        self.passthrough_owner: dict[str, str] = {}
        self.profiles: dict[str, LocationProfile] = {}  # those routes use (assemble_model adds the default)
        self._reported: set[tuple[str, ServiceRef | str]] = set()  # (Ingress, what) already warned about
        self.routed: set[str] = set()  # the Ingresses with a route

    def warn(self, plan: IngressPlan, message: str) -> None:
        self.problems.append(Problem.warning(f"Ingress {plan.ref}", message))

    def foreign_owner(self, plan: IngressPlan, host: str) -> str | None:
        """The Ingress ("namespace/name") that owns `host`, by HTTP routing or by passthrough, when it is of another
        namespace than `plan`; None when `plan`'s namespace owns it or nobody does yet. The owner is the host's
        oldest Ingress (plans come oldest first), and the host's certificate, redirects and server-level settings
        come only from the Ingresses of the owner's namespace."""
        owner = self.host_owner.get(host)
        ref = owner.ref if owner is not None else self.passthrough_owner.get(host)
        return ref if ref is not None and _namespace_of(ref) != plan.namespace else None

    def owns(self, plan: IngressPlan, host: str, setting: str, outcome: str = "is ignored") -> bool:
        """Whether `plan`'s namespace owns `host`, so that `plan` may set `setting` of it; a warning naming the
        owner when not."""
        owner = self.foreign_owner(plan, host)
        if owner is None:
            return True
        self.warn(plan, f"{setting} {outcome} for host {host}: the host belongs to namespace {_namespace_of(owner)} "
                        f"(its oldest Ingress is {owner}), and only that namespace's Ingresses set a host's "
                        "certificate, redirects and server-level settings")
        return False

    def refused_for_ownership(self, plan: IngressPlan) -> str | None:
        """With the ConfigMap's strict-host-ownership: why `plan` is refused (a host another namespace owns)."""
        if not self.config.strict_host_ownership:
            return None
        hosts = plan.hosts or ((CATCH_ALL_HOST,) if plan.default_backend is not None else ())
        foreign = [(host, owner) for host in hosts if (owner := self.foreign_owner(plan, host)) is not None]
        if not foreign:
            return None
        owners = ", ".join(f"{host} (owned by Ingress {owner}, older)" for host, owner in foreign)
        return (f"{owners} belongs to another namespace, and the ConfigMap's strict-host-ownership refuses Ingresses "
                "on a host another namespace owns; use a host of your own, or ask the owner to serve the path")

    def refused_backend(self, plan: IngressPlan) -> str | None:
        """Why `plan` may not be served at all (a backend that must never be proxied to), or None."""
        refs = [rule.service for rule in plan.paths]
        if plan.default_backend is not None:
            refs.append(plan.default_backend)
        return next((resolved.problem for ref in refs if (resolved := self.resolver.resolve(ref)).refused), None)

    def add_passthrough(self, plan: IngressPlan) -> bool:
        """Claim the plan's hosts for SNI passthrough; False (and a problem) when an older Ingress routes one.

        The oldest claim on a host wins whether it is HTTP routing or passthrough: a newer passthrough
        Ingress must not take a host, and all its TLS traffic, from the Ingress that already serves it.
        """
        taken = [host for host in plan.hosts if host in self.host_owner]
        if taken:
            owners = ", ".join(f"{host} (Ingress {self.host_owner[host].ref})" for host in taken)
            self.problems.append(Problem.error(f"Ingress {plan.ref}", f"ssl-passthrough refused: {owners} is already routed by "
                                               "an older Ingress, and the oldest Ingress keeps its host; use another host"))
            return False
        for host in plan.hosts:
            if host == CATCH_ALL_HOST:
                self.warn(plan, "ssl-passthrough needs a host to match the TLS SNI; the rule without host is ignored")
            elif host in self.passthrough:
                self.warn(plan, f"host {host} is already passed through for Ingress {self.passthrough_owner[host]}; "
                                "ignored here")
            else:
                target = self._passthrough_target(plan, host)
                self.passthrough[host] = list(self._resolve(plan, target).endpoints) if target else []
                self.passthrough_owner[host] = plan.ref
        return True

    @staticmethod
    def _passthrough_target(plan: IngressPlan, host: str) -> ServiceRef | None:
        """The backend of the host's "/" path, else its first path, else the Ingress's defaultBackend."""
        on_host = [p for p in plan.paths if p.host == host]
        root = next((p for p in on_host if p.path == "/"), on_host[0] if on_host else None)
        return root.service if root else plan.default_backend

    def add_http(self, plan: IngressPlan) -> None:
        served = [h for h in plan.hosts if self._http_host(plan, h)]
        if plan.client_auth is not None:
            # The handshake of the whole host asks for a client certificate: a setting of the host. Paths served
            # without the check they were written with would be open: they are not served at all.
            served = [h for h in served if self.owns(plan, h, "auth-tls-*", "refuses the Ingress's paths")]
            for host in served:
                self.routes[host].client_auth[plan.ref] = plan.client_auth
        for host in served:
            self._host_paths_options(plan, host)
        for rule in plan.paths:
            if rule.host not in served:
                continue
            table = getattr(self.routes[rule.host], rule.kind)
            existing = table.get(rule.path)
            if existing is not None:
                self.warn(plan, f"host {rule.host} {rule.kind} path {rule.path} is already served by Ingress "
                                f"{existing.ingress}; ignored here")
            else:
                table[rule.path] = self._route(plan, rule.service, rewrite=plan.annotations.rewrite_target,
                                               path=rule.path)
        if plan.default_backend is not None:
            # Without rules, an Ingress's defaultBackend is the catch-all host's.
            for host in served if plan.hosts else [h for h in [CATCH_ALL_HOST] if self._http_host(plan, h)]:
                host_routes = self.routes[host]
                if not self.owns(plan, host, "spec.defaultBackend"):
                    continue
                if host_routes.default is not None:
                    self.warn(plan, f"host {host} already has the defaultBackend of Ingress "
                                    f"{host_routes.default.ingress}; ignored here")
                else:
                    host_routes.default = self._route(plan, plan.default_backend)

    def _http_host(self, plan: IngressPlan, host: str) -> bool:
        """Make sure `host` has routes (the first, oldest Ingress sets its TLS behaviour); False if passthrough."""
        if host in self.passthrough:
            self.warn(plan, f"host {host} is passed through by SNI for Ingress {self.passthrough_owner[host]}; "
                            "its HTTP rules here are ignored")
            return False
        ssl_redirect, force = self._ssl_flags(plan)
        owner = self.host_owner.get(host)
        if owner is None:
            self.host_owner[host] = plan
            self.routes[host] = HostRoutes(ssl_redirect=ssl_redirect, force_ssl_redirect=force, owner=plan.namespace)
        elif owner is not plan and self._ssl_flags(owner) != (ssl_redirect, force):
            self.warn(plan, f"ssl-redirect/force-ssl-redirect for host {host} come from the older Ingress "
                            f"{owner.ref}; this Ingress's differ and are ignored")
        return True

    def _ssl_flags(self, plan: IngressPlan) -> tuple[bool, bool]:
        ann = plan.annotations
        return (self.config.ssl_redirect if ann.ssl_redirect is None else ann.ssl_redirect,
                self.config.force_ssl_redirect if ann.force_ssl_redirect is None else ann.force_ssl_redirect)

    def add_www_redirects(self, plan: IngressPlan) -> dict[str, str]:
        """from-to-www-redirect: the other spelling of each host `plan` serves redirects to it, unless routed
        already; returns {host: other spelling} of those added."""
        added = {}
        for host in plan.hosts:
            alias = other_spelling(host)
            if alias is None or host not in self.routes or not self.owns(plan, host, "from-to-www-redirect"):
                continue
            if alias in self.passthrough:
                self.warn(plan, f"from-to-www-redirect: {alias} is passed through by SNI for Ingress "
                                f"{self.passthrough_owner[alias]}; not redirected to {host}")
                continue
            if alias in self.routes:
                if self.routes[alias].redirect_host != host:
                    owner = self.host_owner.get(alias)
                    self.warn(plan, f"from-to-www-redirect: {alias} is routed by Ingress "
                                    f"{owner.ref if owner else 'another Ingress'}; not redirected to {host}")
                continue
            self.routes[alias] = HostRoutes(redirect_host=host, owner=plan.namespace)
            self.host_owner[alias] = plan
            added[host] = alias
        return added

    def add_server_aliases(self, plan: IngressPlan) -> dict[str, str]:
        """server-alias: each alias of `plan` serves the routes of its first routed host, unless the name is
        routed already; returns {alias: host} of those added."""
        added: dict[str, str] = {}
        if not plan.annotations.server_aliases:
            return added
        hosts = [host for host in plan.hosts if host != CATCH_ALL_HOST and host in self.routes
                 and self.owns(plan, host, "server-alias")]
        if not hosts:
            self.warn(plan, "server-alias needs a rule with a host of the Ingress's namespace; ignored")
            return added
        for alias in plan.annotations.server_aliases:
            if alias in self.passthrough:
                self.warn(plan, f"server-alias {alias} is passed through by SNI for Ingress "
                                f"{self.passthrough_owner[alias]}; skipped")
                continue
            if alias in self.routes:
                owner = self.host_owner.get(alias)
                self.warn(plan, f"server-alias {alias} is served by Ingress {owner.ref if owner else 'another Ingress'}"
                                "; skipped")
                continue
            self.routes[alias] = self.routes[hosts[0]]
            self.host_owner[alias] = plan
            added[alias] = hosts[0]
        return added

    def add_canary(self, plan: IngressPlan) -> None:
        """Attach `plan`'s backends as the canary of the main routes with the same host and path. Only a main
        Ingress of the same namespace takes a canary: another tenant's canary must not take its traffic."""
        policy = plan.annotations.canary
        assert policy is not None, "add_canary takes a canary Ingress"
        attached = 0
        for rule in plan.paths:
            host_routes = self.routes.get(rule.host)
            table = getattr(host_routes, rule.kind) if host_routes is not None else {}
            main = table.get(rule.path)
            if main is None or main.ingress.split("/")[0] != plan.namespace:
                continue
            if main.canary is not None:
                self.warn(plan, f"host {rule.host} path {rule.path} already has the canary of Ingress "
                                f"{main.canary.ingress}; ignored here")
                continue
            resolved = self._resolve(plan, rule.service)
            if resolved.name is not None:
                self.backends[resolved.name] = list(resolved.endpoints)
            table[rule.path] = replace(main, canary=CanaryRoute(
                backend=resolved.name, ingress=plan.ref, policy=policy,
                sticky=not plan.annotations.affinity_canary_legacy))
            attached += 1
        if not attached:
            self.problems.append(Problem.error(
                f"Ingress {plan.ref}", "a canary needs a main Ingress in its namespace with the same host and path "
                                       "(without canary: \"true\"); create that one first"))

    def _host_paths_options(self, plan: IngressPlan, host: str) -> None:
        """use-regex (any Ingress of the owner's namespace turns it on for all the host's paths, as ingress-nginx
        does for any Ingress of the host) and app-root (the oldest Ingress of the owner's namespace that sets one
        decides)."""
        host_routes = self.routes[host]
        if plan.annotations.use_regex and self.owns(plan, host, "use-regex"):
            host_routes.regex = True
        app_root = plan.annotations.app_root
        if app_root is not None and self.owns(plan, host, "app-root"):
            if host_routes.app_root is None:
                host_routes.app_root, host_routes.app_root_owner = app_root, plan.ref
            elif host_routes.app_root != app_root:
                self.warn(plan, f"host {host} already has app-root {host_routes.app_root} from Ingress "
                                f"{host_routes.app_root_owner}; ignored here")

    def drop_paths_regex_refuses(self) -> None:
        """On a use-regex host every prefix path is a regular expression, also one written as a plain path by an
        Ingress without use-regex (perhaps of another namespace): a path the regex engine refuses is dropped
        alone, with a warning, instead of making nginx's Lua refuse the whole host."""
        for host, host_routes in self.routes.items():
            if not host_routes.regex:
                continue
            for path, route in list(host_routes.prefix.items()):
                try:
                    _regex_path(path, where=f"host {host} path {path!r}")
                except IngressRejected as err:
                    del host_routes.prefix[path]
                    self.problems.append(Problem.warning(
                        f"Ingress {route.ingress}", f"{err}; the host's paths are regular expressions (use-regex on "
                                                    "an Ingress of the host's namespace), so this one is not served"))

    def _route(self, plan: IngressPlan, ref: ServiceRef, *, rewrite: str | None = None,
               path: str | None = None) -> Route:
        """The route of `ref` at the Ingress path `path` (None: the Ingress's default backend)."""
        resolved = self._resolve(plan, ref)
        affinity = plan.annotations.affinity
        if affinity is not None and affinity.path is None:
            affinity = replace(affinity, path=route_cookie_path(path))
        if resolved.name is not None:
            self.backends[resolved.name] = list(resolved.endpoints)
        profile = self._profile_at(plan, path)
        self.profiles[profile.name] = profile
        self.routed.add(plan.ref)
        return Route(backend=resolved.name, profile=profile.name, ingress=plan.ref, service=ref.service,
                     service_port=sys.intern(str(ref.port)),
                     rewrite=rewrite, affinity=affinity, hash_by=plan.annotations.hash_by,
                     default_backend=self._ingress_default_backend(plan), ewma=plan.annotations.ewma,
                     hash_subset_size=plan.annotations.hash_subset_size,
                     preserve_trailing_slash=plan.annotations.preserve_trailing_slash,
                     port_in_redirects=plan.annotations.port_in_redirects,
                     rewrite_log=plan.annotations.rewrite_log, tracing=plan.annotations.tracing)

    def _profile_at(self, plan: IngressPlan, path: str | None) -> LocationProfile:
        """`plan`'s profile for its Ingress path `path` (None: its default backend, ingress-nginx's "/"): without
        authentication (basic, digest, auth-url, global-auth-url) when the path starts with one of the ConfigMap's
        no-auth-locations, as ingress-nginx compares them (the Ingress's path, not the request's)."""
        profile = plan.profile
        if not (profile.basic_auth or profile.external_auth):
            return profile
        if not any((path or "/").startswith(prefix) for prefix in self.config.no_auth_locations):
            return profile
        return profile.with_settings(basic_auth=None, external_auth=None)

    def _ingress_default_backend(self, plan: IngressPlan) -> str | None:
        """The backend of the Ingress's default-backend annotation (a Service of its namespace), if usable."""
        name = plan.annotations.default_backend_service
        if name is None:
            return None
        resolved = self.resolver.first_port(plan.namespace, name)
        if resolved.name is None:
            if (plan.ref, name) not in self._reported:
                self._reported.add((plan.ref, name))
                self.warn(plan, f"default-backend: {resolved.problem}; the controller's default backend answers "
                                "instead")
            return None
        self.backends[resolved.name] = list(resolved.endpoints)
        return resolved.name

    def _resolve(self, plan: IngressPlan, ref: ServiceRef) -> ResolvedBackend:
        resolved = self.resolver.resolve(ref)
        if resolved.problem and (plan.ref, ref) not in self._reported:
            self._reported.add((plan.ref, ref))
            self.warn(plan, f"{resolved.problem}; requests for it answer 503")
        return resolved


def _our_ingresses(index: StoreIndex, settings: Settings) -> list[tuple[str, str, dict[str, Any]]]:
    accept = IngressClassFilter.from_classes(index.ingress_classes, settings)
    ours = [item for item in index.ingresses if accept.is_ours(item[2])]
    ours.sort(key=lambda item: creation_order(item[2], namespace=item[0], name=item[1]))
    return ours


def plan_one(namespace: str, name: str, ingress: Mapping[str, Any], *, parser: AnnotationParser,
             strict_path_types: bool, auth: AuthResolver, refused_profiles: Mapping[str, str],
             secrets: Mapping[tuple[str, str], Mapping[str, Any]]) -> tuple[IngressPlan | None, list[Problem]]:
    """One of our Ingresses → its plan (None when it is rejected) and its problems."""
    problems: list[Problem] = []
    try:
        annotations = parser.parse((ingress.get("metadata") or {}).get("annotations") or {})
        zone = zone_name(namespace=namespace, name=name, uid=(ingress.get("metadata") or {}).get("uid"))
        location_auth = auth.profile(annotations, namespace=namespace, zone=zone)
        plan = plan_ingress(ingress, namespace=namespace, name=name, annotations=annotations,
                            profile=location_auth.profile, strict_path_types=strict_path_types)
        if annotations.client_auth is not None:
            plan = replace(plan, client_auth=resolve_client_auth(annotations.client_auth, namespace=namespace,
                                                                 secrets=secrets))
        # A value no validator caught must drop its own Ingress here, not fail render() for everyone.
        check_profile(plan.profile)
    except (IngressRejected, InvalidAnnotation, RenderError, ClientAuthRejected) as err:
        return None, [Problem.error(f"Ingress {namespace}/{name}", str(err))]
    except (AttributeError, TypeError) as err:  # a manifest whose spec does not have the API's shape
        return None, [Problem.error(f"Ingress {namespace}/{name}", f"malformed spec ({err}); compare it with "
                                                                   "`kubectl explain ingress.spec`")]
    if plan.profile.name in refused_profiles:
        return None, [Problem.error(f"Ingress {plan.ref}", "nginx refused the location settings its annotations "
                                    f"make ({refused_profiles[plan.profile.name]}); change the annotations")]
    problems.extend(Problem.warning(f"Ingress {plan.ref}", w) for w in annotations.warnings)
    if location_auth.problem:
        problems.append(Problem.error(f"Ingress {plan.ref}", location_auth.problem))
    return plan, problems


@dataclass(kw_only=True)
class Merged:
    """What merging a set of Ingress plans gives: the whole cluster's in build_model, one group of Ingresses
    that share host names in incremental.py (the groups' results are disjoint but for backends and profiles,
    which are then the same objects)."""
    routes: dict[str, HostRoutes]
    backends: dict[str, list[str]]
    passthrough: dict[str, list[str]]
    profiles: dict[str, LocationProfile]
    tls_secrets: dict[str, str]  # routed host → the Secret of its certificate
    snippet_servers: list[tuple[str, str]]  # (host, profile) of server-snippet server blocks
    problems: list[Problem]


def plan_names(plan: IngressPlan) -> set[str]:
    """The host names whose routes `plan` may decide or take part in deciding: its hosts, their other
    spelling with from-to-www-redirect, its server aliases. Ingresses that share none merge independently."""
    names = set(plan.hosts) | set(plan.annotations.server_aliases)
    if not plan.hosts and plan.default_backend is not None:
        names.add(CATCH_ALL_HOST)  # without rules, the defaultBackend is the catch-all host's
    if plan.annotations.from_to_www:
        names.update(alias for host in plan.hosts if (alias := other_spelling(host)) is not None)
    return names


def merge_plans(plans: Iterable[IngressPlan], *, config: ControllerConfig, settings: Settings,
                resolver: BackendResolver, secrets: TlsSecrets) -> Merged:
    """Merge valid Ingresses, oldest first (`plans` in that order), into routes, backends and passthrough
    hosts, with their TLS certificates."""
    problems: list[Problem] = []
    merger = _Merger(config, resolver=resolver, problems=problems)
    http_plans = []
    canaries = []
    # One pass, oldest first: whoever claims a host first keeps it, by HTTP routing or by passthrough.
    for plan in plans:
        if (refusal := merger.refused_backend(plan) or merger.refused_for_ownership(plan)) is not None:
            problems.append(Problem.error(f"Ingress {plan.ref}", refusal))
        elif plan.annotations.canary is not None:
            canaries.append(plan)  # once every main route exists
        elif not plan.annotations.ssl_passthrough:
            merger.add_http(plan)
            http_plans.append(plan)
        elif settings.ingress.enable_ssl_passthrough:
            merger.add_passthrough(plan)
        else:
            merger.warn(plan, f"annotation {settings.ingress.annotations_prefix}/ssl-passthrough is ignored: the "
                              "controller runs without --enable-ssl-passthrough")
            merger.add_http(plan)
            http_plans.append(plan)

    for plan in canaries:
        merger.add_canary(plan)
    merger.drop_paths_regex_refuses()  # before the aliases, which share their host's routes
    www_aliases = {alias: host for plan in http_plans if plan.annotations.from_to_www
                   for host, alias in merger.add_www_redirects(plan).items()}
    # After every host: a real host always keeps its name.
    for plan in http_plans:
        www_aliases.update(merger.add_server_aliases(plan))

    tls_secrets, tls_hosts = _tls_secrets(http_plans, merger=merger, secrets=secrets)
    for alias, host in www_aliases.items():
        # The redirect (and a server-alias) answers on HTTPS too: with the host's certificate when it names it.
        if host in tls_secrets and names_match(alias, secrets.names(tls_secrets[host])):
            tls_secrets[alias] = tls_secrets[host]
    snippet_servers = _snippet_servers(http_plans, merger)
    hsts = hsts_header(config)
    for host in tls_hosts:
        host_routes = merger.routes[host]
        host_routes.tls, host_routes.hsts = True, hsts
    for host_routes in merger.routes.values():
        host_routes.redirect_code = config.server.redirect_code
        host_routes.no_tls_redirect = config.server.no_tls_redirect_locations
    return Merged(routes=merger.routes, backends=merger.backends, passthrough=merger.passthrough,
                  profiles=merger.profiles, tls_secrets=tls_secrets, snippet_servers=snippet_servers,
                  problems=problems)


def build_model(store: Mapping[str, dict[str, Any]], *, settings: Settings,
                refused_profiles: Mapping[str, str] | None = None,
                previous_configmap: Mapping[str, str] | None = None) -> Model:
    """Build the Model from the watcher's store ("Kind/namespace/name" → object as the API shows it), whole:
    the reference that incremental.py's IncrementalModel must always equal.

    `refused_profiles` (profile name → nginx's message) are location profiles that `nginx -t` refused:
    the Ingresses that would use one are rejected with that message, so the others can be applied.
    `previous_configmap`: the controller ConfigMap values the last model accepted (Model.configmap_accepted),
    which keep applying where the ConfigMap now has a bad value.
    """
    index = StoreIndex.of(store)
    config, config_problems = load_controller_config(store, settings.ingress.configmap, previous_configmap)
    parser = annotation_parser(config, settings)
    auth = auth_resolver(config, index.secrets, store)
    plans, plan_problems = [], []
    for namespace, name, ingress in _our_ingresses(index, settings):
        plan, problems = plan_one(namespace, name, ingress, parser=parser,
                                  strict_path_types=config.strict_validate_path_type, auth=auth,
                                  refused_profiles=refused_profiles or {}, secrets=index.secrets)
        plan_problems.extend(problems)
        if plan is not None:
            plans.append(plan)
    resolver = BackendResolver(index.services, slices=index_endpoint_slices(index.endpoint_slices),
                               allow_external_name=not settings.ingress.disable_svc_external_name)
    merged = merge_plans(plans, config=config, settings=settings, resolver=resolver,
                         secrets=TlsSecrets(index.secrets, settings.ingress.default_ssl_certificate))
    return assemble_model(store, settings=settings, config=config, secrets=index.secrets, resolver=resolver,
                          merged=merged, problems=[*config_problems, *plan_problems],
                          auth_files=auth.files, ssl_files=auth.ssl_files)


def annotation_parser(config: ControllerConfig, settings: Settings) -> AnnotationParser:
    return AnnotationParser(settings.ingress.annotations_prefix, config.annotations_risk_level,
                            blocked_words=config.annotation_value_word_blocklist,
                            allow_snippets=config.allow_snippet_annotations, defaults=config.annotation_defaults)


def auth_resolver(config: ControllerConfig, secrets: Mapping[tuple[str, str], Mapping[str, Any]],
                  store: Mapping[str, dict[str, Any]]) -> AuthResolver:
    return AuthResolver(secrets, allow_cross_namespace=config.allow_cross_namespace_resources,
                        global_auth=config.global_auth, global_auth_problem=config.global_auth_problem, store=store,
                        allowed_response_headers=config.allowed_response_headers)


def assemble_model(store: Mapping[str, dict[str, Any]], *, settings: Settings, config: ControllerConfig,
                   secrets: Mapping[tuple[str, str], Mapping[str, Any]], resolver: BackendResolver,
                   merged: Merged, problems: Iterable[Problem], auth_files: Mapping[str, bytes],
                   ssl_files: Mapping[str, bytes], changed: TableChanges = TableChanges(),
                   gateway_inputs: Mapping[str, dict[str, Any]] | None = None,
                   gateway: GatewayModel | None = None, joined_routes: Mapping[str, HostRoutes] | None = None,
                   kept: KeptTables | None = None,
                   place_problems: Callable[[list[Problem]], list[Problem]] | None = None) -> Model:
    """The Model of the merged Ingresses (`merged`'s problems come after `problems`), with what depends on the
    whole store: the default backend, TCP and UDP services, auth-keepalive upstreams, DH parameters,
    certificates. Problems are ordered by object (each object's in the order found), so that the order does
    not depend on how the Ingresses were grouped (incremental.py). `changed`: the hosts and backends of `merged`
    that changed since the last model (TableChanges); the backends added here beside them are always counted.
    `gateway_inputs`: the Gateway API objects and Namespaces of `store` alone (None: found in `store`). `gateway`: their
    part of the model when the caller keeps it (incremental.py), which then marks in `changed` the hosts whose Gateway
    rules changed; else built here, and all its hosts marked changed. `joined_routes`: `merged`'s routes with
    `gateway`'s laid over them (gateway.with_gateway_routes), when the caller keeps them (incremental.py): the
    model's routes as they are, never changed afterwards (layered.py). `kept`: the backends, TLS hosts and
    certificates of the last model, which the caller keeps (incremental.py) and this one changes at the keys
    `changed` names (kept_tables.py); else they are made whole. `place_problems`: when the caller keeps the Ingresses'
    problems sorted (incremental.py; then neither `problems` nor `merged` holds them), it places the others among
    them; else all are sorted here."""
    kept = KeptTables() if kept is None else kept
    problems = [*problems, *merged.problems]
    beside: dict[str, list[str]] = {}  # the backends no route names, added here
    profiles = {DEFAULT_PROFILE: LocationProfile(DEFAULT_PROFILE), **merged.profiles}
    default_certificate = settings.ingress.default_ssl_certificate
    # Made whole here unless the caller keeps it (incremental.py keeps it while nothing it read changes), from
    # `gateway_inputs` (the store's keys gateway.is_gateway_input takes) when the caller keeps them apart.
    gateway_hosts: frozenset[str] = frozenset()  # marked changed
    if gateway is None:
        gateway = build_gateway(GatewayObjects.of(store if gateway_inputs is None else gateway_inputs),
                                settings=settings, resolver=resolver, secrets=TlsSecrets(secrets, default_certificate),
                                ingress_owners=IngressOwners(merged.routes))
        gateway_hosts = frozenset(gateway.routes)
    problems.extend(gateway.problems)
    profiles.update(gateway.profiles)
    ssl_files = {**ssl_files, **gateway.ssl_files}  # BackendTLSPolicies' CAs (their profiles name them)
    beside.update(gateway.backends)
    routes = (joined_routes if joined_routes is not None else
              with_gateway_routes(merged.routes, gateway.routes, redirect_code=config.server.redirect_code,
                                  no_tls_redirect=config.server.no_tls_redirect_locations))
    # TLSRoutes pass through only hosts that no Ingress names and no HTTPS listener's route serves (docs/gateway-api.md)
    # A ChainMap looks a host up in both: a set of both tables' hosts was made at each change (O(hosts)).
    tls_routes, passthrough_problems = passthrough_beside(gateway.passthrough,
                                                          ingress_hosts=ChainMap[str, Any](merged.routes, merged.passthrough),
                                                          https_hosts=gateway.tls_secrets)
    problems.extend(passthrough_problems)
    if default_certificate and (problem := TlsSecrets(secrets, default_certificate).problem(default_certificate)):
        problems.append(Problem.warning(f"--default-ssl-certificate {default_certificate}",
                                        f"{problem}; serving the generated fake certificate instead"))
    if settings.ingress.default_backend_service:
        default = resolver.default_backend(settings.ingress.default_backend_service)
        if default.name is None:
            problems.append(Problem.warning(f"--default-backend-service {settings.ingress.default_backend_service}",
                                            f"{default.problem}; the built-in 404 answers instead"))
        else:
            beside[default.name] = list(default.endpoints)
    streams = stream_services(store, settings, resolver)
    problems.extend(streams.problems)
    gateway_ports, port_problems = ports_beside_streams(
        gateway.own_ports, (server.port for server in streams.servers if server.protocol == "tcp"))
    problems.extend(port_problems)
    for profile in profiles.values():
        if profile.external_auth and profile.external_auth.keepalive:
            # The upstream of auth-keepalive balances over this backend (a name is resolved at each push).
            beside[auth_upstream(profile.name)] = [auth_endpoint(profile.external_auth)]
    dh, server = None, config.server
    if config.ssl_dh_param:
        dh, problem = dh_param(store, config.ssl_dh_param)
        if problem:
            problems.append(Problem.error(f"ConfigMap {settings.ingress.configmap} key ssl-dh-param", problem))
        elif dh is not None:
            server = replace(server, ssl_dh_param=dh.file_name)
    if config.ssl_session_ticket_key:
        server = replace(server, ssl_session_ticket_key=ticket_key_file(config.ssl_session_ticket_key))
        ssl_files = {**ssl_files, server.ssl_session_ticket_key: config.ssl_session_ticket_key}
    if place_problems is None:
        problems.sort(key=lambda problem: problem.object)
    else:
        problems = place_problems(problems)
    # The files the profiles name, and the ticket key: those are written (an Ingress that lost all its hosts needs none).
    named = {name for profile in profiles.values() for name in files_named(profile)}
    if server.ssl_session_ticket_key:
        named.add(server.ssl_session_ticket_key)
    beside_routes = frozenset(beside)
    changed_routes = None if changed.routes is None else changed.routes | gateway_hosts
    changed_backends = None if changed.backends is None else changed.backends | beside_routes
    tls_secrets, certificates, changed_certificates = kept.tls_of(
        secrets, ingress_tls=merged.tls_secrets, gateway_tls=gateway.tls_secrets, touched=changed_routes,
        default_certificate=default_certificate)
    return Model(
        config=NginxConfig(
            http_port=settings.ports.http, https_port=settings.ports.https,
            state_dir=settings.paths.state_dir, run_dir=settings.paths.run_dir,
            profiles=[profiles[name] for name in sorted(profiles)],
            globals=dict(sorted(config.globals.items())), ssl_passthrough=settings.ingress.enable_ssl_passthrough,
            listen_ipv6=not config.disable_ipv6,  # and the machine has IPv6: syncer/main.py asks
            use_forwarded_headers=config.use_forwarded_headers, use_proxy_protocol=config.use_proxy_protocol,
            blocked=BlockLists(networks=config.block_cidrs, user_agents=config.block_user_agents,
                               referers=config.block_referers),
            request_metrics=layout_of(settings.metrics), access_log=config.access_log, server=server,
            tracing=config.tracing,
            snippet_servers=tuple(sorted(merged.snippet_servers)), stream_servers=tuple(streams.servers),
            gateway_ports=tuple(sorted(gateway_ports.items())),
            # The databases are files the syncer looks for (the model does no I/O): nginx_apply/geoip2_databases.py.
            geoip2=GeoIP2(enabled=config.use_geoip2),
        ),
        configmap_accepted=config.accepted,
        routes=routes,
        backends=kept.backends_of(merged.backends, beside, changed_backends),
        passthrough={**tls_routes, **merged.passthrough},
        stream_endpoints=streams.endpoints,
        dh_param=dh,
        tls_secrets=tls_secrets,
        auth_files=_used_files(auth_files, named),
        ssl_files=_used_files(ssl_files, named),
        certificates=certificates,
        use_proxy_protocol=config.use_proxy_protocol,
        problems=problems,
        changed=TableChanges(changed_routes, changed_backends, beside_routes, certificates=changed_certificates),
    )


class IngressOwners(Mapping[str, str]):
    """Host → the namespace of the Ingress that owns it, read from the routes when asked: made whole, this cost
    every change a pass over every host (0.1 s at 30,000 Ingresses) for the few a Gateway API route names."""

    def __init__(self, routes: Mapping[str, HostRoutes]) -> None:
        self._routes = routes

    def __getitem__(self, host: str) -> str:
        routes = self._routes.get(host)
        if routes is None or not routes.owner:
            raise KeyError(host)
        return routes.owner

    def get(self, host: str, default: str | None = None) -> str | None:  # type: ignore[override]
        # Most hosts a route names have no Ingress: answered without raising KeyError, as Mapping.get would.
        routes = self._routes.get(host)
        return routes.owner if routes is not None and routes.owner else default

    def __iter__(self) -> Iterator[str]:
        return (host for host, routes in self._routes.items() if routes.owner)

    def __len__(self) -> int:
        return sum(1 for _ in self)


def _server_settings(profile: LocationProfile) -> str | None:
    """The annotations (comma-separated) of `profile` that belong in the server block of its hosts, or None."""
    names = [name for name, value in (("server-snippet", profile.server_snippet), ("ssl-ciphers", profile.ssl_ciphers),
                                      ("ssl-prefer-server-ciphers", profile.ssl_prefer_server_ciphers))
             if value is not None]
    return ", ".join(names) or None


def _snippet_servers(plans: Iterable[IngressPlan], merger: _Merger) -> list[tuple[str, str]]:
    """(host, profile) for each routed host whose Ingresses set a server-snippet, ssl-ciphers or
    ssl-prefer-server-ciphers: the oldest one's, as in ingress-nginx; the others are warned about."""
    owners: dict[str, IngressPlan] = {}
    for plan in plans:
        settings = _server_settings(plan.profile)
        if settings is None or plan.ref not in merger.routed:
            continue
        for host in plan.hosts:
            if host == CATCH_ALL_HOST:
                merger.warn(plan, f"{settings} is ignored for its rules without a host: they are served by the "
                                  "server block every host shares; give the rule a host")
            elif not merger.owns(plan, host, settings):
                continue
            elif host in owners:
                merger.warn(plan, f"{settings} is ignored for host {host}: Ingress {owners[host].ref} (older) "
                                  f"sets the server block settings of that host ({_server_settings(owners[host].profile)})")
            elif host in merger.routes:
                owners[host] = plan
    return [(host, plan.profile.name) for host, plan in sorted(owners.items())]


def _tls_secrets(plans: Iterable[IngressPlan], *, merger: _Merger,
                 secrets: TlsSecrets) -> tuple[dict[str, str], set[str]]:
    """(routed host → the Secret that serves it, as ingress-nginx chooses it; the routed hosts served as TLS
    hosts: those with a certificate, and those an Ingress's spec.tls lists whose Secret is missing or unusable,
    which ingress-nginx still redirects to HTTPS and serves with the default certificate).

    An Ingress's spec.tls (its listed hosts, and the names in its certificates) applies only to the hosts
    of that same Ingress's rules, and only to those its namespace owns (_Merger.foreign_owner): another
    tenant's TLS section can neither turn on the redirect and HSTS for a host it does not own, even with a
    path of its own there, nor replace its certificate. Among the owner namespace's Ingresses that route a
    host, the oldest with a certificate for it wins, as for paths.
    """
    certificates: dict[str, str] = {}
    listed: set[str] = set()
    for plan in plans:
        found, problems = secrets.for_ingress(plan.namespace, plan.tls)
        for problem in problems:
            merger.warn(plan, problem)
        for entry in plan.tls:
            for host in entry.hosts:
                if not any(names_match(own, [host]) for own in plan.hosts):
                    merger.warn(plan, f"spec.tls lists {host}, which none of this Ingress's rules name; ignored "
                                      "(TLS applies only to the hosts of the same Ingress)")
        for host in plan.hosts:
            if host not in merger.routes or host == CATCH_ALL_HOST:
                continue
            secret = certificate_for(host, found)
            is_listed = any(names_match(host, list(entry.hosts)) for entry in plan.tls)
            if (secret or is_listed) and not merger.owns(plan, host, "spec.tls"):
                continue
            if secret:
                certificates.setdefault(host, secret)
            if is_listed:
                listed.add(host)
    return dict(sorted(certificates.items())), listed | certificates.keys()


def files_named(profile: LocationProfile) -> Iterator[str]:
    """The files `profile` names: its htpasswd (htdigest) file, its proxy-ssl CA and client certificate."""
    if profile.basic_auth is not None:
        yield profile.basic_auth.user_file
    if profile.backend_tls is not None:
        yield from (name for name in (profile.backend_tls.ca_file, profile.backend_tls.cert_file) if name)


def _used_files(files: Mapping[str, bytes], used: Iterable[str]) -> dict[str, bytes]:
    """The files of `files` named in `used`: one look-up per name that the profiles name, never a pass over every
    file and profile (both grow with the Ingresses: 10,000 proxy-ssl Ingresses made that 10^8 comparisons)."""
    return {name: files[name] for name in used if name in files}

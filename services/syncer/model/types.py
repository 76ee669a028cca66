"""The syncer's model: what the object store means for nginx, split by how each part reaches nginx.

- `NginxConfig` (services/nginxconf/config.py) goes into nginx.conf; a change to it is the only thing
  that reloads nginx. It holds global settings and the *location profiles*: one named location per
  distinct set of location-level settings (proxy timeouts, body size, ...), not one per Ingress path.
- `routes` (host → paths → backend and profile) and `backends` (backend → endpoints) are data pushed to
  the Lua inside nginx without a reload. Routing in Lua keeps nginx.conf small whatever the number of
  Ingresses: with the Lua module loaded, every server and location block costs nginx an SSL context and
  a configuration merge (NOTES.md: 5,000 servers take `nginx -t` 2.3-3 s and 350 MiB per process).
- `passthrough` is published to the proxy processes.
"""
from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, field
from typing import Any, Iterator, Mapping

from services.common import changed_keys
from services.common.changed_keys import ChangedKeys
from services.nginxconf import table_schema
from services.nginxconf.config import DEFAULT_PROFILE, NginxConfig

from ..annotations.base import AffinityPolicy, CanaryPolicy
from ..annotations.opentelemetry import RouteTracing
from .dh_param import DhParam
from .problems import Problem

@dataclass(frozen=True, kw_only=True)
class ClientAuth:
    """An Ingress's client-certificate check (auth-tls-*), as templates/lua/pyngress/client_auth.lua reads it."""
    ca: str  # PEM certificates
    crl: str | None
    verify: str  # "on", "off", "optional" or "optional_no_ca"
    depth: int
    error_page: str | None
    pass_certificate: bool
    match_cn: str | None  # "CN=<regex>" for the subject DN
    close: bool = False  # a refused certificate closes the connection unanswered (a Gateway's frontend validation)

    def to_json(self) -> dict[str, Any]:
        return table_schema.CLIENT_AUTH.serialise(
            ca=self.ca, crl=self.crl, verify=self.verify, depth=self.depth, error_page=self.error_page,
            pass_certificate=self.pass_certificate, match_cn=self.match_cn, close=self.close)


@dataclass(frozen=True, kw_only=True)
class CanaryRoute:
    """The canary Ingress's backend for one main route, and when a request goes to it (canary.lua)."""
    backend: str | None
    ingress: str
    policy: CanaryPolicy
    # affinity-canary-behavior of the canary Ingress, which needs no affinity of its own: with sticky (the default)
    # and affinity: cookie on the main route, a session the canary served stays on it, with the main route's
    # cookie (ingress-nginx copies the main backend's affinity to the canary); legacy: the canary backend is
    # balanced without a cookie.
    sticky: bool = False

    def to_json(self) -> dict[str, Any]:
        return table_schema.CANARY.serialise(backend=self.backend, ingress=self.ingress, **self.policy.to_json(),
                                             sticky=self.sticky)


# Route and HostRoutes have slots: the model holds one or more of each per Ingress (100,000 and more).
@dataclass(frozen=True, slots=True)
class Route:
    """Where one host+path goes. `backend` None means: answer 503 (missing Service or no such port)."""
    backend: str | None
    _: KW_ONLY
    profile: str = DEFAULT_PROFILE
    ingress: str = ""  # "namespace/name" of the Ingress this route came from, for logs and headers
    service: str = ""  # the Service's name, for the request metrics' service label
    service_port: str = ""  # its port as the Ingress names it (number or name), for error pages' X-Service-Port
    rewrite: str | None = None  # rewrite-target: the URI sent to the backend, with $1..$9 from the path's regex
    canary: CanaryRoute | None = None
    affinity: AffinityPolicy | None = None  # affinity: cookie
    hash_by: str | None = None  # upstream-hash-by: nginx variables, e.g. "$request_uri"
    default_backend: str | None = None  # default-backend: its backend, for no endpoints and error pages
    ewma: bool = False  # load-balance: ewma
    hash_subset_size: int | None = None  # upstream-hash-by-subset
    preserve_trailing_slash: bool = False  # in the redirect to HTTPS
    port_in_redirects: bool = False  # use-port-in-redirects: the redirect to HTTPS names the port, also 443
    rewrite_log: bool = False  # enable-rewrite-log: the router logs its rewrites
    tracing: RouteTracing | None = None  # enable-opentelemetry of its Ingress; None: the ConfigMap's tracing

    def to_json(self) -> dict[str, Any]:
        tracing = self.tracing
        return table_schema.ROUTE.serialise(
            backend=self.backend, profile=self.profile, ingress=self.ingress, service=self.service,
            service_port=self.service_port, rewrite=self.rewrite, canary=self.canary.to_json() if self.canary is not None else None,
            affinity=table_schema.AFFINITY.serialise(**self.affinity.to_json()) if self.affinity is not None else None,
            hash_by=self.hash_by, default_backend=self.default_backend, ewma=self.ewma,
            hash_subset_size=self.hash_subset_size, preserve_trailing_slash=self.preserve_trailing_slash,
            port_in_redirects=self.port_in_redirects, rewrite_log=self.rewrite_log,
            otel_enabled=tracing and tracing.enabled, otel_trust=tracing and tracing.trust_incoming_span,
            otel_name=tracing and tracing.operation_name)


@dataclass(kw_only=True, slots=True)
class HostRoutes:
    """The paths of one host. Exact paths match whole URIs; prefixes match whole path elements."""
    exact: dict[str, Route] = field(default_factory=dict)
    prefix: dict[str, Route] = field(default_factory=dict)
    # Unmatched paths on this host: an Ingress's spec.defaultBackend, else the controller's default (404).
    default: Route | None = None
    tls: bool = False            # the host has a certificate from spec.tls (issue: TLS termination)
    ssl_redirect: bool = True    # redirect http → https with 308 when tls
    force_ssl_redirect: bool = False
    hsts: str | None = None      # the Strict-Transport-Security value for https responses, if any
    # Ingress ("namespace/name") → its client-certificate check, for the routes that Ingress gave this host.
    client_auth: dict[str, ClientAuth] = field(default_factory=dict)
    # use-regex on any Ingress of the host: its non-Exact paths are case-insensitive regular expressions
    # anchored at the start of the URI, tried longest first.
    regex: bool = False
    app_root: str | None = None  # app-root: "/" answers 302 to this path
    app_root_owner: str = ""  # the Ingress that set app_root
    redirect_host: str | None = None  # from-to-www-redirect: this host only redirects (308) to that one
    # ConfigMap http-redirect-code and no-tls-redirect-locations, carried by the hosts that may redirect, so
    # that changing them re-pushes the routes instead of reloading nginx.
    redirect_code: int = 308
    no_tls_redirect: tuple[str, ...] = ("/.well-known/acme-challenge",)
    # Gateway API: the host's HTTPRoute rules (table_schema.GATEWAY_ROUTES, made by model/gateway/), tried before
    # the Ingress paths above.
    gateway: dict[str, Any] | None = None
    # The namespace of the host's oldest Ingress, which owns it: Gateway API routes of other namespaces do not serve
    # the host (model/gateway/tables.py). Not pushed.
    owner: str = ""

    def to_json(self) -> dict[str, Any]:
        redirects = bool(self.redirect_host or self.tls or self.force_ssl_redirect)
        return table_schema.HOST_ROUTES.serialise(
            exact={p: r.to_json() for p, r in sorted(self.exact.items())},
            # Longest first: the Lua matcher takes the first prefix (or regular expression) that matches.
            prefix=[[p, r.to_json()] for p, r in sorted(self.prefix.items(), key=lambda kv: (-len(kv[0]), kv[0]))],
            regex=self.regex, app_root=self.app_root, redirect_host=self.redirect_host,
            default=self.default.to_json() if self.default else None,
            tls=self.tls, ssl_redirect=self.ssl_redirect, force_ssl_redirect=self.force_ssl_redirect, hsts=self.hsts,
            client_auth={ref: auth.to_json() for ref, auth in sorted(self.client_auth.items())},
            redirect_code=self.redirect_code if redirects else None,
            no_tls_redirect=self.no_tls_redirect if redirects else None, gateway=self.gateway)


CATCH_ALL_HOST = "_"


@dataclass(frozen=True)
class TableChanges:
    """Which entries of a model's routes, backends and certificates may differ from the model its builder returned
    before (incremental.py), so that what pushes the tables looks at those keys only; None: any entry may."""
    routes: ChangedKeys = None
    backends: ChangedKeys = None
    # The backends no route names, which the model adds beside the routes' own (the default backend, the upstream
    # of each auth-keepalive profile): the next build marks them changed too, in case they are gone by then.
    beside_routes: frozenset[str] = frozenset()
    # The certificates table's entries, named as its delta names them: "certs/<Secret>", "hosts/<host>", "default".
    certificates: ChangedKeys = None

    def then(self, later: TableChanges) -> TableChanges:
        """The changes of this model and then of `later`, one after the other."""
        return TableChanges(changed_keys.union(self.routes, later.routes),
                            changed_keys.union(self.backends, later.backends), later.beside_routes,
                            changed_keys.union(self.certificates, later.certificates))


NOTHING_CHANGED = TableChanges(frozenset(), frozenset(), certificates=frozenset())


@dataclass(kw_only=True)
class Model:
    config: NginxConfig
    # host (lowercase, "*.x" wildcard, "_") → routes; from the incremental model, a snapshot (layered.py), never changed
    routes: Mapping[str, HostRoutes] = field(default_factory=dict)
    # backend name → ["ip:port", ...] (ready only); from the incremental model, a snapshot (layered.py), never changed
    backends: Mapping[str, list[str]] = field(default_factory=dict)
    # SNI host (exact or "*.x") → ["ip:port", ...], or the proxy's other entries (services/proxy/table.py's format)
    passthrough: dict[str, Any] = field(default_factory=dict)
    # TCP and UDP services: the backend of each stream server (NginxConfig.stream_servers) → ["ip:port", ...].
    stream_endpoints: dict[str, list[str]] = field(default_factory=dict)
    # Host with tls → "namespace/name" of the kubernetes.io/tls Secret that holds its certificate
    # (present with valid base64 tls.crt/tls.key; whoever fills `certificates` loads them from here). A snapshot too.
    tls_secrets: Mapping[str, str] = field(default_factory=dict)
    # Certificates for SNI selection inside nginx (the Lua's certificates table format; tls.py CertificatesTable).
    certificates: dict[str, Any] = field(default_factory=dict)
    # htpasswd (htdigest) file name → content, for basic (digest) authentication (nginx_apply/worker_files.py
    # writes them where nginx reads them). Password hashes: never printed, logged or published.
    auth_files: dict[str, bytes] = field(default_factory=dict, repr=False)
    # proxy-ssl-secret files nginx's master reads at load (CA, client certificate and key), by name; never printed.
    ssl_files: dict[str, bytes] = field(default_factory=dict, repr=False)
    # ConfigMap ssl-dh-param: the file NginxConfig.server.ssl_dh_param names, written before nginx loads it.
    dh_param: DhParam | None = None
    # Inbound PROXY protocol on the public ports (ConfigMap use-proxy-protocol); the proxy needs it too.
    use_proxy_protocol: bool = False
    # What was refused or ignored while building the model, each saying what to change.
    problems: list[Problem] = field(default_factory=list)
    # The controller ConfigMap's values this model took, by key (they keep applying over later bad ones).
    configmap_accepted: dict[str, str] = field(default_factory=dict)
    # The entries of routes and backends that may differ from the model built before this one; not part of what
    # the model is (a model built afresh equals one kept up to date).
    changed: TableChanges = field(default_factory=TableChanges, compare=False)

    def problem_lines(self) -> list[str]:
        """The problems as text, as logs and `pyngress render` show them."""
        return [str(p) for p in self.problems]

    def routes_json(self) -> dict[str, Any]:
        return {host: hr.to_json() for host, hr in sorted(self.routes.items())}

    def all_routes(self) -> Iterator[Route]:
        """Every route of every host (exact, prefix and the hosts' defaults)."""
        for host_routes in self.routes.values():
            yield from host_routes.exact.values()
            yield from host_routes.prefix.values()
            if host_routes.default is not None:
                yield host_routes.default

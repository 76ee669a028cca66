"""What every annotation group is made of: a validated value, a risk level, and what the values mean."""
from __future__ import annotations

import enum
import functools
from dataclasses import KW_ONLY, dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, NamedTuple

from services.nginxconf.config import (BackendScheme, BackendTls, BasicAuth, CorsPolicy, ExternalAuth, LocationProfile,
                                       Mirror, RateLimit)

if TYPE_CHECKING:
    from .auth import BasicAuthRequest
    from .proxy_ssl import BackendTlsSpec


class Risk(enum.IntEnum):
    """How much harm a hostile value could do; the ConfigMap's `annotations-risk-level` caps what is accepted."""
    LOW = 1
    MEDIUM = 2
    HIGH = 3
    CRITICAL = 4


class InvalidValue(ValueError):
    """A value outside its allow-list; the message says what to write instead."""


class InvalidAnnotation(ValueError):
    """An annotation that rejects its Ingress. `name` is the full annotation name."""

    def __init__(self, name: str, *, value: object, reason: str) -> None:
        super().__init__(f"annotation {name} value {value!r}: {reason}")
        self.name, self.value, self.reason = name, value, reason


class Scope(enum.Enum):
    """What an annotation's value applies to, whatever Ingress it is written on."""
    LOCATION = "location"  # the Ingress's paths: a location profile setting
    HOST = "host"  # every path of the Ingress's hosts (TLS redirects, passthrough): the oldest Ingress decides
    INGRESS = "ingress"  # the Ingress as a whole, whatever its hosts


@dataclass(frozen=True)
class Annotation:
    """One annotation, named without the prefix.

    `validate` returns the canonical value or raises InvalidValue. When `directive` is set, the canonical
    value goes straight into the location profile as that nginx directive; otherwise its group's `apply`
    interprets it.
    """
    name: str
    _: KW_ONLY
    validate: Callable[[str], str]
    risk: Risk
    doc: str
    directive: str | None = None
    scope: Scope = Scope.LOCATION
    # False: applied through the tables pushed to Lua (routes, backends, certificates, passthrough), so a
    # change reloads nothing. True: part of a location profile in nginx.conf, so a new combination of values
    # reloads nginx once.
    reloads: bool = True


@dataclass(frozen=True, kw_only=True)
class ClientAuthSpec:
    """One Ingress's auth-tls-* annotations (client_cert.py); the Secret is read once the Ingress is known."""
    secret_namespace: str
    secret_name: str
    verify: str  # "on", "off", "optional" or "optional_no_ca"
    depth: int
    error_page: str | None
    pass_certificate: bool
    match_cn: str | None  # "CN=<regex>"


DEFAULT_WEIGHT_TOTAL = 100


@dataclass(frozen=True, kw_only=True)
class CanaryPolicy:
    """canary-* (canary.py), as templates/lua/pyngress/canary.lua reads it."""
    header: str | None = None
    header_value: str | None = None
    header_pattern: str | None = None
    cookie: str | None = None
    weight: int = 0
    weight_total: int = DEFAULT_WEIGHT_TOTAL

    def to_json(self) -> dict[str, Any]:
        return {"header": self.header, "header_value": self.header_value, "header_pattern": self.header_pattern,
                "cookie": self.cookie, "weight": self.weight, "weight_total": self.weight_total}



@dataclass(frozen=True, kw_only=True)
class AffinityPolicy:
    """affinity: cookie (affinity.py), as templates/lua/pyngress/affinity.lua reads it."""
    cookie: str
    path: str = "/"
    max_age: int | None = None
    expires: int | None = None
    secure: bool = False
    samesite: str | None = None
    # session-cookie-conditional-samesite-none: no SameSite=None for the clients that mishandle it.
    conditional_samesite_none: bool = False
    domain: str | None = None  # session-cookie-domain
    # session-cookie-change-on-failure: a retry after the endpoint failed moves the session and its cookie.
    change_on_failure: bool = False
    # affinity-mode: balanced (endpoints added take a share of the sessions) or persistent (sessions never move).
    mode: str = "balanced"

    def to_json(self) -> dict[str, Any]:
        return {"cookie": self.cookie, "mode": self.mode, "path": self.path, "max_age": self.max_age, "expires": self.expires,
                "secure": self.secure, "samesite": self.samesite,
                **({"conditional_samesite_none": True} if self.conditional_samesite_none else {}),
                **({"domain": self.domain} if self.domain else {}),
                **({"change_on_failure": True} if self.change_on_failure else {})}


class LocationDirective(NamedTuple):
    """One nginx directive of the location profile and the annotation (without prefix) whose value it carries."""
    name: str
    value: str
    source: str


@dataclass(kw_only=True)
class IngressAnnotations:
    """What one Ingress's annotations mean once every value has passed its validator.

    The location fields (`directives`, `backend_scheme`, `cors`, `rate_limit`, `denied`, `snippet`) make the
    Ingress's LocationProfile.
    """
    prefix: str
    # Location profile directives; a directive such as `allow` may repeat.
    directives: list[LocationDirective] = field(default_factory=list)
    backend_scheme: BackendScheme = "http"
    cors: CorsPolicy | None = None
    rate_limit: RateLimit | None = None  # its zone is named per Ingress by profile_for()
    denied: tuple[str, ...] = ()  # networks answered 403, checked before an allowlist
    snippet: str | None = None
    server_snippet: str | None = None  # server-snippet: for the server blocks of the Ingress's hosts
    stream_snippet: str | None = None  # stream-snippet: for nginx's stream block
    client_auth: ClientAuthSpec | None = None  # checked per route by the router, not a profile setting
    ssl_redirect: bool | None = None  # None: the ConfigMap's ssl-redirect applies
    force_ssl_redirect: bool | None = None  # None: the ConfigMap's force-ssl-redirect applies
    ssl_passthrough: bool = False
    service_upstream: bool = False  # backends are the Services' cluster IPs, not their endpoints
    use_regex: bool = False  # use-regex or rewrite-target: the host's paths are regular expressions
    preserve_trailing_slash: bool = False  # keep it in the redirect to HTTPS
    port_in_redirects: bool = False  # use-port-in-redirects: the redirect to HTTPS names the port
    rewrite_log: bool = False  # enable-rewrite-log
    rewrite_target: str | None = None  # the URI sent to the backend, with $1..$9
    app_root: str | None = None  # "/" redirects here (302)
    canary: CanaryPolicy | None = None  # canary: "true"
    affinity: AffinityPolicy | None = None  # affinity: cookie
    affinity_canary_legacy: bool = False  # affinity-canary-behavior: legacy (on a canary Ingress)
    hash_by: str | None = None  # upstream-hash-by: nginx variables whose value picks the endpoint
    ewma: bool = False  # load-balance: ewma
    hash_subset_size: int | None = None  # upstream-hash-by-subset: the key picks a subset of this size
    from_to_www: bool = False  # from-to-www-redirect
    server_aliases: tuple[str, ...] = ()
    # proxy-ssl-*: resolved against its Secret per Ingress (services/syncer/backend_tls.py).
    backend_tls: BackendTlsSpec | None = None
    default_backend_service: str | None = None  # default-backend: a Service of the Ingress's namespace
    custom_http_errors: tuple[int, ...] | None = None  # None: the ConfigMap's list applies
    intercept_errors: bool = True  # disable-proxy-intercept-errors: false
    mirror: Mirror | None = None
    custom_headers: str | None = None  # a ConfigMap of response headers, resolved per Ingress  # server-alias: more names for the Ingress's first host
    # Resolved against its Secret per Ingress (services/syncer/auth_secrets.py) into the profile's BasicAuth.
    basic_auth: BasicAuthRequest | None = None
    external_auth: ExternalAuth | None = None
    # auth-proxy-set-headers: the ConfigMap (NAME or NAMESPACE/NAME) resolved into external_auth per Ingress.
    auth_proxy_set_headers: str | None = None
    enable_global_auth: bool = True  # whether the ConfigMap's global-auth-url applies when external_auth is None
    warnings: list[str] = field(default_factory=list)

    def add(self, directive: str, *, value: str, source: str) -> None:
        """Add a profile directive; `source` names the annotation to blame if its value cannot be rendered."""
        self.directives.append(LocationDirective(directive, value=value, source=source))

    def warn(self, name: str, message: str) -> None:
        self.warnings.append(f"annotation {self.prefix}/{name} {message}")

    @functools.cached_property  # read once parsing is done; thousands of Ingresses share one parse
    def profile(self) -> LocationProfile:
        """The location profile, without basic authentication (see profile_with)."""
        return self.profile_with(basic_auth=None, global_auth=None)

    def profile_with(self, *, basic_auth: BasicAuth | None, global_auth: ExternalAuth | None,
                     auth_headers: tuple[tuple[str, str], ...] = (), backend_tls: BackendTls | None = None,
                     response_headers: tuple[tuple[str, str], ...] = ()) -> LocationProfile:
        """The location profile with `basic_auth` (once the Secret of `self.basic_auth` is found) and the
        ConfigMap's `global_auth`, which applies unless the Ingress has its own auth-url or opts out.
        `auth_headers`: the headers of the auth-proxy-set-headers ConfigMap, for its own auth-url; `backend_tls`:
        proxy-ssl-* once its Secret is found; `response_headers`: those of its custom-headers ConfigMap."""
        external_auth = self.external_auth or (global_auth if self.enable_global_auth else None)
        if self.external_auth and auth_headers:
            external_auth = replace(self.external_auth, proxy_set_headers=auth_headers)
        return LocationProfile.of(tuple(sorted({(d.name, d.value) for d in self.directives})),
                                  backend_scheme=self.backend_scheme, cors=self.cors, denied=self.denied,
                                  snippet=self.snippet, basic_auth=basic_auth, external_auth=external_auth,
                                  server_snippet=self.server_snippet, stream_snippet=self.stream_snippet,
                                  backend_tls=backend_tls, custom_http_errors=self.custom_http_errors,
                                  pass_backend_errors=not self.intercept_errors, mirror=self.mirror,
                                  response_headers=response_headers)

    def profile_for(self, zone: str, *, basic_auth: BasicAuth | None = None, global_auth: ExternalAuth | None = None,
                    auth_headers: tuple[tuple[str, str], ...] = (), backend_tls: BackendTls | None = None,
                    response_headers: tuple[tuple[str, str], ...] = ()) -> LocationProfile:
        """The profile of the Ingress whose rate-limit zones are named `zone` (ratelimit.zone_name): the shared
        one unless the Ingress has rate limits, which it counts alone. The others as for profile_with."""
        shared = self.profile_with(basic_auth=basic_auth, global_auth=global_auth, auth_headers=auth_headers,
                                   backend_tls=backend_tls, response_headers=response_headers)
        if self.rate_limit is None:
            return shared
        return LocationProfile.of(shared.directives, backend_scheme=shared.backend_scheme, cors=shared.cors,
                                  denied=shared.denied, snippet=shared.snippet, basic_auth=shared.basic_auth,
                                  server_snippet=shared.server_snippet, stream_snippet=shared.stream_snippet,
                                  backend_tls=shared.backend_tls, custom_http_errors=shared.custom_http_errors,
                                  pass_backend_errors=shared.pass_backend_errors, mirror=shared.mirror,
                                  response_headers=shared.response_headers,
                                  external_auth=shared.external_auth, rate_limit=replace(self.rate_limit, zone=zone))

"""What every annotation group is made of: a validated value, a risk level, and what the values mean."""
from __future__ import annotations

import enum
import functools
from dataclasses import KW_ONLY, dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, Callable, NamedTuple

from services.nginxconf.config import (DEFAULT_PROFILE, BackendScheme, BackendTls, BasicAuth, CorsPolicy, ExternalAuth,
                                       LocationProfile, Mirror, ModSecurity, RateLimit)

if TYPE_CHECKING:
    from .auth import BasicAuthRequest
    from .opentelemetry import RouteTracing
    from .proxy_ssl import BackendTlsSpec


class Risk(enum.IntEnum):
    """How much harm a hostile value could do; the ConfigMap's `annotations-risk-level` caps what is accepted."""
    LOW = 1
    MEDIUM = 2
    HIGH = 3
    CRITICAL = 4


class InvalidValue(ValueError):
    """A value outside its allow-list; the message says what to write instead."""


class Unsupported(InvalidValue):
    """A value ingress-nginx takes that pyngress does not implement: the Ingress is refused, not served
    differently (docs/annotations.md lists these)."""


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


def _as_it_is(canonical: str) -> str:
    return canonical


def _nothing_skipped(value: str) -> str | None:
    return None


@dataclass(frozen=True)
class Annotation:
    """One annotation, named without the prefix: the one description of the setting it makes.

    `validate` returns the canonical value or raises InvalidValue. When `directive` is set, the annotation is
    a plain directive: `argument` writes the canonical value as that nginx directive's arguments in the
    location profile (None leaves the directive out), and the registry, its test row and the generated docs
    are all it takes (the fuzz test derives its values from `default` and the test row). Otherwise its group's
    `apply` interprets the value.
    """
    name: str
    _: KW_ONLY
    validate: Callable[[str], str]
    risk: Risk
    doc: str
    # The value that applies when the annotation is absent or set aside, as ingress-nginx documents it (where a
    # ConfigMap key of the same name exists, its value applies instead); None when there is none (or the doc says it).
    default: str | None = None
    directive: str | None = None
    argument: Callable[[str], str | None] = _as_it_is
    # For a list whose bad items ingress-nginx skips (the validator drops them): what was skipped and why, for
    # a warning, or None.
    skipped: Callable[[str], str | None] = _nothing_skipped
    scope: Scope = Scope.LOCATION
    # False: applied through the tables pushed to Lua (routes, backends, certificates, passthrough), so a
    # change reloads nothing. True: part of a location profile in nginx.conf, so a new combination of values
    # reloads nginx once.
    reloads: bool = True
    # How its behaviour differs from ingress-nginx's, and what to do about it if anything: one sentence, shown in
    # docs/annotations.md and as a NOTE by `pyngress lint` wherever it is used. None: it behaves as there.
    differs: str | None = None


# The difference of the annotations that only the namespace owning a host may set (services/syncer/model/build.py).
HOST_OWNER_ONLY = ("Taken only from Ingresses of the namespace that owns the host (its oldest Ingress's), ignored with a "
                   "warning from others; ingress-nginx merges it from any namespace's Ingress.")
# Of server-snippet, ssl-ciphers and ssl-prefer-server-ciphers, which give the Ingress's hosts a server block of their own.
SERVER_BLOCK_OWNER = ("Its hosts get a server block of their own, and the oldest Ingress of the host's namespace that "
                      "sets server-snippet, ssl-ciphers or ssl-prefer-server-ciphers gives all three, the others "
                      "warned about (ingress-nginx takes each from the oldest Ingress that sets it, of any "
                      "namespace).")


def when_true(argument: str) -> Callable[[str], str | None]:
    """The `argument` of a boolean annotation's directive: written when the value is true, left out (nginx's
    default) when false, as ingress-nginx writes such a directive."""
    return lambda canonical: argument if canonical == "true" else None


def when_false(argument: str) -> Callable[[str], str | None]:
    """As when_true, for a directive written when the value is false."""
    return lambda canonical: argument if canonical == "false" else None


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
    path: str | None = None  # session-cookie-path; None: each route's own Ingress path (affinity.route_cookie_path)
    max_age: int | None = None
    expires: int | None = None
    secure: bool = False  # session-cookie-secure: Secure over HTTP too (over HTTPS the cookie is always Secure)
    samesite: str | None = None
    # session-cookie-conditional-samesite-none: no SameSite=None for the clients that mishandle it.
    conditional_samesite_none: bool = False
    domain: str | None = None  # session-cookie-domain
    # session-cookie-change-on-failure: a retry after the endpoint failed moves the session and its cookie.
    change_on_failure: bool = False
    # affinity-mode: balanced (endpoints added take a share of the sessions) or persistent (sessions never move).
    mode: str = "balanced"

    def to_json(self) -> dict[str, Any]:
        return {"cookie": self.cookie, "mode": self.mode, "path": self.path or "/", "max_age": self.max_age, "expires": self.expires,
                "secure": self.secure, "samesite": self.samesite,
                **({"conditional_samesite_none": True} if self.conditional_samesite_none else {}),
                **({"domain": self.domain} if self.domain else {}),
                **({"change_on_failure": True} if self.change_on_failure else {})}


# The metadata of an IngressAnnotations field that is the LocationProfile setting of the same name and type, as
# the annotations give it: profile_with() copies it over. (Settings resolved per Ingress from other objects, such
# as basic_auth and backend_tls, are given to profile_with() instead.)
_PROFILE_SETTING = {"profile_setting": True}


def profile_setting(default: Any) -> Any:
    """An IngressAnnotations field that goes into the location profile as it is."""
    return field(default=default, metadata=_PROFILE_SETTING)


class LocationDirective(NamedTuple):
    """One nginx directive of the location profile and the annotation (without prefix) whose value it carries."""
    name: str
    value: str
    source: str


@dataclass(kw_only=True)
class IngressAnnotations:
    """What one Ingress's annotations mean once every value has passed its validator.

    `directives` and the fields declared with profile_setting() make the Ingress's LocationProfile, with
    what profile_with() and profile_for() resolve per Ingress.
    """
    prefix: str
    # Location profile directives; a directive such as `allow` may repeat.
    directives: list[LocationDirective] = field(default_factory=list)
    backend_scheme: BackendScheme = profile_setting("http")
    cors: CorsPolicy | None = profile_setting(None)
    rate_limit: RateLimit | None = None  # its zone is named per Ingress by profile_for()
    denied: tuple[str, ...] = profile_setting(())  # networks answered 403, checked before an allowlist
    snippet: str | None = profile_setting(None)
    server_snippet: str | None = profile_setting(None)  # server-snippet: for the server blocks of the Ingress's hosts
    # ssl-ciphers, ssl-prefer-server-ciphers: for the server blocks of the Ingress's hosts too (None: the ConfigMap's).
    ssl_ciphers: str | None = profile_setting(None)
    ssl_prefer_server_ciphers: str | None = profile_setting(None)  # "on" or "off"
    stream_snippet: str | None = profile_setting(None)  # stream-snippet: for nginx's stream block
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
    server_aliases: tuple[str, ...] = ()  # server-alias: more names for the Ingress's first host
    # proxy-ssl-*: resolved against its Secret per Ingress (services/syncer/model/backend_tls.py).
    backend_tls: BackendTlsSpec | None = None
    default_backend_service: str | None = None  # default-backend: a Service of the Ingress's namespace
    custom_http_errors: tuple[int, ...] | None = profile_setting(None)  # None: the ConfigMap's list applies
    pass_backend_errors: bool = profile_setting(False)  # disable-proxy-intercept-errors: true
    mirror: Mirror | None = profile_setting(None)
    modsecurity: ModSecurity | None = profile_setting(None)  # enable-modsecurity and its companions
    custom_headers: str | None = None  # a ConfigMap of response headers, resolved per Ingress
    # fastcgi-params-configmap (with backend-protocol FCGI): a ConfigMap of FastCGI parameters, resolved per Ingress.
    fastcgi_params_configmap: str | None = None
    # Resolved against its Secret per Ingress (services/syncer/model/auth_secrets.py) into the profile's BasicAuth.
    basic_auth: BasicAuthRequest | None = None
    external_auth: ExternalAuth | None = None
    # auth-proxy-set-headers: the ConfigMap (NAME or NAMESPACE/NAME) resolved into external_auth per Ingress.
    auth_proxy_set_headers: str | None = None
    enable_global_auth: bool = True  # whether the ConfigMap's global-auth-url applies when external_auth is None
    tracing: RouteTracing | None = None  # enable-opentelemetry and its companions; None: the ConfigMap's tracing
    warnings: list[str] = field(default_factory=list)
    # Why the Ingress's paths answer 503 (an access-control annotation with an invalid value), or None.
    denial: str | None = None

    def add(self, directive: str, *, value: str, source: str) -> None:
        """Add a profile directive; `source` names the annotation to blame if its value cannot be rendered."""
        self.directives.append(LocationDirective(directive, value=value, source=source))

    def warn(self, name: str, message: str) -> None:
        self.warnings.append(f"annotation {self.prefix}/{name} {message}")

    def deny(self, reason: str) -> None:
        """Deny the Ingress's paths (503), as ingress-nginx denies a location; the first reason is the one given."""
        self.denial = self.denial or reason

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
        profile = LocationProfile.of(tuple(sorted({(d.name, d.value) for d in self.directives})),
                                     **{name: getattr(self, name) for name in PROFILE_SETTINGS},
                                     basic_auth=basic_auth, external_auth=external_auth, backend_tls=backend_tls,
                                     response_headers=response_headers)
        # Named "default" only when it holds no setting at all (LocationProfile.of).
        return _DEFAULT_LOCATION if profile.name == DEFAULT_PROFILE else profile

    def profile_for(self, zone: str, *, basic_auth: BasicAuth | None = None, global_auth: ExternalAuth | None = None,
                    auth_headers: tuple[tuple[str, str], ...] = (), backend_tls: BackendTls | None = None,
                    response_headers: tuple[tuple[str, str], ...] = ()) -> LocationProfile:
        """The profile of the Ingress whose rate-limit zones are named `zone` (ratelimit.zone_name): the shared
        one unless the Ingress has rate limits, which it counts alone. The others as for profile_with."""
        shared = self.profile_with(basic_auth=basic_auth, global_auth=global_auth, auth_headers=auth_headers,
                                   backend_tls=backend_tls, response_headers=response_headers)
        if self.rate_limit is None:
            return shared
        return shared.with_settings(rate_limit=replace(self.rate_limit, zone=zone))


# The one profile of every Ingress without location settings: each had its own copy, about 260 bytes (26 MiB at
# 100,000 Ingresses), and one more for the rendered form nginxconf/render.py keeps in it.
_DEFAULT_LOCATION = LocationProfile(DEFAULT_PROFILE)

# The IngressAnnotations fields declared with profile_setting(), each a LocationProfile field of the same name.
PROFILE_SETTINGS = tuple(f.name for f in fields(IngressAnnotations) if f.metadata == _PROFILE_SETTING)

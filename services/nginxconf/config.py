"""What nginx.conf is made of: the global settings and the location profiles (typed, validated values).

A *location profile* is one named location (`@profile_<name>`) shared by every route with the same
location settings: routing happens in Lua, so nginx.conf holds one location per distinct profile rather
than one per Ingress path. As ingress-nginx's `Location` is typed, a profile has plain nginx directives,
written as they are, and typed fields for what the template and the Lua must interpret themselves: the
scheme to the backend, the CORS policy, the rate limits, the denied networks, a snippet, basic and
external authentication. A new annotation group that needs more than directives
adds a typed field here and its use in the template, never a sentinel key among the directives.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import KW_ONLY, asdict, dataclass, field, fields, is_dataclass, replace
from typing import Any, Literal

from services.nginxconf.geoip2 import GeoIP2
from services.nginxconf.request_metrics import RequestMetricsLayout
from services.nginxconf.tracing import TracingSettings

DEFAULT_PROFILE = "default"
# "fcgi": FastCGI (backend-protocol FCGI); "auto": the client's own scheme, http or https (AUTO_HTTP).
BackendScheme = Literal["http", "https", "grpc", "grpcs", "fcgi", "auto"]


@dataclass(frozen=True, kw_only=True)
class CorsPolicy:
    """What templates/lua/pyngress/cors.lua answers (enable-cors with the cors-* annotations, defaults in)."""
    allow_origin: str  # "*", or origins separated by commas: "https://a.example.com,https://*.example.org:8443"
    allow_methods: str  # "GET,PUT,POST"
    allow_headers: str  # "X-Api-Key,Content-Type"
    allow_credentials: bool
    max_age: int  # seconds
    expose_headers: str | None = None  # "X-Request-Id"


@dataclass(frozen=True, kw_only=True)
class RateLimit:
    """One Ingress's limit-rps/limit-rpm/limit-connections: shared-memory zones named after that Ingress.

    As in ingress-nginx the zones belong to the Ingress, not to the settings: two Ingresses with equal
    limits count their clients separately, and every path of one Ingress counts together. The key is the
    client address ($binary_remote_addr, after the real-ip rules), or none for an allowlisted client.
    """
    zone: str  # "namespace_name_uid": zone names add "_rps", "_rpm", "_conn"
    rps: int = 0  # 0: no such limit
    rpm: int = 0
    connections: int = 0
    burst_multiplier: int = 5  # burst = limit * multiplier, served without delay (nodelay)
    allowlist: tuple[str, ...] = ()  # networks ("10.0.0.0/8") never limited


@dataclass(frozen=True, kw_only=True)
class BasicAuth:
    """HTTP basic authentication (auth-type basic): nginx's auth_basic against an htpasswd file; with `digest`
    (auth-type digest), digest_auth.lua against an htdigest file.

    `user_file` is a file name in NginxPaths.auth_dir that the syncer keeps up to date: nginx reads it on
    every request (digest_auth.lua at most once a second per worker), so a changed Secret needs no reload.
    """
    realm: str
    user_file: str
    digest: bool = False


@dataclass(frozen=True, kw_only=True)
class Mirror:
    """mirror-*: every request is also sent to `target` (a URL holding at most the request's own variables),
    with Host `host`; its answer is ignored."""
    target: str
    host: str
    request_body: bool = True


@dataclass(frozen=True, kw_only=True)
class BackendTls:
    """proxy-ssl-*: TLS to the backend checked against `ca_file` and with the client certificate `cert_file`
    (certificate and key in one file), both in NginxPaths.ssl_dir, named by a digest of their content. `ca_file`
    None: the CAs the system trusts (a BackendTLSPolicy's wellKnownCACertificates: System)."""
    ca_file: str | None
    cert_file: str | None = None
    verify: str = "off"
    depth: int = 1
    ciphers: str = "DEFAULT"
    protocols: str = "TLSv1.2"
    name: str | None = None  # proxy_ssl_name; None: the template's default
    server_name: str | None = None  # "on" / "off"; None: the template's default


@dataclass(frozen=True, kw_only=True)
class AuthKeepalive:
    """auth-keepalive*: connections to the auth service are kept open (an upstream of its own, balanced over the
    addresses the syncer resolves), and the auth request is a Lua subrequest that reads the whole answer, which
    nginx's auth_request cannot do on a kept-alive connection (ingress-nginx's way too)."""
    connections: int  # idle connections kept per worker
    requests: int = 1000  # requests per connection before it is closed
    timeout: int = 60  # seconds an idle connection stays open
    share_vars: bool = False  # the subrequest shares the request's variables (so the same $request_id)


@dataclass(frozen=True, kw_only=True)
class ExternalAuth:
    """auth-url: every request is first asked of an HTTP service (nginx's auth_request).

    2xx lets the request through, with `response_headers` copied from the service's answer to the request
    to the backend; 401 and 403 go back to the client, 401 as a redirect to `signin` when it is set; any
    other answer is a 500.
    """
    url: str  # http(s)://host[:port]/path, without query or nginx variables
    method: str | None = None  # proxy_method for the auth request; None: GET
    signin: str | None = None  # may hold the variables templates/lua/pyngress/external_auth.lua expands
    signin_redirect_param: str = "rd"
    response_headers: tuple[str, ...] = ()
    request_redirect: str | None = None  # X-Auth-Request-Redirect; None: the request's URI
    always_set_cookie: bool = False
    # auth-cache-key: answers of the service are cached under this key ("$remote_user$http_authorization"),
    # within the profile, for `cache_durations` ("200 202 401 5m", ... as proxy_cache_valid takes them).
    cache_key: str | None = None
    cache_durations: tuple[str, ...] = ()
    # auth-proxy-set-headers: (name, literal value) pairs sent to the service, from a ConfigMap.
    proxy_set_headers: tuple[tuple[str, str], ...] = ()
    keepalive: AuthKeepalive | None = None
    # auth-snippet (only with allow-snippet-annotations and annotations-risk-level Critical): raw nginx
    # configuration written into the auth request's location as it is.
    snippet: str | None = None


@dataclass(frozen=True, kw_only=True)
class ModSecurity:
    """enable-modsecurity and its companions on one Ingress (services/nginxconf/modsecurity.py writes them as
    ingress-nginx's buildModSecurityForLocation does)."""
    # None: the annotation is absent, and the ConfigMap's enable-modsecurity decides.
    enabled: bool | None = None
    owasp_core_rules: bool = False  # enable-owasp-core-rules
    transaction_id: str | None = None  # an nginx variable (modsecurity.TRANSACTION_ID_VARIABLES)
    snippet: str | None = None  # ModSecurity directives (modsecurity_rules.check_rules)


@dataclass(frozen=True)
class LocationProfile:
    """Location settings shared by every route that uses this profile. Every value is validated already;
    the template still quotes each one.

    `directives`: sorted (directive, arguments) pairs, the arguments separated by single spaces
    ("proxy_buffers", "4 8k"); a directive such as `allow` may repeat.
    """
    name: str
    directives: tuple[tuple[str, str], ...] = ()
    _: KW_ONLY
    backend_scheme: BackendScheme = "http"
    cors: CorsPolicy | None = None
    rate_limit: RateLimit | None = None
    # denylist-source-range: `deny` rules written before the profile's directives, so that they come before
    # an allowlist's `allow` rules (nginx's access module stops at the first rule that matches).
    denied: tuple[str, ...] = ()
    # configuration-snippet (only with allow-snippet-annotations and annotations-risk-level Critical):
    # raw nginx configuration written into the named location as it is.
    snippet: str | None = None
    basic_auth: BasicAuth | None = None
    external_auth: ExternalAuth | None = None
    # server-snippet and stream-snippet (under the same rule as `snippet`): raw nginx configuration for the
    # server block of the Ingress's hosts (NginxConfig.snippet_servers) and for the stream block. They belong
    # to the profile so that `nginx -t` refusing one rejects only its Ingress, as for `snippet`.
    server_snippet: str | None = None
    stream_snippet: str | None = None
    backend_tls: BackendTls | None = None
    # custom-http-errors: the statuses this profile's error pages replace (None: the ConfigMap's), and with
    # disable-proxy-intercept-errors the backends' own answers pass (only nginx's errors are replaced).
    custom_http_errors: tuple[int, ...] | None = None
    pass_backend_errors: bool = False
    # An HTTPRoute rule with `retry`: nginx's own 500 and 502, when no try reached a backend's answer (connection
    # errors, a try the balancer refused), answer 503, as the Gateway API asks; a backend's own answers pass.
    unreachable_answers_503: bool = False
    mirror: Mirror | None = None
    response_headers: tuple[tuple[str, str], ...] = ()  # custom-headers: (name, literal value), every answer
    # fastcgi-params-configmap (backend-protocol FCGI): (name, value) FastCGI parameters, a value holding at most
    # the variables render.FASTCGI_VARIABLES names.
    fastcgi_params: tuple[tuple[str, str], ...] = ()
    # ssl-ciphers and ssl-prefer-server-ciphers: the TLS handshake of the Ingress's hosts, in their server block of
    # their own (NginxConfig.snippet_servers), as ingress-nginx sets them in the host's server block. None: the
    # ConfigMap's.
    ssl_ciphers: str | None = None
    ssl_prefer_server_ciphers: str | None = None  # "on" or "off"
    modsecurity: ModSecurity | None = None  # enable-modsecurity, ... (None: the ConfigMap's settings apply)

    @classmethod
    def of(cls, directives: tuple[tuple[str, str], ...] = (), **settings: Any) -> LocationProfile:
        """The profile with these settings (keyword arguments named as its fields), named "default" when it has
        none, else by a short stable hash of them. A new setting is a new field above, nothing more here."""
        profile = cls(DEFAULT_PROFILE, directives, **settings)
        content = {name: value for name, value in profile.settings().items() if value or name in _ALWAYS_IN_NAME}
        if all(not value or value == _UNSET[name] for name, value in content.items()):
            return cls(DEFAULT_PROFILE)
        named = {name: asdict(value) if is_dataclass(value) and not isinstance(value, type) else value
                 for name, value in content.items()}
        return replace(profile, name=hashlib.sha256(json.dumps(named, sort_keys=True).encode()).hexdigest()[:12])

    def settings(self) -> dict[str, Any]:
        """Every field but the name: the keyword arguments of of() that make this profile."""
        return {name: getattr(self, name) for name in _UNSET}

    def with_settings(self, **changes: Any) -> LocationProfile:
        """This profile with some settings changed, named for what it then holds."""
        return LocationProfile.of(**(self.settings() | changes))


# Each setting of a profile and its default. A setting counts in the profile's name only when it is set (not empty),
# so that the names of existing profiles stay the same as settings are added; those of the first profiles count
# always, as they did then.
_UNSET: dict[str, Any] = {f.name: f.default for f in fields(LocationProfile) if f.name != "name"}
_ALWAYS_IN_NAME = ("directives", "backend_scheme", "cors")


@dataclass(frozen=True, kw_only=True)
class BlockLists:
    """Requests refused with 403 whatever their host. User agents and referers are exact values (compared
    without case, as nginx's map does) or regular expressions written "~regex" (or "~*regex" without case)."""
    networks: tuple[str, ...] = ()  # client networks ("10.0.0.0/8")
    user_agents: tuple[str, ...] = ()
    referers: tuple[str, ...] = ()


# ingress-nginx's default log-format-upstream ("upstreaminfo"), field for field, so that log parsers keep working.
UPSTREAMINFO_FORMAT = (
    '$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" '
    '"$http_user_agent" $request_length $request_time [$proxy_upstream_name] [$proxy_alternative_upstream_name] '
    '$upstream_addr $upstream_response_length $upstream_response_time $upstream_status $req_id')


@dataclass(frozen=True)
class AccessLog:
    """The access log (ConfigMap disable-access-log, access-log-path, access-log-params, log-format-upstream,
    log-format-escape-json/-none, enable-access-log-for-default-backend)."""
    enabled: bool = True
    path: str = "/dev/stdout"
    # nginx's access_log options (buffer=, flush=, gzip). ingress-nginx writes a line per request; buffered here,
    # a line reaches stdout within a second and nginx spends about a quarter less CPU per request
    # (bench_metrics_cost.py). ConfigMap access-log-params "" writes each line at once.
    params: str = "buffer=64k flush=1s"
    format: str = UPSTREAMINFO_FORMAT
    escape: Literal["default", "json", "none"] = "default"
    default_backend: bool = False  # log the requests no Ingress takes (404 from the default backend)
    skip_urls: tuple[str, ...] = ()  # request URIs not logged (ConfigMap skip-access-log-urls)


# ingress-nginx's default log-format-stream.
STREAM_LOG_FORMAT = "[$remote_addr] [$time_local] $protocol $status $bytes_sent $bytes_received $session_time"


@dataclass(frozen=True, kw_only=True)
class ServerSettings:
    """Controller ConfigMap settings that are not one http-level directive (those are NginxConfig.globals):
    nginx's processes, the listeners, keepalive to the backends, the request id, the client address, and what
    the router's Lua reads. Defaults are ingress-nginx's."""
    worker_processes: str = "auto"
    # TCP and UDP services: their access log ("" : the HTTP access log's path), idle timeout, and the answers
    # a UDP client's datagram waits for.
    stream_log_format: str = STREAM_LOG_FORMAT
    stream_access_log_path: str = ""
    proxy_stream_timeout: str = "600s"
    proxy_stream_responses: int = 1
    # How long a client may take to send its PROXY header (use-proxy-protocol on the passthrough proxy, and the
    # TCP services that read one).
    proxy_protocol_header_timeout: str = "5s"
    worker_connections: int = 16384
    worker_rlimit_nofile: int = 0  # 0: nginx's own limit
    worker_shutdown_timeout: str = "240s"
    worker_cpu_affinity: str = ""  # "": none
    error_log_level: str = "notice"
    keepalive_connections: int = 320  # idle connections to the backends kept by each worker; 0: none
    keepalive_timeout: str = "60s"
    keepalive_requests: int = 10000
    keepalive_time: str = "1h"
    http2: bool = True
    brotli: bool = False  # enable-brotli: Debian's brotli filter module is loaded
    generate_request_id: bool = True  # false: X-Request-ID only when the client sent one
    hide_headers: tuple[str, ...] = ()  # backend response headers not passed to clients
    redirect_code: int = 308  # of the redirect to HTTPS and of from-to-www-redirect
    custom_http_errors: tuple[int, ...] = ()  # answered by the default backend (--default-backend-service)
    ssl_dh_param: str = ""  # ssl-dh-param: its file in NginxPaths.ssl_dir ("": OpenSSL's own DH groups)
    add_headers: tuple[tuple[str, str], ...] = ()  # to every client (add-headers)
    proxy_set_headers: tuple[tuple[str, str], ...] = ()  # to every backend (proxy-set-headers)
    no_tls_redirect_locations: tuple[str, ...] = ("/.well-known/acme-challenge",)
    # The client address: with use-forwarded-headers or enable-real-ip, taken from `forwarded_for_header`
    # when the connection comes from `real_ip_from`; compute-full-forwarded-for appends to the client's chain.
    forwarded_for_header: str = "X-Forwarded-For"
    compute_full_forwarded_for: bool = False
    enable_real_ip: bool = False
    real_ip_from: tuple[str, ...] = ("0.0.0.0/0",)
    # The administrator's snippets (ConfigMap main-, http-, server-, location-, stream-snippet): raw nginx
    # configuration for the main context, the http block, every server block, every location a request to an
    # Ingress goes through, and the stream block; each checked to stay inside its block. "": none.
    main_snippet: str = ""
    http_snippet: str = ""
    server_snippet: str = ""
    location_snippet: str = ""
    stream_snippet: str = ""
    # ConfigMap enable-modsecurity, enable-owasp-modsecurity-crs and modsecurity-snippet: ModSecurity for every
    # Ingress that does not turn it off (services/nginxconf/modsecurity.py).
    modsecurity: bool = False
    owasp_modsecurity_crs: bool = False
    modsecurity_snippet: str = ""
    # Logging: nginx's error log ("stderr", or a file), and with enable-syslog both logs also to
    # `syslog_server` ("host:port"; "": none). debug_connection addresses (nginx is built --with-debug).
    error_log_path: str = "stderr"
    syslog_server: str = ""
    debug_connections: tuple[str, ...] = ()
    multi_accept: bool = True  # a worker accepts every waiting connection at once
    aio_write: bool = True  # temporary files written with thread-pool AIO (aio threads)
    # The backend's own Server header reaches the client (proxy_pass_header Server).
    allow_backend_server_header: bool = False
    add_original_uri_header: bool = False  # X-Original-URI to every backend
    retry_non_idempotent: bool = False  # proxy_next_upstream's non_idempotent: POSTs are retried too
    ssl_reject_handshake: bool = False  # TLS for a name no Ingress serves is refused (no default certificate)
    ssl_session_ticket_key: str = ""  # its file in NginxPaths.ssl_dir ("": nginx's random keys per load)
    # The key of the limit-rps/-rpm/-connections zones (an nginx variable).
    limit_conn_zone_variable: str = "$binary_remote_addr"
    disable_ipv6_dns: bool = False  # the resolver of auth-url and mirror hosts asks for IPv4 addresses only
    # bind-address: the addresses listened on instead of every address of their family ("": all of them).
    bind_ipv4: tuple[str, ...] = ()
    bind_ipv6: tuple[str, ...] = ()
    enable_ocsp: bool = False  # OCSP responses stapled for the certificates served by SNI (ocsp_stapling.lua)


@dataclass(frozen=True, kw_only=True)
class StreamServer:
    """A TCP or UDP service (--tcp/udp-services-configmap): nginx's stream server on `port`, forwarding to one of
    the endpoints of `backend`, read per connection from the stream endpoints file (no reload when they move)."""
    port: int
    protocol: Literal["tcp", "udp"]
    backend: str  # the name of its endpoints in the stream endpoints file
    proxy_protocol_in: bool = False  # clients send a PROXY protocol header first
    proxy_protocol_out: bool = False  # nginx sends one to the endpoint


@dataclass(kw_only=True)
class NginxConfig:
    """Everything rendered into nginx.conf. Compared by `digest()` to decide whether to reload."""
    http_port: int
    https_port: int
    state_dir: str
    run_dir: str
    profiles: list[LocationProfile] = field(default_factory=list)
    # Global settings from the controller ConfigMap (validated, nginx directive → value).
    globals: dict[str, str] = field(default_factory=dict)
    ssl_passthrough: bool = False
    # Listen on [::] beside every IPv4 listener (two sockets, ipv6only on), as ingress-nginx does unless the
    # ConfigMap sets disable-ipv6 or the machine has no IPv6.
    listen_ipv6: bool = False
    # ConfigMap use-forwarded-headers: trust X-Forwarded-* from clients (real_ip_header X-Forwarded-For).
    use_forwarded_headers: bool = False
    # ConfigMap use-proxy-protocol: the public listeners expect a PROXY protocol header.
    use_proxy_protocol: bool = False
    # ConfigMap block-cidrs, block-user-agents, block-referers: 403 on every host, before routing.
    blocked: BlockLists = field(default_factory=lambda: BlockLists())
    # --enable-metrics: what nginx records of each request for /metrics (None: nothing).
    request_metrics: RequestMetricsLayout | None = None
    # The ConfigMap's OpenTelemetry keys, when they configure tracing (None: nginx records no spans).
    tracing: TracingSettings | None = None
    access_log: AccessLog = field(default_factory=AccessLog)
    server: ServerSettings = field(default_factory=ServerSettings)
    # (host, profile): the hosts that get a server block of their own for their profile's server_snippet, ssl_ciphers
    # and ssl_prefer_server_ciphers.
    snippet_servers: tuple[tuple[str, str], ...] = ()
    stream_servers: tuple[StreamServer, ...] = ()
    # (port, "http" | "https"): the ports Gateway listeners have to themselves, served by a server of their own.
    gateway_ports: tuple[tuple[int, str], ...] = ()
    # ConfigMap use-geoip2: the MaxMind databases nginx loads, and the $geoip2_* variables they define.
    geoip2: GeoIP2 = field(default_factory=GeoIP2)

    def digest(self) -> str:
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()

    def without_profiles(self) -> NginxConfig:
        """The global settings alone: no location profile, nor what belongs to one (its snippet servers)."""
        return replace(self, profiles=[], snippet_servers=())

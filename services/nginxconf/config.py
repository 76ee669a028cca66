"""What nginx.conf is made of: the global settings and the location profiles (typed, validated values).

A *location profile* is one named location (`@profile_<name>`) shared by every route with the same
location settings: routing happens in Lua, so nginx.conf holds one location per distinct profile rather
than one per Ingress path. As ingress-nginx's `Location` is typed, a profile has plain nginx directives,
written as they are, and typed fields for what the template and the Lua must interpret themselves: the
scheme to the backend, the CORS policy, the rate limits, the denied networks and a snippet. A new annotation group that needs more than directives
adds a typed field here and its use in the template, never a sentinel key among the directives.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import KW_ONLY, asdict, dataclass, field
from typing import Literal

DEFAULT_PROFILE = "default"
BackendScheme = Literal["http", "https", "grpc", "grpcs"]


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

    @classmethod
    def of(cls, directives: tuple[tuple[str, str], ...] = (), *, backend_scheme: BackendScheme = "http",
           cors: CorsPolicy | None = None, rate_limit: RateLimit | None = None, denied: tuple[str, ...] = (),
           snippet: str | None = None) -> LocationProfile:
        """The profile with these settings, named "default" when it has none, else by a short stable hash."""
        if not (directives or cors or rate_limit or denied or snippet) and backend_scheme == "http":
            return cls(DEFAULT_PROFILE)
        content: dict = {"directives": directives, "backend_scheme": backend_scheme, "cors": cors and asdict(cors)}
        # Newer fields count only when set, so that the names of existing profiles stay the same.
        newer = {"rate_limit": rate_limit and asdict(rate_limit), "denied": denied, "snippet": snippet}
        content.update({name: value for name, value in newer.items() if value})
        digest = hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()[:12]
        return cls(digest, directives, backend_scheme=backend_scheme, cors=cors, rate_limit=rate_limit,
                   denied=denied, snippet=snippet)


@dataclass(frozen=True, kw_only=True)
class BlockLists:
    """Requests refused with 403 whatever their host. User agents and referers are exact values (compared
    without case, as nginx's map does) or regular expressions written "~regex" (or "~*regex" without case)."""
    networks: tuple[str, ...] = ()  # client networks ("10.0.0.0/8")
    user_agents: tuple[str, ...] = ()
    referers: tuple[str, ...] = ()


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
    # ConfigMap use-forwarded-headers: trust X-Forwarded-* from clients (real_ip_header X-Forwarded-For).
    use_forwarded_headers: bool = False
    # ConfigMap use-proxy-protocol: the public listeners expect a PROXY protocol header.
    use_proxy_protocol: bool = False
    # ConfigMap block-cidrs, block-user-agents, block-referers: 403 on every host, before routing.
    blocked: BlockLists = field(default_factory=lambda: BlockLists())

    def digest(self) -> str:
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()

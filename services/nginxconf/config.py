"""What nginx.conf is made of: the global settings and the location profiles (typed, validated values).

A *location profile* is one named location (`@profile_<name>`) shared by every route with the same
location settings: routing happens in Lua, so nginx.conf holds one location per distinct profile rather
than one per Ingress path. As ingress-nginx's `Location` is typed, a profile has plain nginx directives,
written as they are, and typed fields for what the template and the Lua must interpret themselves: the
scheme to the backend and the CORS policy so far. A new annotation group that needs more than directives
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

    @classmethod
    def of(cls, directives: tuple[tuple[str, str], ...] = (), *, backend_scheme: BackendScheme = "http",
           cors: CorsPolicy | None = None) -> LocationProfile:
        """The profile with these settings, named "default" when it has none, else by a short stable hash."""
        if not directives and backend_scheme == "http" and cors is None:
            return cls(DEFAULT_PROFILE)
        content = {"directives": directives, "backend_scheme": backend_scheme, "cors": cors and asdict(cors)}
        digest = hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()[:12]
        return cls(digest, directives, backend_scheme=backend_scheme, cors=cors)


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

    def digest(self) -> str:
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()

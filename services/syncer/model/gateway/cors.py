"""The HTTPRoute CORS filter read and validated: allowed origins, methods, headers, credentials, max age.

gateway_cors.lua answers the preflights and adds the headers from this; every value is table data, never nginx.conf
text, and each passes the pattern of the CRD (an API server would have refused the object; manifests mode refuses it
here) so that what reaches a response header is an origin, a method or a header name and nothing else.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from services.nginxconf import table_schema

from . import fields
from .fields import RouteRejected

# The CRD's CORSOrigin: "*", or scheme://host[:port] where the host may start with "*." or be "*".
_ORIGIN = re.compile(r"(?P<scheme>https?)://(?P<host>(?:\*\.)?(?:[a-zA-Z0-9-]+\.)*[a-zA-Z0-9-]+|\*)"
                     r"(?::(?P<port>[0-9]{1,5}))?")
_DEFAULT_PORTS = {"http": 80, "https": 443}
DEFAULT_MAX_AGE = 5  # seconds, the spec's default


@dataclass(frozen=True)
class Origin:
    """An allowed origin: `host` is a name, "*.suffix" (any number of labels before the suffix) or "*" (any)."""
    scheme: str
    host: str
    port: int


@dataclass(frozen=True)
class CorsPolicy:
    any_origin: bool
    origins: tuple[Origin, ...]
    methods: tuple[str, ...]  # ("*",): the requested one
    headers: tuple[str, ...]  # ("*",): the requested ones
    expose: tuple[str, ...]
    credentials: bool
    max_age: int


def cors_policy(raw: dict[str, Any], *, where: str) -> CorsPolicy:
    """A CORS filter's `cors` object; raise RouteRejected saying what to change."""
    origins = [_origin(o, where=f"{where}.allowOrigins") for o in
               fields.listing(raw.get("allowOrigins"), where=f"{where}.allowOrigins", most=64)]
    methods = tuple(dict.fromkeys(_method(m, where=f"{where}.allowMethods") for m in
                                  fields.listing(raw.get("allowMethods"), where=f"{where}.allowMethods", most=9)))
    headers = _header_names(raw.get("allowHeaders"), where=f"{where}.allowHeaders")
    expose = _header_names(raw.get("exposeHeaders"), where=f"{where}.exposeHeaders")
    for name, values in (("allowOrigins", origins), ("allowMethods", methods), ("allowHeaders", headers)):
        if "*" in values and len(values) > 1:
            raise RouteRejected(f"{where}.{name}: '*' cannot be given alongside other values")
    credentials = raw.get("allowCredentials", False)
    if not isinstance(credentials, bool):
        raise RouteRejected(f"{where}.allowCredentials: {credentials!r} must be true or false")
    max_age = raw.get("maxAge", DEFAULT_MAX_AGE)
    if isinstance(max_age, bool) or not isinstance(max_age, int) or not 1 <= max_age <= 2**31 - 1:
        raise RouteRejected(f"{where}.maxAge: {max_age!r} must be a number of seconds, at least 1")
    return CorsPolicy(any_origin="*" in origins, origins=tuple(o for o in origins if isinstance(o, Origin)),
                      methods=methods, headers=headers, expose=expose, credentials=credentials, max_age=max_age)


def _origin(value: Any, *, where: str) -> Origin | str:
    found = _ORIGIN.fullmatch(value) if isinstance(value, str) and len(value) <= 253 else None
    if value == "*":
        return "*"
    if found is None:
        raise RouteRejected(f"{where}: origin {value!r:.80} must be '*' or scheme://host[:port] such as "
                            "https://app.example.com or https://*.example.com:8443")
    scheme, port = found["scheme"], found["port"]
    number = int(port) if port is not None else _DEFAULT_PORTS[scheme]
    if not 0 < number < 65536:
        raise RouteRejected(f"{where}: origin {value!r}: port {number} must be 1-65535")
    return Origin(scheme=scheme, host=found["host"].lower(), port=number)


def _method(value: Any, *, where: str) -> str:
    return "*" if value == "*" else fields.method(value, where=where)


def _header_names(raw: Any, *, where: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys("*" if name == "*" else fields.header_name(name, where=where)
                               for name in fields.listing(raw, where=where, most=64)))


def cors_json(policy: CorsPolicy) -> dict[str, Any]:
    """The policy as gateway_cors.lua reads it (table_schema.GATEWAY_CORS)."""
    return table_schema.GATEWAY_CORS.serialise(
        any_origin=policy.any_origin, methods=policy.methods, headers=policy.headers, expose=policy.expose,
        credentials=policy.credentials, max_age=policy.max_age,
        origins=tuple(table_schema.GATEWAY_CORS_ORIGIN.serialise(scheme=o.scheme, host=o.host, port=o.port)
                      for o in policy.origins))

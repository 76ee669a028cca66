"""enable-cors and the cors-* annotations: answer preflights and add CORS headers in the location."""
from __future__ import annotations

import re
from typing import Callable, Mapping

from services.nginxconf.config import CorsPolicy

from .base import Annotation, IngressAnnotations, InvalidValue, Risk
from .validators import HOSTNAME, PORT, boolean, integer, is_true

# ingress-nginx's defaults, so that migrated Ingresses behave the same.
DEFAULT_METHODS = "GET,PUT,POST,DELETE,PATCH,OPTIONS"
DEFAULT_HEADERS = ("DNT,Keep-Alive,User-Agent,X-Requested-With,If-Modified-Since,Cache-Control,Content-Type,"
                   "Range,Authorization")
DEFAULT_MAX_AGE = "1728000"

_ORIGIN = re.compile(rf"https?://(?:\*\.)?{HOSTNAME}(?::{PORT})?")
_ORIGIN_HINT = "origins such as https://app.example.com, https://*.example.com:8443 (port 1-65535) or *"
_METHOD = re.compile(r"[A-Za-z]{1,20}")
_HEADER = re.compile(r"[A-Za-z0-9_-]{1,100}|\*")


def _items(value: str) -> list[str]:
    """The items of a comma-separated list, as ingress-nginx reads them: blanks around items and empty items
    (a trailing comma) do not count."""
    return [item for part in value.split(",") if (item := part.strip())]


def _comma_list(item: re.Pattern[str], what: str) -> Callable[[str], str]:
    """A comma-separated list whose items each match `item` → "a,b,c" without duplicates (one nginx argument)."""
    def validate(value: str) -> str:
        items = _items(value)
        if not items or not all(item.fullmatch(part) for part in items):
            raise InvalidValue(f"must be a comma-separated list of {what}")
        return ",".join(dict.fromkeys(items))
    return validate


def _origins(value: str) -> str:
    """cors-allow-origin as ingress-nginx reads it: "*" anywhere in the list allows every origin; an item that
    is not an http(s) origin (a bare host:port, tauri://...) is skipped (see _skipped_origins)."""
    items = _items(value)
    if "*" in items:
        return "*"
    origins = [item for item in items if _ORIGIN.fullmatch(item)]
    if not origins:
        raise InvalidValue(f"must be a comma-separated list of {_ORIGIN_HINT}")
    return ",".join(dict.fromkeys(origins))


def _skipped_origins(value: str) -> str | None:
    items = _items(value)
    skipped = [] if "*" in items else [item for item in items if not _ORIGIN.fullmatch(item)]
    if not skipped or len(skipped) == len(items):  # none skipped, or the whole value is ignored
        return None
    return f"{', '.join(map(repr, skipped))} skipped: not {_ORIGIN_HINT}"


ANNOTATIONS = (
    Annotation("enable-cors", validate=boolean, risk=Risk.LOW, default="false",
               doc="Add CORS headers and answer preflight requests."),
    Annotation("cors-allow-origin", validate=_origins, skipped=_skipped_origins, risk=Risk.LOW,
               doc='Allowed origins (default "*"); an item that is not an http(s) origin is skipped.'),
    Annotation("cors-allow-methods", validate=_comma_list(_METHOD, "HTTP methods such as GET, POST"),
               risk=Risk.LOW, doc=f'Access-Control-Allow-Methods (default "{DEFAULT_METHODS}").'),
    Annotation("cors-allow-headers", validate=_comma_list(_HEADER, "header names such as X-Api-Key, Content-Type"),
               risk=Risk.LOW, doc="Access-Control-Allow-Headers (default: ingress-nginx's list)."),
    Annotation("cors-expose-headers", validate=_comma_list(_HEADER, "header names such as X-Request-Id"),
               risk=Risk.LOW, doc="Access-Control-Expose-Headers (default: none)."),
    Annotation("cors-allow-credentials", validate=boolean, risk=Risk.LOW, default="true",
               doc="Access-Control-Allow-Credentials (default true)."),
    Annotation("cors-max-age", validate=integer(0, 2**31 - 1), risk=Risk.LOW, default="1728000",
               doc=f"Access-Control-Max-Age in seconds (default {DEFAULT_MAX_AGE})."),
)

_OPTIONS = tuple(a.name for a in ANNOTATIONS if a.name != "enable-cors")


def apply(values: Mapping[str, str], parsed: IngressAnnotations) -> None:
    if not is_true(values.get("enable-cors", "false")):
        for name in _OPTIONS:
            if name in values:
                parsed.warn(name, "has no effect without enable-cors: \"true\"; ignored")
        return
    parsed.cors = CorsPolicy(
        allow_origin=values.get("cors-allow-origin", "*"),
        allow_methods=values.get("cors-allow-methods", DEFAULT_METHODS),
        allow_headers=values.get("cors-allow-headers", DEFAULT_HEADERS),
        allow_credentials=is_true(values.get("cors-allow-credentials", "true")),
        max_age=int(values.get("cors-max-age", DEFAULT_MAX_AGE)),
        expose_headers=values.get("cors-expose-headers"),
    )

"""Validators for the Gateway API values that reach nginx or Lua: each raises RouteRejected saying what to change.

The patterns are the Gateway API CRDs' own where they exist (an API server would have refused the object), and
regular expressions are compiled by the PCRE that nginx's Lua runs them with (services/nginxconf/pcre.py).
"""
from __future__ import annotations

import re
from typing import Any

from ...annotations.base import InvalidValue
from ...annotations.validators import pcre_regex
from .reasons import Reason


class RouteRejected(ValueError):
    """A field of a Gateway API object that cannot be served; the message says which and what to change, `reason`
    the Gateway API condition reason status.py writes for it (None: the spec names none)."""

    def __init__(self, message: str, *, reason: Reason | None = None) -> None:
        super().__init__(message)
        self.reason = reason


_LABEL = r"[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?"
_HOSTNAME = re.compile(rf"(?:\*\.)?{_LABEL}(?:\.{_LABEL})*")
# RFC 7230 token: header and query parameter names.
_TOKEN = re.compile(r"[A-Za-z0-9!#$%&'*+\-.^_`|~]{1,256}")
# A header value as HTTP/1.1 carries it: visible characters, spaces and tabs, no line breaks.
_HEADER_VALUE = re.compile(r"[\x20-\x7e\t]{0,4096}")
# The path characters the router takes as plain text (RFC 3986 path characters minus quotes and ';').
_PATH = re.compile(r"/[A-Za-z0-9\-._~%!$&()*+,=:@/]{0,1023}")
_MAX_REGEX = 1024
_NAME = re.compile(rf"(?=.{{1,253}}$){_LABEL}(?:\.{_LABEL})*")
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"})
# Gateway API Duration (GEP-2257): up to four number+unit parts.
_DURATION = re.compile(r"(?:[0-9]{1,5}(?:h|m|s|ms)){1,4}")


def hostname(value: Any, *, where: str) -> str:
    """A host name, or a wildcard "*.example.com", lower-cased; no IP addresses."""
    lowered = value.lower() if isinstance(value, str) and value.isascii() else ""
    if len(lowered) > 253 or not _HOSTNAME.fullmatch(lowered) or lowered.replace(".", "").isdigit():
        raise RouteRejected(f"{where}: hostname {value!r} must be a DNS name such as app.example.com or "
                            "*.example.com")
    return lowered


def precise_hostname(value: Any, *, where: str) -> str:
    """A host name without a wildcard (redirects and rewrites)."""
    name = hostname(value, where=where)
    if name.startswith("*."):
        raise RouteRejected(f"{where}: hostname {value!r} must not be a wildcard")
    return name


def header_name(value: Any, *, where: str) -> str:
    if not isinstance(value, str) or not _TOKEN.fullmatch(value):
        raise RouteRejected(f"{where}: header name {value!r} must be an HTTP token (letters, digits and "
                            "!#$%&'*+-.^_`|~), at most 256 characters")
    return value


# Headers that frame the message or the connection: a route changing them could make nginx read a request body, or
# a client read a response, other than as it was sent.
_FRAMING_HEADERS = frozenset({"content-length", "transfer-encoding", "connection", "keep-alive", "upgrade", "te",
                              "trailer", "proxy-connection"})


def changeable_header(value: Any, *, where: str) -> str:
    """A header a RequestHeaderModifier or ResponseHeaderModifier may set, add or remove."""
    name = header_name(value, where=where)
    if name.lower() in _FRAMING_HEADERS:
        raise RouteRejected(f"{where}: header {name} frames the message and cannot be changed by a route")
    return name


def header_value(value: Any, *, where: str) -> str:
    if not isinstance(value, str) or not _HEADER_VALUE.fullmatch(value):
        raise RouteRejected(f"{where}: header value {value!r:.80} must be printable text without line breaks, "
                            "at most 4096 characters")
    return value


def query_name(value: Any, *, where: str) -> str:
    if not isinstance(value, str) or not _TOKEN.fullmatch(value):
        raise RouteRejected(f"{where}: query parameter name {value!r} must be letters, digits and "
                            "!#$%&'*+-.^_`|~, at most 256 characters")
    return value


def path(value: Any, *, where: str) -> str:
    """A plain path: starts with "/", RFC 3986 path characters only."""
    if not isinstance(value, str) or not _PATH.fullmatch(value) or "//" in value:
        raise RouteRejected(f"{where}: path {value!r} must start with / and hold only letters, digits and "
                            "-._~%!$&()*+,=:@/ (no //), at most 1024 characters")
    return value


def regex(value: Any, *, where: str, full: bool) -> str:
    """A PCRE as gateway.lua runs it: anchored at the start, and (`full`) at the end too."""
    if not isinstance(value, str) or not value or len(value) > _MAX_REGEX or "\n" in value or "\x00" in value:
        raise RouteRejected(f"{where}: a regular expression must be 1-{_MAX_REGEX} characters on one line")
    try:
        pcre_regex(f"(?:{value})$" if full else value, anchored=full)
    except InvalidValue as err:
        raise RouteRejected(f"{where}: {err}") from None
    return value


def method(value: Any, *, where: str) -> str:
    if value not in METHODS:
        raise RouteRejected(f"{where}: method {value!r} must be one of {', '.join(sorted(METHODS))}")
    return str(value)


def port(value: Any, *, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 65536:
        raise RouteRejected(f"{where}: port {value!r} must be 1-65535")
    return value


def object_name(value: Any, *, where: str) -> str:
    if not isinstance(value, str) or not _NAME.fullmatch(value):
        raise RouteRejected(f"{where}: name {value!r} must be a Kubernetes object name such as my-service")
    return value


def duration(value: Any, *, where: str) -> str:
    """A Gateway API duration as nginx's time syntax takes it ("1h30m", "500ms")."""
    if not isinstance(value, str) or not _DURATION.fullmatch(value):
        raise RouteRejected(f"{where}: duration {value!r} must be like 10s, 500ms or 1h30m")
    return value


def mapping(value: Any, *, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise RouteRejected(f"{where} must be an object")
    return value


def listing(value: Any, *, where: str, most: int | None = None) -> list[Any]:
    """A list; `most`: its longest, the CRD's maxItems (an API server refuses longer ones, manifests mode here)."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise RouteRejected(f"{where} must be a list")
    if most is not None and len(value) > most:
        raise RouteRejected(f"{where}: {len(value)} items, the Gateway API allows at most {most}")
    return value

"""use-regex, rewrite-target and app-root, with ingress-nginx's meaning:
- use-regex "true": the Ingress's ImplementationSpecific paths are regular expressions; then every
  non-Exact path of the same host (whatever Ingress it comes from) is matched as a case-insensitive regular
  expression anchored at the start of the URI, longest first (ingress-nginx's `location ~* "^<path>"`);
- rewrite-target: the URI sent to the backend, with $1..$9 from the path's capture groups; it implies
  use-regex for its host;
- app-root: a request for "/" on the Ingress's hosts is redirected (302) to this path;
- x-forwarded-prefix: sent to the backend as the X-Forwarded-Prefix header (the part a rewrite took away).
Matching and rewriting happen in Lua (router.lua) from the pushed routes table: no reload."""
from __future__ import annotations

import re
from typing import Mapping

from .base import Annotation, HOST_OWNER_ONLY, IngressAnnotations, InvalidValue, Risk, Scope
from .validators import boolean, is_true

# Characters of a URI path (RFC 3986 pchar and "/"), and $1..$9 for the capture groups.
_REWRITE = re.compile(r"/(?:[A-Za-z0-9\-._~!&'()*+,;=:@/%]|\$[0-9])*")
_APP_ROOT = re.compile(r"/[A-Za-z0-9\-._~!&'()*+,;=:@/%]*")
MAX_LENGTH = 1024


def rewrite_target(value: str) -> str:
    if len(value) > MAX_LENGTH or not _REWRITE.fullmatch(value):
        raise InvalidValue("must be a URI path starting with / with $1..$9 for the path's capture groups, such as "
                           "/$2 or /api/$1; '$' is allowed only before a digit")
    return value


def app_root(value: str) -> str:
    if len(value) > MAX_LENGTH or not _APP_ROOT.fullmatch(value) or value == "/":
        raise InvalidValue("must be a path other than / such as /app (no scheme, host or nginx variables)")
    return value


def forwarded_prefix(value: str) -> str:
    """A path, or "" for no header at all (as ingress-nginx sends none for an empty value)."""
    if len(value) > MAX_LENGTH or (value and not _APP_ROOT.fullmatch(value)):
        raise InvalidValue("must be a path such as /api (no scheme, host, spaces or nginx variables)")
    return value


ANNOTATIONS = (
    Annotation("use-regex", reloads=False, validate=boolean, risk=Risk.LOW, default="false", scope=Scope.HOST,
               doc="ImplementationSpecific paths are regular expressions; every path of the host is then matched "
                   "as a case-insensitive regular expression.",
               differs=HOST_OWNER_ONLY),
    Annotation("rewrite-target", reloads=False, validate=rewrite_target, risk=Risk.MEDIUM,
               doc="The URI sent to the backend, with $1..$9 from the path's capture groups (implies use-regex)."),
    Annotation("app-root", reloads=False, validate=app_root, risk=Risk.LOW, scope=Scope.HOST,
               doc="Redirect (302) requests for / to this path.",
               differs=HOST_OWNER_ONLY),
    Annotation("x-forwarded-prefix", validate=forwarded_prefix, risk=Risk.LOW,
               doc="The X-Forwarded-Prefix header sent to the backend (none when empty)."),
    Annotation("preserve-trailing-slash", reloads=False, validate=boolean, risk=Risk.LOW,
               doc="Keep a trailing slash of the URI in the redirect to HTTPS (ingress-nginx drops it)."),
    Annotation("enable-rewrite-log", reloads=False, validate=boolean, risk=Risk.LOW, default="false",
               doc="Log each rewrite-target rewrite (old and new URI) to the error log, at notice level."),
)


def apply(values: Mapping[str, str], parsed: IngressAnnotations) -> None:
    parsed.use_regex = is_true(values.get("use-regex", "false")) or "rewrite-target" in values
    parsed.rewrite_target = values.get("rewrite-target")
    parsed.preserve_trailing_slash = is_true(values.get("preserve-trailing-slash", "false"))
    parsed.rewrite_log = is_true(values.get("enable-rewrite-log", "false"))
    parsed.app_root = values.get("app-root")
    if values.get("x-forwarded-prefix"):
        parsed.add("proxy_set_header", value=f"X-Forwarded-Prefix {values['x-forwarded-prefix']}",
                   source="x-forwarded-prefix")

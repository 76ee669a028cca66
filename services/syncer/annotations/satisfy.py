"""satisfy: whether a request must pass every access check of the Ingress's paths (all, nginx's default) or one
of them (any): the allow- and deny-lists, basic authentication and auth-url, as nginx's `satisfy` directive
combines its access modules. Digest authentication and auth-url with auth-keepalive, checked in Lua at the end
of nginx's access phase, count as one check each: under `any` an earlier check that passes skips them, and
their passing lets the request through.

As ingress-nginx, the value is "any" or "all", trimmed and in lower case. The annotation controls access: an
invalid value denies the paths (access_control.py), never loosens them.
"""
from __future__ import annotations

from .base import Annotation, InvalidValue, Risk


def _satisfy(value: str) -> str:
    trimmed = value.strip()
    if trimmed not in ("any", "all"):
        raise InvalidValue("must be any or all")
    return trimmed


ANNOTATIONS = (
    Annotation("satisfy", validate=_satisfy, risk=Risk.LOW, default="all", directive="satisfy",
               doc="all (default): a request must pass every access check of the paths (allow- and deny-lists, "
                   "authentication); any: one of them is enough.",
               differs="An invalid value makes the paths answer 503, as any access-control annotation's "
                       "(ingress-nginx ignores it and nginx's all applies); with any, digest authentication and "
                       "auth-url with auth-keepalive are one Lua check, in that order, so a refused digest answer "
                       "ends it."),
)

"""from-to-www-redirect: requests for the other spelling of an Ingress's host (www.example.com for example.com,
and the reverse) are redirected (308) to the host the Ingress names, keeping scheme, port and URI, as
ingress-nginx does; skipped, with a warning, when another Ingress routes that other spelling. Done by the
router from the routes table (no reload); on HTTPS the host's certificate serves the other spelling when it
names it."""
from __future__ import annotations

from typing import Mapping

from .base import Annotation, HOST_OWNER_ONLY, IngressAnnotations, Risk, Scope
from .validators import boolean, is_true

ANNOTATIONS = (
    Annotation("from-to-www-redirect", reloads=False, validate=boolean, risk=Risk.LOW, scope=Scope.HOST,
               default="false",
               doc="Redirect (308) www.<host> to <host>, or <host> to www.<host> when the Ingress names the www one.",
               differs=HOST_OWNER_ONLY),
)


def apply(values: Mapping[str, str], parsed: IngressAnnotations) -> None:
    parsed.from_to_www = is_true(values.get("from-to-www-redirect", "false"))


def other_spelling(host: str) -> str | None:
    """www.example.com <-> example.com; None for hosts without one (wildcards, the catch-all, bare names)."""
    if host.startswith("*") or host == "_" or "." not in host:
        return None
    return host[4:] if host.startswith("www.") and host.count(".") > 1 else "www." + host

"""Snippet annotations: raw nginx configuration from an Ingress. Always rejected.

A snippet lets whoever may edit an Ingress run any nginx directive (read files, proxy anywhere, leak
other tenants' secrets: CVE-2021-25742, CVE-2025-1974); ingress-nginx disables them by default too.
"""
from __future__ import annotations

from .base import Annotation, InvalidValue, Risk


def _refuse(value: str) -> str:
    raise InvalidValue("snippets are disabled in pyngress (they are raw nginx configuration); remove it and "
                       "use the dedicated annotations instead")


ANNOTATIONS = tuple(
    Annotation(name, validate=_refuse, risk=Risk.CRITICAL, doc="Raw nginx configuration: always rejected.")
    for name in ("configuration-snippet", "server-snippet", "auth-snippet", "stream-snippet",
                 "modsecurity-snippet")
)

"""Fail closed: access-control annotations pyngress does not implement refuse their Ingress.

An Ingress that was protected behind ingress-nginx's basic auth, external auth or ModSecurity (or a name of
the client-certificate, rate-limit or deny-list families that pyngress does not know) must never be served
open because pyngress ignores the annotation.
This rule covers every name of those families, also ones ingress-nginx adds later. An annotation of them
that pyngress does implement, given an invalid value, denies the Ingress's paths (503) instead, as
ingress-nginx denies such a location (annotations/__init__.py).
"""
from __future__ import annotations

_FAMILIES = ("auth-", "limit-", "denylist-", "blacklist-", "modsecurity-")
_NAMES = frozenset({"satisfy", "enable-modsecurity", "enable-owasp-core-rules", "allowlist-source-range",
                    "whitelist-source-range"})


def is_access_control(name: str) -> bool:
    """Whether the annotation `name` (without the prefix) restricts who may reach the backend."""
    return name in _NAMES or name.startswith(_FAMILIES)


REFUSAL = ("controls access, and pyngress does not implement it yet: the Ingress is refused rather than served "
           "without that protection; remove the annotation only if the backend needs no such protection")

"""backend-protocol: how nginx talks to the backend. Only HTTP and HTTPS are supported so far."""
from __future__ import annotations

from typing import Mapping

from .base import Annotation, IngressAnnotations, InvalidValue, Risk

# Protocols ingress-nginx knows that pyngress's template does not proxy yet.
_NOT_YET = frozenset({"GRPC", "GRPCS", "AUTO_HTTP", "AJP", "FCGI"})


def _protocol(value: str) -> str:
    upper = value.upper()
    if upper in ("HTTP", "HTTPS"):
        return upper
    if upper in _NOT_YET:
        raise InvalidValue(f"{upper} backends are not supported by pyngress yet; use HTTP or HTTPS")
    raise InvalidValue("must be HTTP or HTTPS")


ANNOTATIONS = (
    Annotation("backend-protocol", validate=_protocol, risk=Risk.LOW,
               doc="HTTP (default) or HTTPS to the backend."),
)


def apply(values: Mapping[str, str], parsed: IngressAnnotations) -> None:
    # HTTP is the default and emits nothing, so such Ingresses share the default profile.
    if values.get("backend-protocol") == "HTTPS":
        parsed.backend_scheme = "https"

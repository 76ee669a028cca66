"""backend-protocol: how nginx talks to the backend: HTTP, HTTPS, or gRPC over HTTP/2 (GRPC cleartext, GRPCS
with TLS). AUTO_HTTP, AJP and FCGI are refused: pyngress does not proxy them."""
from __future__ import annotations

from typing import Mapping

from .base import Annotation, IngressAnnotations, InvalidValue, Risk, Unsupported

# Protocols ingress-nginx knows that pyngress's template does not proxy yet.
_NOT_YET = frozenset({"AUTO_HTTP", "AJP", "FCGI"})
_SCHEMES = {"HTTP": "http", "HTTPS": "https", "GRPC": "grpc", "GRPCS": "grpcs"}


def _protocol(value: str) -> str:
    upper = value.upper()
    if upper in _SCHEMES:
        return upper
    if upper in _NOT_YET:
        raise Unsupported(f"{upper} backends are not supported by pyngress; use HTTP, HTTPS, GRPC or GRPCS")
    raise InvalidValue("must be HTTP, HTTPS, GRPC or GRPCS")


ANNOTATIONS = (
    Annotation("backend-protocol", validate=_protocol, risk=Risk.LOW, default="HTTP",
               doc="HTTP (default), HTTPS, GRPC or GRPCS to the backend."),
)


def apply(values: Mapping[str, str], parsed: IngressAnnotations) -> None:
    # HTTP is the default and emits nothing, so such Ingresses share the default profile.
    if "backend-protocol" in values:
        parsed.backend_scheme = _SCHEMES[values["backend-protocol"]]  # type: ignore[assignment]

"""A Service port's `appProtocol` as the way an HTTPRoute rule speaks to its backends (the Gateway API's
HTTPRouteBackendProtocolH2C and HTTPRouteBackendProtocolWebSocket).

- `kubernetes.io/h2c`: HTTP/2 without TLS, with prior knowledge. nginx 1.22's proxy module speaks only HTTP/1.x to a
  backend; its gRPC module speaks HTTP/2 cleartext and carries any request, whatever the client spoke (HTTP/1.1 or
  HTTP/2 over TLS), so these backends are reached through grpc_pass, as GRPCRoutes and the backend-protocol GRPC
  annotation reach theirs. No Upgrade reaches such a backend (HTTP/2 has none).
- `kubernetes.io/ws`: HTTP/1.1, which passes a WebSocket upgrade (every HTTP/1.1 backend does, whatever its
  appProtocol); `kubernetes.io/wss`: the same over TLS.
- anything else, or none: HTTP/1.1.

One location profile speaks one protocol, so a rule speaks one: when its backends' ports name different ones, the
rule speaks HTTP/1.1 to all of them and says so in a warning.
"""
from __future__ import annotations

from typing import Iterable

from services.nginxconf.config import BackendScheme

SCHEMES: dict[str, BackendScheme] = {"kubernetes.io/h2c": "grpc", "kubernetes.io/ws": "http",
                                     "kubernetes.io/wss": "https"}


def rule_scheme(app_protocols: Iterable[str | None], *, where: str) -> tuple[BackendScheme, str | None]:
    """The scheme a rule's backends (the appProtocols of their ports) are spoken to in, and a warning when they do
    not agree."""
    named = {protocol or "none": SCHEMES.get(protocol or "", "http") for protocol in app_protocols}
    schemes = set(named.values())
    if len(schemes) <= 1:
        return (schemes.pop() if schemes else "http"), None
    return "http", (f"{where}: its backends' ports name appProtocols spoken differently ({', '.join(sorted(named))});"
                    " a rule speaks one protocol, HTTP/1.1 to all of them: give each protocol a rule of its own")

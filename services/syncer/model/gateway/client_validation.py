"""A Gateway's spec.tls.frontend → the client-certificate check of each HTTPS listener, on the Ingresses' mechanism.

`frontend.perPort` (the entry whose port is the listener's) else `frontend.default` gives a listener its
validation: caCertificateRefs (ca_bundles.py) and a mode. All hosts share one nginx TLS server, so, as for an
Ingress's auth-tls-* (templates/lua/pyngress/client_auth.lua), the handshake asks for a certificate for the SNI of a
host with a check, and the router verifies it against the host's CA before a Gateway rule serves the request.
AllowValidOnly refuses a request without a certificate the CA signed by closing the connection, unanswered (the
conformance suite counts an answer, even a 400, as served); AllowInsecureFallback asks and verifies but lets every
request through (the Gateway says so in its InsecureFrontendValidationMode condition).

A reference that does not resolve refuses the listener (Accepted False, NoValidCACertificate; ResolvedRefs False with
the reference's reason): stricter than the spec, which serves with the references that do resolve when some do.
"""
from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, Mapping

from ..types import ClientAuth
from .ca_bundles import ca_bundle
from .fields import RouteRejected
from .objects import GATEWAY_GROUP
from .reasons import Reason
from .reference_grants import ReferenceGrants

if TYPE_CHECKING:
    from .listeners import Listener

INSECURE_FALLBACK = "AllowInsecureFallback"
VERIFY_DEPTH = 3  # intermediate CAs a client's chain may hold (the spec leaves the depth to the implementation)
_MODES = {"AllowValidOnly": "on", INSECURE_FALLBACK: "optional_no_ca"}


class ValidationRejected(RouteRejected):
    """A listener refused for its client-certificate validation: not accepted (`reason` NoValidCACertificate), its
    ResolvedRefs False for `refs_reason`."""

    def __init__(self, message: str, *, refs_reason: Reason) -> None:
        super().__init__(message, reason=Reason.NO_VALID_CA_CERTIFICATE)
        self.refs_reason = refs_reason


def _port_config(gateway_spec: Mapping[str, Any], port: int) -> Mapping[str, Any] | None:
    """The TLSConfig that applies to an HTTPS listener on `port`: its perPort entry, else the default."""
    tls = gateway_spec.get("tls")
    frontend = tls.get("frontend") if isinstance(tls, dict) else None
    if not isinstance(frontend, dict):
        return None
    for entry in frontend.get("perPort") or ():
        if isinstance(entry, dict) and entry.get("port") == port:
            return entry.get("tls") if isinstance(entry.get("tls"), dict) else None
    default = frontend.get("default")
    return default if isinstance(default, dict) else None


def client_validation(gateway_spec: Mapping[str, Any], *, namespace: str, port: int, where: str,
                      config_maps: Mapping[tuple[str, str], Mapping[str, Any]],
                      grants: ReferenceGrants) -> ClientAuth | None:
    """The check of an HTTPS listener on `port` of a Gateway in `namespace`, None when it has none. Raises
    RouteRejected when its references do not resolve or its mode is unknown."""
    config = _port_config(gateway_spec, port)
    validation = config.get("validation") if config is not None else None
    if not isinstance(validation, dict):
        return None
    at = f"{where} client certificate validation (spec.tls.frontend, port {port})"
    mode = validation.get("mode") or "AllowValidOnly"
    if mode not in _MODES:
        raise RouteRejected(f"{at}: mode {mode!r} must be AllowValidOnly or {INSECURE_FALLBACK}")
    bundle = ca_bundle(validation.get("caCertificateRefs"), namespace=namespace, where=at, config_maps=config_maps,
                       source=(GATEWAY_GROUP, "Gateway"), grants=grants)
    if bundle.problems or bundle.pem is None:
        found = "; ".join(problem.message for problem in bundle.problems) or f"{at}: caCertificateRefs names nothing"
        raise ValidationRejected(f"{found}; the listener is refused rather than served without the check (reason "
                                 "NoValidCACertificate)", refs_reason=bundle.problems[0].reason if bundle.problems
                                 else Reason.INVALID_CA_CERTIFICATE_REF)
    return ClientAuth(ca=bundle.pem, crl=None, verify=_MODES[mode], depth=VERIFY_DEPTH, error_page=None,
                      pass_certificate=False, match_cn=None, close=True)


def with_client_validation(listener: Listener, gateway: Mapping[str, Any], *,
                           config_maps: Mapping[tuple[str, str], Mapping[str, Any]],
                           grants: ReferenceGrants) -> Listener:
    """`listener` of `gateway` with its client-certificate check when it is an HTTPS listener; raises
    ValidationRejected when the check's references do not resolve."""
    if listener.scheme != "https":
        return listener
    check = client_validation(gateway.get("spec") or {}, namespace=listener.gateway_namespace, port=listener.port,
                              where=f"listener {listener.name}", config_maps=config_maps, grants=grants)
    return replace(listener, client_validation=check) if check is not None else listener


def insecure_fallback_ports(gateway_spec: Mapping[str, Any]) -> list[str]:
    """Where the Gateway lets requests through without a valid client certificate: "default" and "port N" entries
    in AllowInsecureFallback mode (the Gateway's InsecureFrontendValidationMode condition)."""
    tls = gateway_spec.get("tls")
    frontend = tls.get("frontend") if isinstance(tls, dict) else None
    if not isinstance(frontend, dict):
        return []
    configs = [("default", frontend.get("default"))] + [
        (f"port {entry.get('port')}", entry.get("tls")) for entry in frontend.get("perPort") or ()
        if isinstance(entry, dict)]
    return [name for name, config in configs if isinstance(config, dict)
            and isinstance(config.get("validation"), dict) and config["validation"].get("mode") == INSECURE_FALLBACK]



def host_validation(validations: list[ClientAuth | None]) -> ClientAuth | None:
    """The check of a host's Gateway rules over TLS, from those of the HTTPS listeners serving it (in the order they
    are served): when they differ, the strictest (AllowValidOnly before AllowInsecureFallback, then the first),
    never none while one of them asks for one (docs/gateway-api.md)."""
    checks = [check for check in validations if check is not None]
    return min(checks, key=lambda check: check.verify != "on", default=None)

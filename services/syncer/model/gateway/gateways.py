"""What a GatewayClass or a Gateway as a whole asks of pyngress beside its listeners: parameters and addresses.

pyngress takes no parameters: a GatewayClass with spec.parametersRef, and a Gateway with
spec.infrastructure.parametersRef or of such a class, are not accepted (reason InvalidParameters) and the Gateway's
listeners are not served. spec.infrastructure's labels and annotations are ignored: pyngress creates no resource per
Gateway to put them on.

A Gateway is served on the controller's own addresses, those of the Ingress status (--publish-status-address,
--publish-service or the node). spec.addresses may name them, of type IPAddress or Hostname: another type is not
accepted (UnsupportedAddress, the Gateway not served); an address the controller does not have makes the Gateway
Programmed False (AddressNotUsable) while its listeners are still served on the controller's addresses, since nginx
listens on all of them and no address can be added; an entry without a value takes the controller's addresses of its
type (AddressNotAssigned when it has none). status.addresses lists the usable addresses asked for, else all of the
controller's.
"""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from .reasons import Reason

_ADDRESS_TYPES = ("IPAddress", "Hostname")


@dataclass(frozen=True)
class Refusal:
    """Why a GatewayClass or a Gateway is not accepted, or a Gateway not programmed."""
    reason: Reason
    message: str


def class_refusal(gateway_class: Mapping[str, Any]) -> Refusal | None:
    """Why one of our GatewayClasses is not accepted; None when it is."""
    ref = (gateway_class.get("spec") or {}).get("parametersRef")
    if not ref:
        return None
    return Refusal(Reason.INVALID_PARAMETERS, f"spec.parametersRef {_named(ref)}: pyngress takes no parameters "
                                              "(reason InvalidParameters); remove spec.parametersRef")


def gateway_refusal(gateway: Mapping[str, Any], gateway_class: Mapping[str, Any] | None) -> Refusal | None:
    """Why a Gateway of one of our classes is not accepted, its listeners not served; None when it is accepted."""
    if gateway_class is not None and (refused := class_refusal(gateway_class)):
        name = (gateway_class.get("metadata") or {}).get("name")
        return Refusal(refused.reason, f"its GatewayClass {name} is not accepted: {refused.message}")
    spec = gateway.get("spec") or {}
    infrastructure = spec.get("infrastructure")
    ref = infrastructure.get("parametersRef") if isinstance(infrastructure, dict) else None
    if ref:
        return Refusal(Reason.INVALID_PARAMETERS, f"spec.infrastructure.parametersRef {_named(ref)}: pyngress takes "
                                                  "no parameters (reason InvalidParameters); remove it")
    for index, address in enumerate(_listing(spec.get("addresses"))):
        kind = (address.get("type") or "IPAddress") if isinstance(address, dict) else None
        if kind not in _ADDRESS_TYPES:
            return Refusal(Reason.UNSUPPORTED_ADDRESS, f"spec.addresses[{index}]: type {kind!r} is not supported "
                                                       "(reason UnsupportedAddress); use IPAddress or Hostname")
    return None


@dataclass(frozen=True)
class Addresses:
    """A Gateway's status.addresses, and why it is not programmed on the addresses it asks for (None: it is)."""
    shown: list[dict[str, str]]
    refusal: Refusal | None = None


def gateway_addresses(gateway: Mapping[str, Any], controller: Iterable[Mapping[str, str]]) -> Addresses:
    """The addresses of `controller` (status.addresses entries: type, value) a Gateway is served on, as it asks."""
    ours = [dict(address) for address in controller]
    asked = [a for a in _listing((gateway.get("spec") or {}).get("addresses")) if isinstance(a, dict)]
    if not asked:
        return Addresses(ours)
    shown: list[dict[str, str]] = []
    refusals: list[Refusal] = []
    for index, address in enumerate(asked):
        kind, value = address.get("type") or "IPAddress", address.get("value")
        if not value:
            found = [a for a in ours if a["type"] == kind]
            if not found:
                refusals.append(Refusal(Reason.ADDRESS_NOT_ASSIGNED, (
                    f"spec.addresses[{index}]: the controller has no {kind} address to assign (reason "
                    "AddressNotAssigned); give it one with --publish-status-address or --publish-service")))
        else:
            found = [a for a in ours if a["type"] == kind and _same(kind, a["value"], str(value))]
            if not found:
                have = ", ".join(a["value"] for a in ours) or "none"
                refusals.append(Refusal(Reason.ADDRESS_NOT_USABLE, (
                    f"spec.addresses[{index}]: {value} is not an address of the controller (reason "
                    f"AddressNotUsable); it has {have}: ask for one of them or remove the address")))
        shown += [a for a in found if a not in shown]
    return Addresses(shown, refusals[0] if refusals else None)


def _same(kind: str, ours: str, asked: str) -> bool:
    if kind == "Hostname":
        return ours.lower() == asked.lower()
    try:
        return ipaddress.ip_address(ours) == ipaddress.ip_address(asked)
    except ValueError:
        return False


def _named(ref: Any) -> str:
    if not isinstance(ref, dict):
        return repr(ref)
    return f"{ref.get('kind')} ({ref.get('group') or 'core'}) {ref.get('name')}"


def _listing(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []

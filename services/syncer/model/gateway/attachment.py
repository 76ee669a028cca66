"""Which listeners an HTTPRoute attaches to, and for which host names.

A parentRef names a Gateway, and optionally one listener (sectionName) or port; the route attaches to each
listener it names that allows routes from its namespace (allowedRoutes.namespaces) and whose hostname intersects
the route's hostnames as the spec defines it: equal names, or one a wildcard covering the other, in which case the
more specific of the two is served. A route without hostnames takes the listener's; a listener without a hostname
takes the route's; with neither, the route serves any host ("_"). So a route never serves a host name its listener
does not allow.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

from ..types import CATCH_ALL_HOST
from .httproutes import ParentRef, RoutePlan
from .listeners import Listener
from .reasons import NOT_ATTACHED_ORDER, Reason


@dataclass(frozen=True)
class Attachment:
    listener: Listener
    hosts: tuple[str, ...]  # lower case, "*.example.com" wildcards, or "_" for any host


@dataclass(frozen=True)
class Refusal:
    """Why a parentRef naming one of our Gateways attached to none of its listeners, and the reason its status names
    (of the listeners' reasons, the first in the spec's order)."""
    message: str
    reason: Reason


def intersection(listener: str | None, route: str) -> str | None:
    """The host names both a listener's hostname and a route's hostname take, as one name; None when none."""
    if listener is None or route == listener:
        return route
    if listener.startswith("*."):
        if route.endswith(listener[1:]):
            return route  # also a longer wildcard: the more specific one
        if route.startswith("*.") and listener.endswith(route[1:]):
            return listener
        return None
    if route.startswith("*.") and listener.endswith(route[1:]):
        return listener
    return None


def attach(plan: RoutePlan, *, listeners: list[Listener], our_gateways: frozenset[str],
           labels_of: Callable[[str], Mapping[str, str]]) -> tuple[list[Attachment], list[Refusal]]:
    """The listeners `plan` attaches to, and why each parentRef naming one of our Gateways ("namespace/name")
    attached to none."""
    attachments: list[Attachment] = []
    refusals: list[Refusal] = []
    for parent in plan.parents:
        candidates = [listener for listener in listeners if _names(parent, listener)]
        if not candidates:
            if f"{parent.namespace}/{parent.name}" in our_gateways:
                refusals.append(Refusal(f"not attached to Gateway {parent.namespace}/{parent.name}: it has no "
                                        f"served listener named {parent.section or 'any'} on port "
                                        f"{parent.port or 'any'} (reason NoMatchingParent)", Reason.NO_MATCHING_PARENT))
            continue  # not one of our Gateways: another controller's business
        found = False
        reasons: dict[str, Reason] = {}  # message → its reason
        for listener in candidates:
            if not listener.namespaces.allows(plan.namespace, gateway_namespace=listener.gateway_namespace,
                                              labels=labels_of(plan.namespace)):
                reasons[f"{listener.where} does not allow routes from namespace {plan.namespace} "
                        "(reason NotAllowedByListeners)"] = Reason.NOT_ALLOWED_BY_LISTENERS
                continue
            hosts = _hosts(plan.hostnames, listener.hostname)
            if not hosts:
                reasons[f"no hostname of the route is within {listener.where}'s hostname {listener.hostname} "
                        "(reason NoMatchingListenerHostname)"] = Reason.NO_MATCHING_LISTENER_HOSTNAME
                continue
            found = True
            attachments.append(Attachment(listener, hosts))
        if not found:
            refusals.append(Refusal(f"not attached to Gateway {parent.namespace}/{parent.name}: "
                                    + "; ".join(sorted(reasons)),
                                    min(reasons.values(), key=NOT_ATTACHED_ORDER.index)))
    return attachments, refusals


def _names(parent: ParentRef, listener: Listener) -> bool:
    return (listener.gateway == f"{parent.namespace}/{parent.name}"
            and parent.section in (None, listener.name) and parent.port in (None, listener.port))


def _hosts(route_hosts: tuple[str, ...], listener_host: str | None) -> tuple[str, ...]:
    if not route_hosts:
        return (listener_host or CATCH_ALL_HOST,)
    return tuple(dict.fromkeys(host for name in route_hosts if (host := intersection(listener_host, name))))

"""Each listener of one of our Gateways as its status tells it: served, refused and why, in conflict with another,
or taking routes while serving none (an HTTPS listener whose certificate does not resolve: the spec counts its
routes in attachedRoutes and accepts them, but the host is not served without its certificate).

A listener the model serves on a port of its own is still refused (PortUnavailable) when nginx does not listen on that
port: a TCP service of --tcp-services-configmap has it, or another program on the node does (the syncer learns that
as it applies: nginx_apply/taken_ports.py); so is one beyond the ports of their own pyngress serves (MAX_OWN_PORTS)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from services.common.settings import Settings

from ..tls import TlsSecrets
from .client_validation import with_client_validation
from .conflicts import Conflict, listener_conflicts
from .fields import RouteRejected
from .listeners import Listener, _listener, beyond_own_ports, port_unavailable, protocol_conflict
from .reasons import UNRESOLVED_CERTIFICATE
from .reference_grants import ReferenceGrants


@dataclass(frozen=True)
class ListenerVerdict:
    raw: dict[str, Any]
    name: str
    served: Listener | None = None
    rejected: RouteRejected | None = None  # why it is not served, when it is not valid
    conflict: Conflict | None = None
    unprogrammed: Listener | None = None  # takes routes, serves none: its certificate does not resolve

    @property
    def attachable(self) -> Listener | None:
        """The listener routes attach to and are counted on, served or not."""
        return self.served or self.unprogrammed


def listener_verdicts(gateway: Mapping[str, Any], *, namespace: str, name: str, refused: bool,
                      served: Mapping[tuple[str, str], Listener], served_list: list[Listener],
                      settings: Settings, grants: ReferenceGrants, secrets: TlsSecrets,
                      config_maps: Mapping[tuple[str, str], Mapping[str, Any]],
                      unavailable_ports: Mapping[int, str]) -> list[ListenerVerdict]:
    """The verdicts on a Gateway's listeners, in its order; `refused`: the Gateway is not accepted as a whole, so
    none of its listeners takes routes. `config_maps`: those its client-certificate validation may name.
    `unavailable_ports`: the ports of their own that nginx does not listen on, with why and what to do."""
    raws = (gateway.get("spec") or {}).get("listeners") or ()
    conflicts = listener_conflicts(raws)
    verdicts: list[ListenerVerdict] = []
    for index, raw in enumerate(raws):
        section = raw.get("name") if isinstance(raw, dict) else None
        if not isinstance(section, str) or any(v.name == section for v in verdicts):
            continue  # the CRD refuses both; status.listeners is keyed by name
        listener = served.get((f"{namespace}/{name}", section))
        if listener is not None and listener.own_port is not None and (
                why := unavailable_ports.get(listener.own_port)) is not None:
            verdicts.append(ListenerVerdict(raw, section, rejected=port_unavailable(listener, why)))
            continue
        if listener is not None:
            verdicts.append(ListenerVerdict(raw, section, served=listener))
            continue
        conflict, unprogrammed, rejected = conflicts.get(index), None, None
        try:
            parsed = with_client_validation(
                _listener(raw, namespace=namespace, name=name, index=index, settings=settings, grants=grants,
                          secrets=secrets), gateway, config_maps=config_maps, grants=grants)
        except RouteRejected as err:
            rejected = err
            if not refused and conflict is None and err.reason in UNRESOLVED_CERTIFICATE:
                unprogrammed = _without_certificate(raw, namespace=namespace, name=name, index=index,
                                                    settings=settings, grants=grants)
        else:
            if not refused and conflict is None:  # another Gateway's listener has its port with the other protocol
                conflict = protocol_conflict(parsed, served_list)
            if not refused and conflict is None:
                rejected = beyond_own_ports(parsed, served_list)
        verdicts.append(ListenerVerdict(raw, section, rejected=rejected, conflict=conflict, unprogrammed=unprogrammed))
    return verdicts


def _without_certificate(raw: Any, *, namespace: str, name: str, index: int, settings: Settings,
                         grants: ReferenceGrants) -> Listener | None:
    """The listener as routes attach to it, its certificate aside; None when it is also wrong otherwise."""
    try:
        return _listener(raw, namespace=namespace, name=name, index=index, settings=settings, grants=grants,
                         secrets=None)
    except RouteRejected:
        return None

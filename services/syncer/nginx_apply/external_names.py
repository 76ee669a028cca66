"""Backends whose endpoints are host names (ExternalName Services) resolved to addresses when they are pushed:
nginx's Lua balancer takes addresses only, and a name's addresses may change between two model builds.
A name that resolves to this node itself is left out again here (the model refuses such names written out).
"""
from __future__ import annotations

import asyncio
import functools
import ipaddress
import logging
import socket
from typing import Iterable, Mapping

from services.common import logs
from services.syncer.model.backends import forbidden_address

log = logging.getLogger("syncer")


class NameIndex:
    """The backends whose endpoints include host names (ExternalName Services), kept from one push to the next: a
    push looks again only at the backends it is told changed, not at every endpoint of every backend."""

    def __init__(self) -> None:
        self._named: dict[str, tuple[str, ...]] = {}  # backend → its host-name endpoints (those with any)

    def update(self, backends: Mapping[str, list[str]], changed: Iterable[str] | None) -> dict[str, tuple[str, ...]]:
        """The named backends of `backends`, which differs from the last call's only at `changed` (None: anywhere)."""
        if changed is None:
            self._named, changed = {}, backends
        for backend in changed:
            names = tuple(endpoint for endpoint in backends.get(backend, ()) if _is_name(endpoint))
            if names:
                self._named[backend] = names
            else:
                self._named.pop(backend, None)
        return self._named


async def resolve_backends(backends: dict[str, list[str]], index: NameIndex | None = None,
                           changed: Iterable[str] | None = None) -> tuple[dict[str, list[str]], frozenset[str]]:
    """Backends with host-name endpoints (ExternalName Services) resolved to addresses, and the names of those
    backends (their addresses may change at any push). `index` and `changed`: see NameIndex.update.

    The Lua balancer takes addresses only. A name that does not resolve is left out and logged; the
    backend answers 503 if nothing else is left.
    """
    named = (index or NameIndex()).update(backends, changed)
    if not named:
        return backends, frozenset()
    names = {name for endpoint_names in named.values() for name in endpoint_names}
    resolved = dict(zip(names, await asyncio.gather(*(_resolve(endpoint) for endpoint in names))))
    out = dict(backends)
    for backend in named:
        out[backend] = [address for endpoint in backends[backend] for address in resolved.get(endpoint, [endpoint])]
    return out, frozenset(named)


def _split_endpoint(endpoint: str) -> tuple[str, str]:
    host, _, port = endpoint.rpartition(":")
    return host.removeprefix("[").removesuffix("]"), port


@functools.lru_cache(maxsize=1 << 16)  # every push looks at every endpoint of every backend
def _is_name(endpoint: str) -> bool:
    host, _ = _split_endpoint(endpoint)
    try:
        ipaddress.ip_address(host)
        return False
    except ValueError:
        return True


async def _resolve(endpoint: str) -> list[str]:
    host, port = _split_endpoint(endpoint)
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, int(port), type=socket.SOCK_STREAM)
    except (OSError, ValueError) as err:
        log.warning("endpoint left out: its name does not resolve", extra=logs.kv(endpoint=endpoint, error=str(err)))
        return []
    addresses = []
    for family, _, _, _, sockaddr in infos:
        ip, ip_port = str(sockaddr[0]), int(sockaddr[1])  # an IPv4 or IPv6 socket address: (ip, port, ...)
        if forbidden_address(ip):
            # The model refuses such names written out; one that only resolves to the node itself (a DNS
            # record pointing at 127.0.0.1, say) must not reach the controller's own ports either.
            log.warning("endpoint address left out: the name resolves to the node itself",
                        extra=logs.kv(endpoint=endpoint, address=ip))
            continue
        address = f"[{ip}]:{ip_port}" if family == socket.AF_INET6 else f"{ip}:{ip_port}"
        if address not in addresses:
            addresses.append(address)
    return addresses

"""The passthrough routing table the syncer publishes (clone pattern), as the proxy looks it up.

Keys: `host/<sni-lowercase>` → ["ip:port", ...] (IPv6 as "[addr]:port") for each ssl-passthrough
host, and `config` → {"use_proxy_protocol": bool, "proxy_protocol_header_timeout": seconds, "listen_ipv6": bool}. Values are validated here, once per change, so that
the per-connection lookup is a dict access; a bad entry is logged and left out, the rest applies.
"""
from __future__ import annotations

import ipaddress
import logging
from typing import Any

from services.common.clone import Snapshot, Update
from services.common.logs import kv

log = logging.getLogger(__name__)

HOST_PREFIX = "host/"
CONFIG_KEY = "config"

Endpoint = tuple[str, int]


class EndpointError(ValueError):
    """An endpoint that is not "ip:port"."""


def parse_endpoint(text: Any) -> Endpoint:
    """"10.0.0.1:8443" or "[fd00::1]:8443" → (address, port)."""
    if not isinstance(text, str):
        raise EndpointError(f"endpoint must be a string 'ip:port', got {type(text).__name__}")
    host, sep, port_text = text.rpartition(":")
    if not sep:
        raise EndpointError(f"endpoint {text!r} has no port; expected 'ip:port' or '[ipv6]:port'")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise EndpointError(f"IPv6 endpoint {text!r} must be written '[address]:port'")
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        raise EndpointError(f"endpoint {text!r} does not start with an IP address") from None
    if not (port_text.isascii() and port_text.isdigit()) or not 0 < int(port_text) < 65536:
        raise EndpointError(f"endpoint {text!r} has no valid port (1-65535)")
    return str(address), int(port_text)


# ingress-nginx's proxy-protocol-header-timeout default.
DEFAULT_PROXY_HEADER_TIMEOUT = 5.0


class RoutingTable:
    """SNI host → passthrough endpoints, plus whether inbound connections carry a PROXY header."""

    def __init__(self) -> None:
        self._hosts: dict[str, tuple[Endpoint, ...]] = {}
        self._turn: dict[str, int] = {}
        self.use_proxy_protocol = False
        self.listen_ipv6 = True  # ingress-nginx's default (no disable-ipv6)
        self.proxy_header_timeout = DEFAULT_PROXY_HEADER_TIMEOUT  # seconds a client has to send its PROXY header
        self.changes = 0  # how many snapshots/updates were applied, for the status file

    def __len__(self) -> int:
        return len(self._hosts)

    def apply(self, event: Snapshot | Update) -> None:
        if isinstance(event, Snapshot):
            # Built aside, then swapped in: the proxy's connection thread looks hosts up meanwhile.
            fresh = RoutingTable()
            for key, value in event.state.items():
                fresh._set(key, value)
            self._hosts = fresh._hosts
            self.use_proxy_protocol, self.proxy_header_timeout = fresh.use_proxy_protocol, fresh.proxy_header_timeout
            self.listen_ipv6 = fresh.listen_ipv6
        else:
            self._set(event.key, event.value)
        self.changes += 1

    def endpoints_for(self, server_name: str) -> tuple[Endpoint, ...] | None:
        """The endpoints to try in order (round robin: each call starts one further along), or None
        when `server_name` is not a passthrough host. An empty tuple: a passthrough host without any."""
        endpoints = self._hosts.get(server_name)
        if endpoints is None or len(endpoints) < 2:
            return endpoints
        turn = self._turn.get(server_name, 0) % len(endpoints)
        self._turn[server_name] = turn + 1
        return endpoints[turn:] + endpoints[:turn]

    def _set(self, key: str, value: Any) -> None:
        if key == CONFIG_KEY:
            self._set_config(value)
        elif key.startswith(HOST_PREFIX):
            self._set_host(key[len(HOST_PREFIX):].lower(), value)
        else:
            log.warning("ignoring unknown passthrough table key", extra=kv(key=key))

    def _set_config(self, value: Any) -> None:
        flag = value.get("use_proxy_protocol", False) if isinstance(value, dict) else None
        timeout = value.get("proxy_protocol_header_timeout", DEFAULT_PROXY_HEADER_TIMEOUT) \
            if isinstance(value, dict) else DEFAULT_PROXY_HEADER_TIMEOUT
        if value is not None and (not isinstance(flag, bool) or isinstance(timeout, bool)
                                  or not isinstance(timeout, (int, float)) or not 0 < timeout <= 3600):
            log.warning("passthrough config must be {'use_proxy_protocol': bool, 'proxy_protocol_header_timeout': "
                        "seconds (0-3600)}; using false and 5", extra=kv(value=value))
            flag, timeout = False, DEFAULT_PROXY_HEADER_TIMEOUT
        self.use_proxy_protocol = flag is True
        self.proxy_header_timeout = float(timeout)
        ipv6 = value.get("listen_ipv6", True) if isinstance(value, dict) else True
        self.listen_ipv6 = ipv6 is not False

    def _set_host(self, host: str, value: Any) -> None:
        if value is None:
            self._hosts.pop(host, None)
            self._turn.pop(host, None)
            return
        if not isinstance(value, list):
            log.warning("passthrough endpoints must be a list of 'ip:port'; host gets none",
                        extra=kv(host=host, value=value))
            value = []
        endpoints = []
        for item in value:
            try:
                endpoints.append(parse_endpoint(item))
            except EndpointError as err:
                log.warning("ignoring passthrough endpoint", extra=kv(host=host, error=err))
        self._hosts[host] = tuple(endpoints)

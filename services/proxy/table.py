"""The passthrough routing table the syncer publishes (clone pattern), as the proxy looks it up.

Keys: `config` → {"use_proxy_protocol": bool, "proxy_protocol_header_timeout": seconds, "listen_ipv6": bool}, and
`host/<sni>` for each host whose TLS connections the proxy handles itself rather than hand to nginx. `<sni>` is
lowercase, an exact name or a wildcard `*.example.com` (any name ending in `.example.com`, as the Gateway API's
wildcards: one label or more). Its value is one of:
- ["ip:port", ...] (IPv6 as "[addr]:port"): passed through, untouched, to these endpoints (ssl-passthrough
  Ingresses, a TLSRoute with one backend);
- {"backends": [{"weight": int > 0, "endpoints": ["ip:port", ...]}, ...], "terminate": {"cert": PEM, "key": PEM}}:
  each connection goes to one backend chosen by weight (a TLSRoute's backendRefs); with "terminate", TLS ends here
  with that certificate and the plain stream goes to the backend (a TLS listener in Terminate mode); a backend
  with "tls": {"ca": PEM or null (the CAs the system trusts), "name": host name} gets that stream over TLS, its
  certificate verified against those CAs for that name, which is also the SNI (its BackendTLSPolicy). The CAs
  come as PEM text, never as a file name: the table's values come from tenants' objects;
- "nginx": to nginx although a wildcard above covers it (a host an Ingress or an HTTPS listener serves).
The most specific name wins: the exact name, then the longest wildcard.

Values are validated here, once per change, so that the per-connection lookup is a dict access (one more per
label of the name when the table holds wildcards and the exact name misses); a bad entry is logged and left out,
the rest applies.
"""
from __future__ import annotations

import ipaddress
import logging
import os
import ssl
from functools import reduce
from math import gcd
from typing import Any

from services.common.clone import Snapshot, Update
from services.common.logs import kv

log = logging.getLogger(__name__)

HOST_PREFIX = "host/"
CONFIG_KEY = "config"
TO_NGINX = "nginx"  # a host's value: handed to nginx, whatever wildcard covers it

Endpoint = tuple[str, int]

# A weighted choice is a precomputed schedule of backend indices, cycled one step per connection: exact
# proportions, one tuple index per connection. Weights (0-1,000,000 in the Gateway API) reduced by their greatest
# common divisor; past this length, scaled down to it (proportions to 0.1%).
MAX_SCHEDULE = 1000


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


class BackendTls:
    """TLS from the proxy to a backend: the client context that verifies its certificate, and the name it must
    hold (sent as SNI too)."""

    __slots__ = ("context", "server_name")

    def __init__(self, context: ssl.SSLContext, server_name: str) -> None:
        self.context, self.server_name = context, server_name


class Destination:
    """Where one host's connections go: backends (each a group of endpoints) chosen by weight, and the TLS
    context when TLS ends in the proxy (None: passed through), with each backend's TLS (None: plain)."""

    __slots__ = ("backends", "schedule", "step", "turns", "tls", "backend_tls", "chosen")

    def __init__(self, backends: tuple[tuple[Endpoint, ...], ...], weights: tuple[int, ...],
                 tls: ssl.SSLContext | None = None,
                 backend_tls: tuple[BackendTls | None, ...] | None = None) -> None:
        self.backends = backends
        self.schedule = weighted_schedule(weights) if len(backends) > 1 else None
        self.step = 0
        self.turns = [0] * len(backends)  # round robin within each backend
        self.tls = tls
        self.backend_tls = backend_tls or (None,) * len(backends)
        self.chosen = 0  # the backend of the last targets() call (one connection loop per process)

    def targets(self) -> tuple[Endpoint, ...]:
        """The endpoints to try in order for one connection: the backend its weight gives it, round robin
        within it (each call starts one further along). Empty: that backend has none."""
        schedule = self.schedule
        if schedule is None:
            index = 0
        else:
            index = self.chosen = schedule[self.step]
            self.step = (self.step + 1) % len(schedule)
        endpoints = self.backends[index]
        if len(endpoints) < 2:
            return endpoints
        turn = self.turns[index] % len(endpoints)
        self.turns[index] = turn + 1
        return endpoints[turn:] + endpoints[:turn]


def weighted_schedule(weights: tuple[int, ...]) -> tuple[int, ...]:
    """Backend indices in the order connections get them, each as often as its weight says, spread out (nginx's
    smooth weighted round robin, run once here instead of per connection)."""
    divisor = reduce(gcd, weights)
    shares = [weight // divisor for weight in weights]
    total = sum(shares)
    if total > MAX_SCHEDULE:
        shares = [max(1, round(share * MAX_SCHEDULE / total)) for share in shares]
        total = sum(shares)
    current = [0] * len(shares)
    schedule = []
    for _ in range(total):
        for i, share in enumerate(shares):
            current[i] += share
        best = current.index(max(current))
        current[best] -= total
        schedule.append(best)
    return tuple(schedule)


_MISSING = object()


class RoutingTable:
    """SNI host (exact or wildcard) → Destination, plus whether inbound connections carry a PROXY header."""

    def __init__(self) -> None:
        self._hosts: dict[str, Destination | None] = {}  # None: to nginx
        self._wildcards: dict[str, Destination | None] = {}  # by suffix: "*.example.com" as ".example.com"
        self._contexts: dict[tuple[str, str], ssl.SSLContext] = {}  # by (cert, key): one per listener certificate
        self._backend_contexts: dict[str | None, ssl.SSLContext] = {}  # by CA PEM (None: the system's)
        self.use_proxy_protocol = False
        self.listen_ipv6 = True  # ingress-nginx's default (no disable-ipv6)
        self.proxy_header_timeout = DEFAULT_PROXY_HEADER_TIMEOUT  # seconds a client has to send its PROXY header
        self.changes = 0  # how many snapshots/updates were applied, for the status file

    def __len__(self) -> int:
        return len(self._hosts) + len(self._wildcards)

    def apply(self, event: Snapshot | Update) -> None:
        if isinstance(event, Snapshot):
            # Built aside, then swapped in: the proxy's connection thread looks hosts up meanwhile.
            fresh = RoutingTable()
            fresh._contexts = self._contexts  # kept: a context costs a certificate load
            fresh._backend_contexts = self._backend_contexts
            for key, value in event.state.items():
                fresh._set(key, value)
            self._hosts, self._wildcards = fresh._hosts, fresh._wildcards
            destinations = [d for d in (*fresh._hosts.values(), *fresh._wildcards.values()) if d is not None]
            self._contexts = {key: context for key, context in self._contexts.items()
                              if any(d.tls is context for d in destinations)}
            used = {id(b.context) for d in destinations for b in d.backend_tls if b is not None}
            self._backend_contexts = {ca: context for ca, context in fresh._backend_contexts.items()
                                      if id(context) in used}
            self.use_proxy_protocol, self.proxy_header_timeout = fresh.use_proxy_protocol, fresh.proxy_header_timeout
            self.listen_ipv6 = fresh.listen_ipv6
        else:
            self._set(event.key, event.value)
        self.changes += 1

    def lookup(self, server_name: str) -> Destination | None:
        """Where connections for `server_name` go; None: to nginx (no entry, or one that says so)."""
        found = self._hosts.get(server_name)
        if found is None and self._wildcards and server_name not in self._hosts:
            wildcards = self._wildcards
            dot = server_name.find(".")
            while dot >= 0:  # the longest suffix first: the most specific wildcard
                match = wildcards.get(server_name[dot:], _MISSING)
                if match is not _MISSING:
                    return match  # type: ignore[return-value]
                dot = server_name.find(".", dot + 1)
        return found

    def endpoints_for(self, server_name: str) -> tuple[Endpoint, ...] | None:
        """The endpoints one connection for `server_name` tries in order, or None when it goes to nginx."""
        destination = self.lookup(server_name)
        return None if destination is None else destination.targets()

    def _set(self, key: str, value: Any) -> None:
        if key == CONFIG_KEY:
            self._set_config(value)
        elif key.startswith(HOST_PREFIX):
            host = key[len(HOST_PREFIX):].lower()
            hosts, name = (self._wildcards, host[1:]) if host.startswith("*.") else (self._hosts, host)
            if value is None:
                hosts.pop(name, None)
            else:
                hosts[name] = None if value == TO_NGINX else self._destination(host, value)
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

    def _destination(self, host: str, value: Any) -> Destination:
        """A host's entry; what is wrong in it is logged and left out (a backend without endpoints, or none at all:
        its connections are closed, never sent elsewhere)."""
        if isinstance(value, list):
            return Destination((_endpoints(host, value),), (1,))
        if not isinstance(value, dict) or not isinstance(value.get("backends"), list):
            log.warning("passthrough host entry must be a list of 'ip:port' or {'backends': [...]}; host gets no "
                        "endpoints", extra=kv(host=host, value=value))
            return Destination(((),), (1,))
        backends, weights, backend_tls = [], [], []
        for backend in value["backends"]:
            weight = backend.get("weight") if isinstance(backend, dict) else None
            if not isinstance(weight, int) or isinstance(weight, bool) or weight <= 0:
                log.warning("passthrough backend must be {'weight': int > 0, 'endpoints': [...]}; left out",
                            extra=kv(host=host, backend=backend))
                continue
            endpoints = backend.get("endpoints")
            found = _endpoints(host, endpoints if isinstance(endpoints, list) else [])
            to_backend = None
            if backend.get("tls") is not None and "terminate" in value:
                to_backend = self._backend_tls(host, backend["tls"])
                if to_backend is None:
                    found = ()  # unverifiable: its share of connections is closed, never sent in clear
            backends.append(found)
            weights.append(weight)
            backend_tls.append(to_backend)
        tls = None
        if "terminate" in value:
            tls = self._context(host, value["terminate"])
            if tls is None:
                backends, weights = [], []  # no certificate: close its connections rather than pass them through
        return Destination(tuple(backends) or ((),), tuple(weights) or (1,), tls,
                           tuple(backend_tls) if tls is not None and any(backend_tls) else None)

    def _backend_tls(self, host: str, value: Any) -> BackendTls | None:
        """A backend's {"ca": PEM or None, "name": host name}; None (logged) when it is malformed or its CAs do not
        load."""
        ca = value.get("ca") if isinstance(value, dict) else None
        name = value.get("name") if isinstance(value, dict) else None
        if not isinstance(name, str) or not name or not (ca is None or isinstance(ca, str)):
            log.warning("passthrough backend tls must be {'ca': PEM or null, 'name': host name}; the backend's "
                        "connections are closed", extra=kv(host=host))
            return None
        context = self._backend_contexts.get(ca)
        if context is None:
            try:
                context = backend_client_context(ca)
            except (ssl.SSLError, ValueError) as err:
                log.warning("cannot load the CA certificates of a TLS backend; its connections are closed",
                            extra=kv(host=host, error=err))
                return None
            self._backend_contexts[ca] = context
        return BackendTls(context, name)

    def _context(self, host: str, terminate: Any) -> ssl.SSLContext | None:
        cert = terminate.get("cert") if isinstance(terminate, dict) else None
        key = terminate.get("key") if isinstance(terminate, dict) else None
        if not isinstance(cert, str) or not isinstance(key, str):
            log.warning("passthrough terminate must be {'cert': PEM, 'key': PEM}; host's connections are closed",
                        extra=kv(host=host))
            return None
        context = self._contexts.get((cert, key))
        if context is None:
            try:
                context = server_context(cert, key)
            except (ssl.SSLError, OSError) as err:
                log.warning("cannot load the certificate of a TLS Terminate host; its connections are closed",
                            extra=kv(host=host, error=err))
                return None
            self._contexts[(cert, key)] = context
        return context


def server_context(cert_pem: str, key_pem: str) -> ssl.SSLContext:
    """A TLS server context serving this certificate chain and key; the PEMs go through in-memory files, never
    to disk."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2  # as nginx's default ssl-protocols
    cert_fd, key_fd = os.memfd_create("cert"), os.memfd_create("key")
    try:
        os.write(cert_fd, cert_pem.encode())
        os.write(key_fd, key_pem.encode())
        context.load_cert_chain(f"/proc/self/fd/{cert_fd}", f"/proc/self/fd/{key_fd}", password=lambda: b"")
    finally:
        os.close(cert_fd)
        os.close(key_fd)
    return context


def backend_client_context(ca_pem: str | None) -> ssl.SSLContext:
    """A TLS client context that verifies the server's certificate and name against `ca_pem` (None: the CAs the
    system trusts, as OpenSSL finds them), TLS 1.2 and 1.3 (a BackendTLSPolicy's, as nginx applies it)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # verifies the certificate and the host name
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if ca_pem is None:
        context.set_default_verify_paths()
    else:
        context.load_verify_locations(cadata=ca_pem)
    return context


def _endpoints(host: str, values: list[Any]) -> tuple[Endpoint, ...]:
    endpoints = []
    for item in values:
        try:
            endpoints.append(parse_endpoint(item))
        except EndpointError as err:
            log.warning("ignoring passthrough endpoint", extra=kv(host=host, error=err))
    return tuple(endpoints)

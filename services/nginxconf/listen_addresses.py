"""The addresses an nginx.conf listens on, read from its `listen` directives: which sockets nginx-listeners holds
for it (services/nginx/listeners.py), and whether a new configuration can be reloaded at all (reload.py: a
reload cannot bind an address of a port that another address of the same family already listens on)."""
from __future__ import annotations

import re

_LISTEN = re.compile(r'^\s*listen\s+("(?:[^"\\]|\\.)*"|[^\s;]+)', re.MULTILINE)
# The line templates/nginx.conf.j2 writes in the server of the ports Gateway listeners have to themselves.
_GATEWAY_PORTS = re.compile(r"^\s*# gateway-listener-ports:([ \d]*)$", re.MULTILINE)
WILDCARD_HOSTS = ("0.0.0.0", "[::]")


def listen_addresses(conf_text: str) -> set[str]:
    """The addresses of the `listen` directives in an nginx.conf: "0.0.0.0:80", "[::]:80", "10.0.0.5:443",
    "[2001:db8::5]:443", "unix:/path"."""
    found = set()
    for match in _LISTEN.finditer(conf_text):
        word = match.group(1)
        if word.startswith('"'):
            word = re.sub(r"\\(.)", r"\1", word[1:-1])  # render.quote() escapes \\ and "
        found.add(_normal_address(word))
    return found


def _normal_address(text: str) -> str:
    if text.startswith("unix:"):
        return text
    if text.isdigit():
        return f"0.0.0.0:{text}"
    host, _, port = text.rpartition(":")
    if host in ("*", ""):
        host = "0.0.0.0"
    return f"{host}:{port}" if port.isdigit() else text


def bound_addresses(conf_text: str) -> set[str]:
    """The TCP and UDP addresses that name one address rather than all of their family (the ConfigMap's
    bind-address). While these stay the same a reload can open what a new configuration adds; when they change,
    the new sockets clash with the old ones of the same port, and nginx must restart to bind them."""
    return {address for address in listen_addresses(conf_text)
            if not address.startswith("unix:") and address.rpartition(":")[0] not in WILDCARD_HOSTS}


def bound_hosts(conf_text: str, port: int) -> tuple[str, ...]:
    """The hosts of bound_addresses() on `port`, without brackets ("10.0.0.5", "2001:db8::5")."""
    return tuple(sorted(address.rpartition(":")[0].strip("[]") for address in bound_addresses(conf_text)
                        if address.endswith(f":{port}")))


def gateway_ports(conf_text: str) -> tuple[int, ...]:
    """The ports Gateway listeners have to themselves in an nginx.conf: nginx-listeners holds them, and the syncer
    knows that nginx listens there already."""
    match = _GATEWAY_PORTS.search(conf_text)
    return tuple(int(port) for port in match.group(1).split()) if match else ()

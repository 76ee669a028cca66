"""The DNS servers nginx asks at request time (its `resolver`): the system's, as ingress-nginx takes them.

nginx resolves a host name in proxy_pass once, when it loads the configuration, unless the URL is a
variable: then its `resolver` is asked at request time. auth-url uses that, so that a Service DNS name
follows the Service and a name that does not resolve fails only its own requests (500), never `nginx -t`
for everyone. nginx's resolver does not read /etc/hosts: "localhost" is a DNS name to it.
"""
from __future__ import annotations

import ipaddress
from pathlib import Path

RESOLV_CONF = Path("/etc/resolv.conf")
# glibc's default when resolv.conf names no server.
DEFAULT_RESOLVER = "127.0.0.1"


def system_resolvers(resolv_conf: Path = RESOLV_CONF) -> tuple[str, ...]:
    """The nameserver addresses of resolv.conf, written as nginx's resolver takes them ([v6])."""
    try:
        lines = resolv_conf.read_text().splitlines()
    except OSError:
        lines = []
    found = []
    for line in lines:
        words = line.split()
        if len(words) >= 2 and words[0] == "nameserver":
            try:
                address = ipaddress.ip_address(words[1].split("%", 1)[0])
            except ValueError:
                continue
            found.append(f"[{address}]" if address.version == 6 else str(address))
    return tuple(dict.fromkeys(found)) or (DEFAULT_RESOLVER,)

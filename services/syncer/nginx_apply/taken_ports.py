"""The ports Gateway listeners have to themselves that another program on the node already listens on.

`nginx -t` binds nothing, so it passes a configuration whose new port is taken; the reload then fails to bind it, and
every later one too while that configuration stays what the model asks for: one listener would keep every other
change from reaching nginx. So before a configuration names a new port, the syncer tries to bind it as nginx would
(SO_REUSEADDR, on every address of the family); a port that cannot be bound is left out of nginx.conf and reported.
A port the running nginx.conf names already is nginx's own (nginx-listeners holds it) and is not tried.
"""
from __future__ import annotations

import errno
import socket
from typing import Iterable

from services.common.ipv6 import is_no_ipv6_error


def taken_ports(wanted: Iterable[int], *, held: Iterable[int], ipv6: bool) -> dict[int, str]:
    """The ports of `wanted` that are not `held` (nginx listens there already) and cannot be bound now, with why."""
    taken = {}
    for port in sorted(set(wanted) - set(held)):
        error = _bind_error(socket.AF_INET, "0.0.0.0", port) or (_bind_error(socket.AF_INET6, "::", port) if ipv6
                                                                 else None)
        if error:
            taken[port] = error
    return taken


def _bind_error(family: int, host: str, port: int) -> str | None:
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        try:
            sock.bind((host, port))
        except OSError as err:
            if family == socket.AF_INET6 and is_no_ipv6_error(err):
                return None
            return "another program listens on it" if err.errno == errno.EADDRINUSE else err.strerror
    return None

"""Whether this machine can listen on IPv6 at all (a kernel booted with ipv6.disable=1, say, cannot)."""
from __future__ import annotations

import errno
import functools
import socket

# What socket() or bind() on [::] fails with when the kernel has no IPv6: no address family, or no address.
NO_IPV6_ERRORS = frozenset({errno.EAFNOSUPPORT, errno.EADDRNOTAVAIL, errno.EPROTONOSUPPORT})


def is_no_ipv6_error(err: OSError) -> bool:
    """True when `err`, raised opening an IPv6 socket, means the machine has no IPv6 (not a port in use)."""
    return err.errno in NO_IPV6_ERRORS


@functools.cache
def ipv6_available() -> bool:
    """True when a TCP socket can be bound to [::] (an ephemeral port): nginx may then `listen [::]:port`."""
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            probe.bind(("::", 0))
    except OSError as err:
        if is_no_ipv6_error(err):
            return False
        raise
    return True

"""Private ZeroMQ ipc:// endpoints: socket files that only this process's user can connect to.

Whoever can connect to one of these sockets can publish routes to the proxies or send pod set-up
requests to a root cniworker, so the socket file must never be more open than 0600, not even for the
moment between bind() creating it and a chmod.
"""
from __future__ import annotations

import os
import stat

import zmq

from services.common.files import NotPrivateError


def bind_private(sock: zmq.Socket, endpoint: str) -> None:
    """Bind `sock` at an ipc:// `endpoint`, replacing a stale socket file; the file is never open to others."""
    if not endpoint.startswith("ipc://"):
        raise ValueError(f"bind_private takes an ipc:// endpoint, got {endpoint!r}")
    path = endpoint.removeprefix("ipc://")
    try:
        os.unlink(path)  # left by a killed predecessor: binding over it would fail or leave a dead endpoint
    except FileNotFoundError:
        pass
    # libzmq creates the socket file inside bind(), in this thread, with the mode the umask leaves. The
    # umask is process-wide: files other threads create meanwhile get 077 too (stricter, never looser),
    # so it is narrowed around the bind call only and restored at once.
    old_umask = os.umask(0o077)
    try:
        sock.bind(endpoint)
    finally:
        os.umask(old_umask)
    mode = stat.S_IMODE(os.lstat(path).st_mode)
    if mode & 0o077:
        # The umask did not apply, e.g. a default ACL on the directory overrides it: close the socket again.
        sock.unbind(endpoint)
        raise NotPrivateError(f"{path} was created with mode {mode:04o} although the umask was 077: make its "
                              f"directory private (chmod 0700 {os.path.dirname(path)}; setfacl -b if it has ACLs)")
    os.chmod(path, 0o600)  # 0700 under umask 077: a socket needs no execute bit

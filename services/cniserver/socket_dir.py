"""The root-only directory and Unix socket the CNI server listens on.

Whoever can connect to the socket can plumb any network namespace on the node, so only root may.
The directory is re-created root-owned 0700 at every start (nothing a previous run or another user
left there survives). When it cannot be removed — it is a mount point, e.g. bind-mounted into a
container — it must already be root-owned 0700, or we refuse to start. The socket is created under
umask 077, so there is no moment at which it is more open than 0600.
"""
from __future__ import annotations

import errno
import os
import shutil
import socket
import stat
from pathlib import Path

from services.common.files import ensure_private_dir

SOCKET_NAME = "cni-server.sock"


class SocketDirError(RuntimeError):
    """The socket directory cannot be made private; the message says what to fix."""


def socket_dir(run_dir: str | Path) -> Path:
    return Path(run_dir) / "cni"


def socket_path(run_dir: str | Path) -> Path:
    return socket_dir(run_dir) / SOCKET_NAME


def prepare_socket_dir(directory: Path) -> None:
    """Re-create `directory` root-owned with mode 0700, or check that a mount point already is."""
    ensure_private_dir(directory.parent)
    if directory.is_symlink() or (os.path.lexists(directory) and not directory.is_dir()):
        directory.unlink()
    elif directory.exists():
        # Renaming first tells a mount point (EBUSY) from a plain directory without touching its
        # contents: a bind-mounted directory belongs to someone else and is only checked.
        aside = directory.with_name(f".{directory.name}.old-{os.urandom(4).hex()}")
        try:
            os.rename(directory, aside)
        except OSError as err:
            if err.errno != errno.EBUSY:
                raise
            _check_private(directory)
            stale = directory / SOCKET_NAME
            if os.path.lexists(stale):
                stale.unlink()
            return
        shutil.rmtree(aside)
    directory.mkdir(mode=0o700)
    os.chown(directory, 0, 0)
    os.chmod(directory, 0o700)  # mkdir's mode is filtered by the umask


def _check_private(directory: Path) -> None:
    info = os.lstat(directory)
    if info.st_uid != 0:
        raise SocketDirError(f"{directory} is owned by uid {info.st_uid} and cannot be re-created "
                             f"(it is a mount point): make it owned by root (chown root:root {directory})")
    if stat.S_IMODE(info.st_mode) != 0o700:
        raise SocketDirError(f"{directory} has mode {stat.S_IMODE(info.st_mode):04o} and cannot be re-created "
                             f"(it is a mount point): make it private (chmod 0700 {directory})")


def bind_private_socket(path: Path, backlog: int = 128) -> socket.socket:
    """A listening Unix socket at `path` that only root can connect to (mode 0600)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_umask = os.umask(0o077)
    try:
        sock.bind(str(path))
    except BaseException:
        sock.close()
        raise
    finally:
        os.umask(old_umask)
    os.chmod(path, 0o600)
    sock.listen(backlog)
    sock.setblocking(False)
    return sock

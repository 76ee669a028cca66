"""Makes an nginx prefix directory ready: its directories, its socket directory and the fallback certificate.

Called by the launcher before nginx starts and by the syncer before `nginx -t` (reload.py), so that either may
run first (`nginx -t` binds the listening sockets too, so their directory must exist).
"""
from __future__ import annotations

import logging
import os
import pwd
import socket
import stat
import subprocess
import tempfile
from pathlib import Path

from services.common import logs
from services.common.files import atomic_write, ensure_private_dir
from services.common.runner import StartupError
from services.nginxconf.paths import NginxPaths

log = logging.getLogger(__name__)

# ingress-nginx's name for the certificate served when no other matches; users and tests look for it.
FAKE_CERTIFICATE_CN = "Kubernetes Ingress Controller Fake Certificate"
FAKE_CERTIFICATE_SUBJECT = f"/O=Acme Co/CN={FAKE_CERTIFICATE_CN}"
# nginx's workers run as this user when the master runs as root without a `user` directive.
WORKER_USER = "nobody"
# The longest path a Unix socket may have: sun_path holds 108 bytes with the terminating NUL.
UNIX_PATH_MAX = 107


class PrefixError(StartupError):
    """nginx's files cannot be made ready; the message says what to change."""


def prepare(paths: NginxPaths) -> None:
    """Create the prefix, temp, state and socket directories and the fallback certificate when missing.

    Raises PrefixError, or NotPrivateError for a run or socket directory that is not ours (both StartupErrors).
    """
    # Readable by root only except for traversal: the workers must reach the temp directories.
    for directory in (paths.state_dir, paths.prefix, paths.temp):
        _mkdir(directory, 0o711)
    _mkdir(paths.dynamic, 0o700)
    ensure_private_dir(paths.run_dir)
    for path in (*paths.sockets, paths.listeners_socket):
        if len(os.fsencode(path)) > UNIX_PATH_MAX:
            raise PrefixError(f"nginx's socket path {path} is longer than the {UNIX_PATH_MAX} bytes a Unix socket "
                              "path may have: choose a shorter --run-dir")
    # nginx makes its Unix sockets 0666: this directory (0700, ours, checked also when it exists) is the guard.
    ensure_private_dir(paths.socket_dir)
    if not paths.default_certificate.exists():
        atomic_write(paths.default_certificate, make_self_signed(FAKE_CERTIFICATE_SUBJECT), mode=0o600)


def remove_stale_sockets(paths: NginxPaths) -> None:
    """Remove the socket files a killed nginx left behind (nginx removes its own only when it exits
    cleanly, and a new master cannot bind over them). Call once no nginx of this instance runs.

    Raises PrefixError when something still listens on one: another instance with the same run dir.
    """
    for path in paths.sockets:
        if remove_if_stale(path):
            raise PrefixError(f"another process listens on {path}: give each pyngress instance its own --run-dir")


def remove_if_stale(path: Path) -> bool:
    """Remove the socket file `path` if nothing listens on it (left by a killed process); True when something
    does listen there (it is left alone)."""
    with socket.socket(socket.AF_UNIX) as probe:
        probe.settimeout(1.0)
        try:
            probe.connect(str(path))
        except FileNotFoundError:
            return False
        except ConnectionRefusedError:  # nothing listens
            path.unlink(missing_ok=True)
            log.info("removed a stale socket file", extra=logs.kv(path=str(path)))
            return False
        except OSError:
            pass  # a listener whose backlog is full
    return True


def _mkdir(path: Path, mode: int) -> None:
    if not path.is_dir():
        path.mkdir(mode=mode, parents=True, exist_ok=True)
        os.chmod(path, mode)


def make_self_signed(subject: str, dns_names: tuple[str, ...] = ("ingress.local",), days: int = 3650) -> bytes:
    """A self-signed P-256 certificate followed by its key, as one PEM (made with the openssl CLI)."""
    with tempfile.TemporaryDirectory(prefix="pyngress-cert-") as tmp:
        cert, key = Path(tmp) / "cert.pem", Path(tmp) / "key.pem"
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", str(key), "-out", str(cert), "-days", str(days), "-subj", subject,
             "-addext", "subjectAltName=" + ",".join(f"DNS:{name}" for name in dns_names)],
            check=True, capture_output=True)
        return cert.read_bytes() + key.read_bytes()


def unreachable_by_workers(path: Path) -> Path | None:
    """The first directory on the way to `path` that nginx's workers cannot traverse, if any."""
    try:
        worker = pwd.getpwnam(WORKER_USER)
    except KeyError:
        return None
    for directory in reversed([path, *path.parents]):
        st = directory.stat()
        if st.st_uid == worker.pw_uid:
            allowed = st.st_mode & stat.S_IXUSR
        elif st.st_gid == worker.pw_gid:
            allowed = st.st_mode & stat.S_IXGRP
        else:
            allowed = st.st_mode & stat.S_IXOTH
        if not allowed:
            return directory
    return None

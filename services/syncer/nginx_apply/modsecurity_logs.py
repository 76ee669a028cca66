"""ModSecurity's audit and debug logs, made before nginx's master opens them.

nginx's master (root) opens each log while it loads the configuration (`nginx -t` too) and its workers (nobody)
append to the descriptor they inherit, so no directory has to be writable by the workers. libmodsecurity would
create a missing log with the master's umask (0644): an audit log holds whole requests (cookies, Authorization
headers, bodies), so each missing one is created here first, empty and root-only (0600). A log that exists keeps
its mode (an administrator may have opened it to a log shipper); a symbolic link is never followed to create one.
"""
from __future__ import annotations

import logging
import os
from typing import Iterable

from services.common import logs

log = logging.getLogger("syncer")


def create_missing_logs(paths: Iterable[str]) -> None:
    for path in sorted(paths):
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except FileExistsError:
            continue
        except OSError as err:  # nginx -t then says the same for the profile or the ConfigMap that names it
            log.warning("cannot create a ModSecurity log", extra=logs.kv(path=path, error=str(err)))
            continue
        os.close(fd)

"""`pyngress nginx`: prepare nginx's prefix, stop what a killed master left running, exec the master.

supervisord runs this as the `nginx` program; the process becomes the nginx master (`daemon off;`), so
supervisord's signals reach nginx directly (QUIT stops it gracefully, HUP reloads).

Before exec:
- the prefix directory, temp directories, the root-only socket directory and the fallback certificate
  are created when missing (paths.py says what lives where);
- without an nginx.conf, or with one that fails `nginx -t` (written by another version, say), a bootstrap
  configuration is written: the same template with no profiles and no routes, so nginx answers 404 for
  everything and /healthz on its configuration socket until the syncer applies the real one;
- nginx processes left by a previous master of this instance (workers of a SIGKILLed master keep the
  listening sockets) are stopped: see processes.py; then the Unix socket files such a master left are
  removed, or the new master could not bind them.
"""
from __future__ import annotations

import logging
import os
import resource

from services.common import logs, status
from services.common.files import atomic_write
from services.common.runner import StartupError
from services.common.settings import Settings
from services.nginxconf import processes
from services.nginxconf.config_test import NginxConfigError, check_file, nginx_binary
from services.nginxconf.paths import NginxPaths
from services.nginxconf.prefix import WORKER_USER, prepare, remove_stale_sockets, unreachable_by_workers
from services.nginxconf.config import NginxConfig
from services.nginxconf.render import render

log = logging.getLogger("nginx")


def bootstrap_config(settings: Settings) -> NginxConfig:
    return NginxConfig(
        http_port=settings.ports.http, https_port=settings.ports.https,
        state_dir=str(settings.paths.state_dir), run_dir=str(settings.paths.run_dir),
        ssl_passthrough=settings.ingress.enable_ssl_passthrough)


def ensure_config(paths: NginxPaths, settings: Settings) -> None:
    if paths.conf.exists():
        try:
            check_file(paths, paths.conf)
            return
        except NginxConfigError as err:
            log.error("the existing nginx.conf fails nginx -t; starting from the bootstrap configuration",
                      extra=logs.kv(conf=str(paths.conf), error=str(err)))
    atomic_write(paths.conf, render(bootstrap_config(settings)).encode(), mode=0o600)
    log.info("wrote the bootstrap configuration", extra=logs.kv(conf=str(paths.conf)))


def run(settings: Settings) -> int:
    logs.setup("nginx", settings.log_level)
    paths = NginxPaths.of(settings.paths.state_dir, settings.paths.run_dir)
    try:
        _prepare_instance(paths, settings)
    except StartupError as err:  # as run_process reports one: a line saying what to change, exit code 2
        log.error(f"nginx cannot start: {err}")
        return 2
    # This process becomes the nginx master (exec below): its pid is the master's, so "running" stays true
    # for as long as `pyngress status` finds that pid alive.
    status.write_status(paths.run_dir, "nginx", state="running", conf=str(paths.conf))
    binary = nginx_binary()
    # Up to the hard limit: nginx holds a descriptor per connection, two when proxying.
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    # The prefix as working directory names this instance's processes (processes.py).
    os.chdir(paths.prefix)
    os.execv(binary, [binary, "-p", f"{paths.prefix}/", "-c", str(paths.conf)])


def _prepare_instance(paths: NginxPaths, settings: Settings) -> None:
    prepare(paths)
    blocked = unreachable_by_workers(paths.temp)
    if blocked:
        log.warning(f"nginx's workers (user {WORKER_USER}) cannot reach their temp directories: request bodies "
                    "and responses larger than their buffers will fail; make the directory traversable "
                    "(chmod o+x)", extra=logs.kv(directory=str(blocked)))
    ensure_config(paths, settings)
    processes.stop_stale(paths.prefix)
    remove_stale_sockets(paths)

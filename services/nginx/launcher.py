"""`pyngress nginx`: prepare nginx's prefix, get the listening sockets, exec the master with them.

supervisord runs this as the `nginx` program; the process becomes the nginx master (`daemon off;`), so
supervisord's signals reach nginx directly (QUIT stops it gracefully, HUP reloads).

Before exec:
- the prefix directory, temp directories, the root-only socket directory and the fallback certificate
  are created when missing (paths.py says what lives where);
- without an nginx.conf, with one that fails `nginx -t` (written by another version, say), or with one that
  listens elsewhere than these settings say (written with other flags), a bootstrap configuration is written:
  the same template with no profiles and no routes, so nginx answers 404 for everything and /healthz on its
  configuration socket until the syncer applies the real one;
- the listening sockets come from the nginx-listeners program (holder.py), which keeps them open while
  masters come and go; run alone, this process opens them itself, or takes them over from nginx processes
  of this instance still holding them (listeners.py). The master inherits them (the NGINX variable);
- a previous master still running is killed and its workers, like the workers of a killed master, keep
  serving until the new master runs workers; then they are told to finish and exit (retire.py).

In the foreground of a terminal this process stays in front of the master instead of becoming it, passing
signals on (see _run_in_front: a terminal resize must not reach nginx).
"""
from __future__ import annotations

import logging
import os
import resource
import signal
import socket
import time
from types import FrameType

from services.common import component_state, logs
from services.common.files import atomic_write
from services.common.ipv6 import ipv6_available
from services.common.runner import StartupError
from services.common.settings import Settings
from services.nginx import listeners, retire
from services.nginx.listeners import Listener
from services.nginxconf.config import NginxConfig
from services.nginxconf.config_check import NginxConfigError, check_file, nginx_binary
from services.nginxconf.paths import NginxPaths
from services.nginxconf.prefix import WORKER_USER, prepare, unreachable_by_workers
from services.nginxconf.processes import NginxProcess
from services.nginxconf.render import render

log = logging.getLogger("nginx")

# Under supervisord the nginx-listeners program starts beside this one: how long to wait for it to answer.
HOLDER_WAIT_SECONDS = 10.0
# Signals passed on to nginx when this process stays in front of it (see _run_in_front).
FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGQUIT, signal.SIGHUP, signal.SIGUSR1)


def bootstrap_config(settings: Settings) -> NginxConfig:
    return NginxConfig(
        http_port=settings.ports.http, https_port=settings.ports.https,
        state_dir=str(settings.paths.state_dir), run_dir=str(settings.paths.run_dir),
        ssl_passthrough=settings.ingress.enable_ssl_passthrough, listen_ipv6=ipv6_available())


def ensure_config(paths: NginxPaths, settings: Settings) -> None:
    if paths.conf.exists():
        try:
            check_file(paths, paths.conf)
            text = paths.conf.read_text()
            # With IPv6 or without, on every address or the bound ones (the ConfigMap's disable-ipv6 and
            # bind-address, which the syncer applied), never elsewhere.
            ipv6 = listeners.listens_on_ipv6(text, settings)
            bind = listeners.bound_hosts(text, settings.ports.http)
            expected = {str(listener) for listener in listeners.nginx_listeners(settings, paths, ipv6, bind)}
            # The TCP and UDP services' ports (--tcp/udp-services-configmap) are nginx's own: not compared.
            held_ports = (f":{settings.ports.http}", f":{settings.ports.https}")
            found = {address for address in listeners.listen_addresses(text)
                     if address.startswith("unix:") or address.endswith(held_ports)}
            if found == expected:
                return
            # The listening sockets handed to nginx are these settings'; a reload of a file listening elsewhere
            # would fail to bind what the holder keeps.
            log.error("the existing nginx.conf listens elsewhere than these settings; starting from the bootstrap "
                      "configuration", extra=logs.kv(conf=str(paths.conf), listens=",".join(sorted(found)),
                                                     expected=",".join(sorted(expected))))
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
        held = _listening_sockets(paths, listeners.configured_listeners(settings, paths))
    except StartupError as err:  # as run_process reports one: a line saying what to change, exit code 2
        log.error(f"nginx cannot start: {err}")
        return 2
    stale = retire.kill_old_masters(paths.prefix, paths.pid_file)
    # This process becomes the nginx master (exec below): its pid is the master's, so "running" stays true
    # for as long as `pyngress status` finds that pid alive.
    component_state.write_status(paths.run_dir, "nginx", state="running", conf=str(paths.conf),
                                 listeners=[str(listener) for listener in held])
    binary = nginx_binary()
    # Up to the hard limit: nginx holds a descriptor per connection, two when proxying.
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    # The prefix as working directory names this instance's processes (processes.py).
    os.chdir(paths.prefix)
    argv = [binary, "-p", f"{paths.prefix}/", "-c", str(paths.conf)]
    env = {**os.environ, "NGINX": listeners.nginx_environment(held)}
    stamp = retire.conf_stamp(paths.conf)
    if _in_terminal_foreground():
        return _run_in_front(argv, env, paths, stale, stamp, held)
    retire.spawn_retirer(paths.prefix, os.getpid(), stale, paths.conf, stamp)
    os.execve(binary, argv, env)
    return 0  # not reached


def _prepare_instance(paths: NginxPaths, settings: Settings) -> None:
    prepare(paths)
    blocked = unreachable_by_workers(paths.temp)
    if blocked:
        log.warning(f"nginx's workers (user {WORKER_USER}) cannot reach their temp directories: request bodies "
                    "and responses larger than their buffers will fail; make the directory traversable "
                    "(chmod o+x)", extra=logs.kv(directory=str(blocked)))
    ensure_config(paths, settings)


def _listening_sockets(paths: NginxPaths, wanted: tuple[Listener, ...]) -> dict[Listener, socket.socket]:
    """The sockets for the master: from nginx-listeners when it runs, the rest opened (or taken over) here."""
    supervised = os.environ.get("SUPERVISOR_ENABLED") == "1"  # supervisord sets it for its programs
    deadline = time.monotonic() + (HOLDER_WAIT_SECONDS if supervised else 0.0)
    received: dict[Listener, socket.socket] = {}
    while True:
        try:
            received = listeners.receive(paths.listeners_socket, wanted)
            break
        except listeners.HolderUnavailableError as err:
            if time.monotonic() >= deadline:
                if supervised:
                    log.warning("nginx-listeners did not hand over the listening sockets; nginx holds them alone, "
                                "and they close if its master dies", extra=logs.kv(error=str(err)))
                break
            time.sleep(0.1)
    missing = [listener for listener in wanted if listener not in received]
    if received and missing:
        log.warning("nginx-listeners does not hold every listening socket; opening the others here",
                    extra=logs.kv(listeners=",".join(str(listener) for listener in missing)))
    try:
        opened = listeners.acquire(missing, paths)
    except BaseException:
        listeners.close_all(received.values())
        raise
    # An IPv6 listener is missing from both when the machine has no IPv6 (acquire() said so).
    return {listener: sock for listener in wanted if (sock := received.get(listener) or opened.get(listener))}


def _in_terminal_foreground() -> bool:
    """True when this process is in the foreground process group of its controlling terminal."""
    try:
        tty = os.open("/dev/tty", os.O_RDONLY | os.O_NOCTTY)
    except OSError:
        return False  # no controlling terminal (under supervisord, say)
    try:
        return os.tcgetpgrp(tty) == os.getpgrp()
    except OSError:
        return False
    finally:
        os.close(tty)


def _run_in_front(argv: list[str], env: dict[str, str], paths: NginxPaths, stale: list[NginxProcess],
                  stamp: retire.ConfStamp, held: dict[Listener, socket.socket]) -> int:
    """Run the master as a child outside the terminal's foreground process group, passing signals on.

    A master that inherited its sockets counts itself daemonized, and then takes SIGWINCH, which a terminal
    sends its foreground group whenever it is resized, as "stop accepting connections".
    """
    started: list[int] = []

    def forward(signum: int, frame: FrameType | None) -> None:
        try:
            if started:
                os.kill(started[0], signum)
        except ProcessLookupError:
            pass  # exited: waitpid below returns

    for sig in FORWARDED_SIGNALS:
        signal.signal(sig, forward)
    child = os.fork()
    if child == 0:
        try:
            os.setpgid(0, 0)
            os.execve(argv[0], argv, env)
        finally:
            os._exit(127)
    started.append(child)
    listeners.close_all(held.values())
    retire.spawn_retirer(paths.prefix, child, stale, paths.conf, stamp)
    _, wait_status = os.waitpid(child, 0)
    code = os.waitstatus_to_exitcode(wait_status)
    return code if code >= 0 else 128 - code

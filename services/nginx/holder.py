"""`pyngress nginx-listeners`: open nginx's listening sockets once and hold them for every nginx master.

supervisord runs this beside the `nginx` program (started before it, stopped after it). Each `pyngress nginx`
asks it for the sockets on `<run-dir>/nginx/listeners.sock` (root-only directory) and execs the master with
them (listeners.py says how nginx takes them). Because this process holds them, a master that is killed,
crashes or is restarted never closes them: connections that arrive while no master runs wait in the kernel's
accept queue, and a killed master's workers keep accepting until the next master starts.

At start the sockets are opened, or taken over from nginx processes of this instance still holding them (this
program was restarted while nginx ran). Every second it puts back a Unix socket file that an exiting nginx
removed (listeners.py). On SIGTERM or SIGQUIT it exits at once: nginx processes still running keep their own
copies; when none is left, the Unix socket files go too.
"""
from __future__ import annotations

import logging
import signal
import socket
import time
from types import FrameType

from services.common import component_state, logs
from services.common.runner import StartupError
from services.common.settings import Settings
from services.nginx import listeners
from services.nginxconf import processes
from services.nginxconf.paths import NginxPaths
from services.nginxconf.prefix import prepare

log = logging.getLogger("nginx-listeners")

PROGRAM = "nginx-listeners"
CHECK_SECONDS = 1.0


class _Stop(Exception):
    pass


def run(settings: Settings) -> int:
    logs.setup(PROGRAM, settings.log_level)
    paths = NginxPaths.of(settings.paths.state_dir, settings.paths.run_dir)
    try:
        prepare(paths)
        _refuse_a_second_holder(paths)
        held = listeners.acquire(listeners.configured_listeners(settings, paths), paths)
        try:
            control = _bind_control(paths)  # last: whoever connects finds every socket ready
        except BaseException:
            listeners.close_all(held.values())
            raise
    except StartupError as err:
        log.error(f"{PROGRAM} cannot start: {err}")
        return 2
    listeners.keep_second_names(held, paths)
    component_state.write_status(paths.run_dir, PROGRAM, state="running",
                                 listeners=[str(listener) for listener in held])
    log.info("holding nginx's listening sockets", extra=logs.kv(listeners=",".join(str(l) for l in held)))

    def stop(signum: int, frame: FrameType | None) -> None:
        raise _Stop()

    for sig in (signal.SIGTERM, signal.SIGQUIT, signal.SIGINT):
        signal.signal(sig, stop)
    try:
        _serve(control, held, _ConfFollower(settings, paths))
    except _Stop:
        pass
    finally:
        control.close()
        paths.listeners_socket.unlink(missing_ok=True)
        if not processes.instance_processes(paths.prefix, processes.recorded_master(paths.pid_file)):
            listeners.remove_names(held, paths)
        listeners.close_all(held.values())
    log.info("stopped")
    return 0


def _refuse_a_second_holder(paths: NginxPaths) -> None:
    path = paths.listeners_socket
    with socket.socket(socket.AF_UNIX) as probe:
        try:
            probe.connect(str(path))
        except (FileNotFoundError, ConnectionRefusedError):
            path.unlink(missing_ok=True)  # none, or left by a killed holder
        else:
            raise StartupError(f"another {PROGRAM} answers on {path}: give each pyngress instance its own --run-dir")


def _bind_control(paths: NginxPaths) -> socket.socket:
    """The Unix socket on which this program hands the sockets over (0600, in the root-only directory)."""
    path = paths.listeners_socket
    path.unlink(missing_ok=True)
    control = socket.socket(socket.AF_UNIX)
    control.bind(str(path))
    path.chmod(0o600)
    control.listen(64)
    control.settimeout(CHECK_SECONDS)
    return control


class _ConfFollower:
    """Keeps the held sockets those of the nginx.conf in place, which gains or loses its IPv6 listeners when the
    ConfigMap's disable-ipv6 changes, and the ports Gateway listeners have to themselves as Gateways come and go. A listener the file no longer names is closed (nginx closes its own copy
    as it reloads): then connections to it are refused, not left waiting. One the file names anew is taken over
    from the master that bound it as it reloaded, never opened here: nginx could not bind it then."""

    def __init__(self, settings: Settings, paths: NginxPaths) -> None:
        self.settings, self.paths = settings, paths
        self.seen = self._stamp()

    def _stamp(self) -> tuple[int, int] | None:
        try:
            stat = self.paths.conf.stat()
        except FileNotFoundError:
            return None
        return stat.st_ino, stat.st_mtime_ns

    def follow(self, held: dict[listeners.Listener, socket.socket]) -> None:
        stamp = self._stamp()
        if stamp is None or stamp == self.seen:
            return
        wanted = listeners.configured_listeners(self.settings, self.paths)
        for listener in [listener for listener in held if listener not in wanted]:
            held.pop(listener).close()
            log.info("nginx.conf no longer listens here; closed the socket", extra=logs.kv(listener=str(listener)))
        pending = False
        for listener in wanted:
            if listener in held:
                continue
            sock = listeners.take_over(listener, self.paths.prefix)
            if sock is None:
                pending = True  # nginx has not reloaded with the new file yet: next time
                continue
            held[listener] = sock
        if not pending:
            self.seen = stamp
            component_state.write_status(self.paths.run_dir, PROGRAM, state="running",
                                         listeners=[str(listener) for listener in held])


def _serve(control: socket.socket, held: dict[listeners.Listener, socket.socket], conf: _ConfFollower) -> None:
    paths = conf.paths
    next_check = time.monotonic() + CHECK_SECONDS
    while True:
        try:
            conn, _ = control.accept()
        except TimeoutError:
            conn = None
        if conn is not None:
            with conn:
                conn.settimeout(listeners.HAND_OVER_TIMEOUT_SECONDS)
                try:
                    listeners.hand_over(conn, held)
                    log.info("handed the listening sockets to a new nginx master")
                except OSError as err:
                    log.warning("could not hand the listening sockets over", extra=logs.kv(error=str(err)))
        if time.monotonic() >= next_check:
            next_check = time.monotonic() + CHECK_SECONDS
            for path in listeners.restore_names(held, paths):
                log.warning("an exiting nginx removed a socket file that still listens; put it back",
                            extra=logs.kv(path=str(path)))
            conf.follow(held)

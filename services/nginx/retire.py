"""Replacing the nginx processes a previous master left, without dropping what they serve.

Before `pyngress nginx` execs a new master (launcher.py):
- A previous master still alive (one that outlived its launcher, or found by a second launcher started by
  hand) is killed with SIGKILL. Its workers keep running and serving, so no request is lost, and the killed
  master cannot remove, as it would when it exits, the pid file and the Unix socket files the new one uses.
- The processes left (workers of killed or crashed masters) keep accepting on the shared listening sockets
  until the new master has started its workers. Then a small helper process tells them to QUIT: they stop
  accepting, finish their requests and exit (nginx closes what is still open after worker_shutdown_timeout).
  If the new master exits before that, they are left serving for the next launcher.

The helper also sends the new master a HUP when nginx.conf was replaced while it started: the syncer installs a
configuration without signalling when it finds no master running, and the new master may have read the file
before.
"""
from __future__ import annotations

import logging
import os
import select
import signal
import time
from pathlib import Path

from services.common import logs
from services.nginxconf import processes
from services.nginxconf.processes import NginxProcess

log = logging.getLogger("nginx")

# How long the new master may take to start its workers (init_by_lua loads the routing tables first).
READY_TIMEOUT_SECONDS = 120.0
POLL_SECONDS = 0.02
KILL_WAIT_SECONDS = 2.0

ConfStamp = tuple[int, int, int] | None


def conf_stamp(conf: Path) -> ConfStamp:
    """What changes when nginx.conf is replaced (the syncer writes a new file and renames it)."""
    try:
        st = conf.stat()
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size


def kill_old_masters(prefix: Path, pid_file: Path) -> list[NginxProcess]:
    """SIGKILL every live master of the instance; return the processes left to retire once a new master serves
    (workers still accepting; those already shutting down finish on their own). The last master's pid file
    vouches for its workers where this process may not read them (processes.py)."""
    group = processes.recorded_master(pid_file)
    masters = [p for p in processes.instance_processes(prefix, group) if p.is_master]
    for master in masters:
        if processes.send_signal(master, prefix, signal.SIGKILL):
            log.warning("killed a previous nginx master; its workers keep serving until the new master does",
                        extra=logs.kv(pid=master.pid))
    deadline = time.monotonic() + KILL_WAIT_SECONDS
    while any(processes.is_alive(m, prefix) for m in masters) and time.monotonic() < deadline:
        time.sleep(POLL_SECONDS)
    return [p for p in processes.instance_processes(prefix, group) if not p.is_master and not p.is_shutting_down]


def spawn_retirer(prefix: Path, master_pid: int, stale: list[NginxProcess], conf: Path, stamp: ConfStamp) -> None:
    """Start the helper that retires `stale` once master `master_pid` runs workers (see the module doc).

    The helper is a grandchild in its own session: not a child of the master (which would reap it as an
    unknown process), and out of the process group supervisord signals when it stops nginx.
    """
    pidfd = os.pidfd_open(master_pid)  # pins the master: a recycled pid can never be mistaken for it
    child = os.fork()
    if child == 0:
        if os.fork() == 0:
            code = 0
            try:
                os.setsid()
                # Hold none of the listening sockets: they must close when the last nginx process does.
                os.closerange(3, pidfd)
                os.closerange(pidfd + 1, os.sysconf("SC_OPEN_MAX"))
                _retire_when_ready(prefix, master_pid, pidfd, stale, conf, stamp)
            except BaseException:
                log.exception("retiring the previous nginx processes failed")
                code = 1
            os._exit(code)
        os._exit(0)
    os.waitpid(child, 0)
    os.close(pidfd)


def _retire_when_ready(prefix: Path, master_pid: int, pidfd: int, stale: list[NginxProcess], conf: Path,
                       stamp: ConfStamp) -> None:
    exited = select.poll()
    exited.register(pidfd, select.POLLIN)  # a pidfd becomes readable when its process exits
    deadline = time.monotonic() + READY_TIMEOUT_SECONDS
    while not any(w.is_worker for w in processes.workers_of(master_pid, prefix)):
        if exited.poll(0):
            if stale:
                log.warning("the new nginx master exited before it served; the previous workers keep serving",
                            extra=logs.kv(pids=_pids(stale)))
            return
        if time.monotonic() > deadline:
            log.warning("the new nginx master started no worker in time; the previous workers keep serving",
                        extra=logs.kv(master=master_pid, pids=_pids(stale)))
            return
        time.sleep(POLL_SECONDS)
    if conf_stamp(conf) != stamp:
        signal.pidfd_send_signal(pidfd, signal.SIGHUP)
        log.info("nginx.conf changed while the master started; reloading it", extra=logs.kv(master=master_pid))
    retired = [p for p in stale if processes.send_signal(p, prefix, signal.SIGQUIT)]
    if retired:
        log.info("the new master serves; told the previous master's workers to finish their requests and exit",
                 extra=logs.kv(master=master_pid, pids=_pids(retired)))


def _pids(found: list[NginxProcess]) -> str:
    return ",".join(str(p.pid) for p in found)

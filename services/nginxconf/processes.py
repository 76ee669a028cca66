"""Finding the nginx processes of one instance in /proc, and stopping stale ones.

An instance is named by its prefix directory: the launcher starts nginx with that directory as its
working directory, and every worker inherits it. A process belongs to the instance when its executable
is nginx and its working directory is the prefix. This holds however the launcher was started (under
supervisord each program has its own process group, from a shell or a test it does not), and it never
matches an unrelated process: another nginx has another working directory, and a non-nginx process
another executable. A killed master's workers keep running with PPID 1 and still match.

Root without CAP_SYS_PTRACE (a container's default) may not read the executable and working directory of
another user's process, and the workers run as nobody. A caller that knows the pid of a master this instance
started (its pid file, which a killed master leaves) vouches for that master's process group: the launcher
execs the master as a group leader (supervisord gives each program its own group), its workers inherit the
group, and an unreadable process in it whose title is nginx's is the instance's.
"""
from __future__ import annotations

import logging
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from services.common import logs

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class NginxProcess:
    pid: int
    ppid: int
    title: str  # "nginx: master process ...", "nginx: worker process", "... is shutting down", ...
    # The process group that vouched for this process when its executable and cwd could not be read.
    vouching_group: int | None = None

    @property
    def is_master(self) -> bool:
        return self.title.startswith("nginx: master process")

    @property
    def is_worker(self) -> bool:
        """A worker that still accepts connections (not one told to shut down)."""
        return self.title == "nginx: worker process"

    @property
    def is_shutting_down(self) -> bool:
        """A worker (or cache process) that was told to QUIT and is finishing what it serves."""
        return self.title.endswith("is shutting down")


def _stat_fields(stat_text: str) -> list[str]:
    # The command name in stat is in parentheses and may hold spaces: the fields after it are
    # state, PPID, process group, ...
    return stat_text[stat_text.rindex(")") + 2:].split()


def _read_process(pid: int, prefix: Path, vouching_group: int | None = None) -> NginxProcess | None:
    """The process `pid` if it is an nginx process whose working directory is `prefix` (resolved), or, when
    those cannot be read, an nginx process in `vouching_group` (see the module doc)."""
    proc = Path("/proc") / str(pid)
    try:
        fields = _stat_fields((proc / "stat").read_text())
        title = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return None  # gone
    try:
        exe = os.readlink(proc / "exe")
        cwd = os.readlink(proc / "cwd")
    except PermissionError:
        if vouching_group is not None and int(fields[2]) == vouching_group and title.startswith("nginx: "):
            return NginxProcess(pid, int(fields[1]), title, vouching_group)
        return None
    except OSError:
        return None  # gone, or a kernel thread
    if os.path.basename(exe).split(" ")[0] != "nginx" or cwd != str(prefix):
        return None
    return NginxProcess(pid, int(fields[1]), title)


def recorded_master(pid_file: Path) -> int | None:
    """The pid the instance's last master wrote to `pid_file`, alive or not (a killed master leaves it)."""
    try:
        return int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return None


def instance_processes(prefix: Path, vouching_group: int | None = None) -> list[NginxProcess]:
    """Every nginx process of the instance whose prefix is `prefix`, and those in `vouching_group` that this
    process may not read (see the module doc)."""
    prefix = prefix.resolve()  # /proc shows working directories without symlinks
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            process = _read_process(int(entry), prefix, vouching_group)
            if process:
                found.append(process)
    return found


def running_master(prefix: Path, pid_file: Path) -> NginxProcess | None:
    """The process named by `pid_file` if it is this instance's live master."""
    pid = recorded_master(pid_file)
    process = _read_process(pid, prefix.resolve()) if pid is not None else None
    return process if process and process.is_master else None


def workers_of(master: int, prefix: Path) -> list[NginxProcess]:
    """The children of `master` that are processes of this instance (workers, cache processes).

    A child of this instance's master is this instance's, so its title is enough when its executable and
    working directory cannot be read: root without CAP_SYS_PTRACE (a container's default) may not read
    them for processes of another user, and the workers run as nobody.
    """
    prefix = prefix.resolve()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        proc = Path("/proc") / entry
        try:
            if int(_stat_fields((proc / "stat").read_text())[1]) != master:
                continue
            title = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except (OSError, ValueError):
            continue
        process = _read_process(int(entry), prefix)
        if process:
            found.append(process)
        elif title.startswith("nginx: ") and not _readable(proc):
            found.append(NginxProcess(int(entry), master, title))
    return found


def _readable(proc: Path) -> bool:
    """Whether this process may read `proc`'s executable link (ptrace access), rather than being refused."""
    try:
        os.readlink(proc / "exe")
        return True
    except PermissionError:
        return False
    except OSError:
        return True  # gone, or a kernel thread: nothing to read, and not refused


def send_signal(process: NginxProcess, prefix: Path, sig: int) -> bool:
    """Signal `process` if it is still the same process of this instance; False when it is gone."""
    # A pidfd pins the process: re-checked through it, the signal cannot reach a recycled pid.
    try:
        fd = os.pidfd_open(process.pid)
    except OSError:
        return False
    try:
        if _read_process(process.pid, prefix.resolve(), process.vouching_group) is None:
            return False
        signal.pidfd_send_signal(fd, sig)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def is_alive(process: NginxProcess, prefix: Path) -> bool:
    """True while `process` is still the same process of this instance."""
    return _read_process(process.pid, prefix.resolve(), process.vouching_group) is not None


def stop_stale(prefix: Path, grace_seconds: float = 5.0) -> int:
    """Stop every process of the instance: QUIT (finish in-flight requests), then KILL after the grace.

    Returns how many there were. The last resort when the listening sockets they hold cannot be taken over
    (services/nginx/listeners.py); a new master otherwise starts beside them (services/nginx/retire.py).
    """
    stale = instance_processes(prefix)
    if not stale:
        return 0
    log.warning("stopping nginx processes left from a previous master",
                extra=logs.kv(pids=",".join(str(p.pid) for p in stale)))
    for process in stale:
        send_signal(process, prefix, signal.SIGQUIT)
    deadline = time.monotonic() + grace_seconds
    while time.monotonic() < deadline:
        if not instance_processes(prefix):
            return len(stale)
        time.sleep(0.05)
    for process in instance_processes(prefix):
        send_signal(process, prefix, signal.SIGKILL)
    deadline = time.monotonic() + grace_seconds
    while instance_processes(prefix) and time.monotonic() < deadline:
        time.sleep(0.02)
    return len(stale)

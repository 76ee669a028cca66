"""The listening sockets outlive nginx's masters: nginx-listeners holds them, `pyngress nginx` hands them to the
master it execs (nginx's NGINX variable), and a launcher without a holder takes them over from the nginx
processes still holding them (services/nginx/listeners.py)."""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable, Iterator

import pytest

from services.common.settings import Settings
from services.nginx import listeners
from services.nginx.launcher import bootstrap_config
from services.nginxconf import processes
from services.nginxconf.paths import NginxPaths
from services.nginxconf.render import render

from .conftest import REPO, Nginx, eventually


def _settings(nginx: Nginx) -> Settings:
    return Settings.from_flags(http_port=nginx.http_port, https_port=nginx.https_port, state_dir=str(nginx.state_dir),
                               run_dir=str(nginx.run_dir), enable_ssl_passthrough=nginx.ssl_passthrough)


def _holder_pids_on(port: int) -> str:
    return subprocess.run(["ss", "-Hltnp", f"sport = :{port}"], capture_output=True, text=True, check=True).stdout


def _connects(nginx: Nginx) -> bool:
    with socket.create_connection(("127.0.0.1", nginx.http_port), timeout=2):
        pass
    with socket.socket(socket.AF_UNIX) as unix:
        unix.settimeout(2)
        unix.connect(str(nginx.paths.config_socket))
    return True


class Holder:
    """`pyngress nginx-listeners` for one Nginx instance."""

    def __init__(self, nginx: Nginx) -> None:
        self.nginx = nginx
        self.log_path = nginx.base / "holder.log"
        self.process: subprocess.Popen | None = None

    def start(self) -> "Holder":
        command = [sys.executable, "-m", "services.cli", "nginx-listeners", *self.nginx.launcher_command()[4:]]
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
        eventually(self._answers)
        return self

    def _answers(self) -> bool:
        if self.process.poll() is not None:
            raise AssertionError(f"nginx-listeners exited with {self.process.returncode}:\n{self.log()}")
        with socket.socket(socket.AF_UNIX) as probe:
            probe.connect(str(self.nginx.paths.listeners_socket))
        return True

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.terminate()
        return self.process.wait(timeout=15)


@pytest.fixture
def instance() -> Iterator[Callable[..., tuple[Nginx, Holder]]]:
    """instance(ssl_passthrough=False) → an Nginx (not started) and its Holder (not started)."""
    made: list[tuple[Nginx, Holder, Path]] = []

    def make(**options) -> tuple[Nginx, Holder]:
        base = Path(tempfile.mkdtemp(prefix="pyngress-nginx-test-", dir="/tmp"))
        os.chmod(base, 0o711)  # nginx's workers (nobody) reach their temp directories inside
        nginx = Nginx(base, **options)
        holder = Holder(nginx)
        made.append((nginx, holder, base))
        return nginx, holder

    yield make
    for nginx, holder, base in made:
        nginx.close()
        if holder.process is not None:
            holder.stop()
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.parametrize("ssl_passthrough", [False, True])
@pytest.mark.parametrize("ipv6", [False, True])
def test_the_holder_opens_what_the_template_listens_on(ssl_passthrough, ipv6):
    paths = NginxPaths.of("/tmp/state", "/tmp/run")
    settings = Settings.from_flags(http_port=8080, https_port=8443, state_dir="/tmp/state", run_dir="/tmp/run",
                                   enable_ssl_passthrough=ssl_passthrough)
    conf = render(replace(bootstrap_config(settings), listen_ipv6=ipv6))

    assert listeners.listens_on_ipv6(conf, settings) is ipv6
    assert listeners.listen_addresses(conf) == {str(listener)
                                                for listener in listeners.nginx_listeners(settings, paths, ipv6)}
    # No reuseport: the sockets nginx would open beside an inherited one die with their master.
    assert not [line for line in conf.splitlines() if line.split()[:1] == ["listen"] and "reuseport" in line]


def test_the_master_inherits_the_sockets_the_holder_keeps(instance):
    nginx, holder = instance()
    holder.start()
    nginx.start()

    assert f"pid={holder.process.pid}," in _holder_pids_on(nginx.http_port)
    assert "using inherited sockets" in nginx.log()
    master = nginx.master_pid()
    inherited = [fd for fd in os.listdir(f"/proc/{master}/fd")
                 if os.readlink(f"/proc/{master}/fd/{fd}").startswith("socket:")]
    for fd in inherited:  # nginx leaves inherited sockets as they are: a blocking one would stall a worker
        flags = int(Path(f"/proc/{master}/fdinfo/{fd}").read_text().split("flags:")[1].split()[0], 8)
        assert flags & os.O_NONBLOCK, f"fd {fd} of the master is blocking"
    assert nginx.get("/").status == 404


def test_with_the_holder_connections_wait_while_no_nginx_runs(instance):
    nginx, holder = instance()
    holder.start()
    nginx.start()
    nginx.stop()  # QUIT: every nginx process exits
    assert processes.instance_processes(nginx.paths.prefix) == []

    waiting = socket.create_connection(("127.0.0.1", nginx.http_port), timeout=5)  # queued, not refused
    waiting.sendall(b"GET /queued HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\n\r\n")
    assert _connects(nginx)
    nginx.start()

    waiting.settimeout(10)
    assert waiting.recv(100).startswith(b"HTTP/1.1 404")  # the new master answered the queued request
    waiting.close()


def test_a_killed_master_is_replaced_without_a_moment_of_refusal(instance):
    nginx, holder = instance()
    holder.start()
    nginx.start()
    orphans = nginx.worker_pids()

    nginx.kill_master()
    assert _connects(nginx) and nginx.get("/").status == 404  # its workers still serve
    nginx.start()

    eventually(lambda: orphans.isdisjoint(p.pid for p in processes.instance_processes(nginx.paths.prefix)))
    assert "using inherited sockets" in nginx.log() and nginx.get("/").status == 404


def test_without_a_holder_a_relaunch_takes_the_sockets_over_from_the_killed_master_s_workers(instance):
    nginx, _ = instance()
    nginx.start()
    orphans = nginx.worker_pids()
    nginx.kill_master()

    nginx.start()

    assert "took over a listening socket from a running nginx process" in nginx.log()
    assert "stopping them" not in nginx.log()
    eventually(lambda: orphans.isdisjoint(p.pid for p in processes.instance_processes(nginx.paths.prefix)))
    assert _connects(nginx) and nginx.get("/").status == 404


def test_a_restarted_holder_takes_the_sockets_over_from_the_running_master(instance):
    nginx, holder = instance()
    nginx.start()  # no holder yet: the master holds its sockets alone
    holder.start()

    assert "took over a listening socket" in holder.log()
    assert f"pid={holder.process.pid}," in _holder_pids_on(nginx.http_port)
    nginx.kill_master()
    nginx.start()
    assert nginx.get("/").status == 404


def test_the_holder_puts_back_a_socket_file_an_exiting_nginx_removed(instance):
    nginx, holder = instance()
    holder.start()
    nginx.start()

    nginx.paths.config_socket.unlink()

    eventually(lambda: nginx.paths.config_socket.exists(), timeout=5)
    assert nginx.api("GET", "/healthz").status == 200


def test_the_holder_removes_the_socket_files_only_once_no_nginx_runs(instance):
    nginx, holder = instance()
    holder.start()
    nginx.start()

    assert holder.stop() == 0
    assert nginx.paths.config_socket.exists() and nginx.api("GET", "/healthz").status == 200  # nginx still serves
    holder.start()
    nginx.stop()
    assert holder.stop() == 0
    assert not nginx.paths.config_socket.exists() and not nginx.paths.listeners_socket.exists()


def test_a_second_holder_for_the_same_run_dir_is_refused(instance):
    nginx, holder = instance()
    holder.start()

    second = subprocess.run([sys.executable, "-m", "services.cli", "nginx-listeners", *nginx.launcher_command()[4:]],
                            cwd=REPO, capture_output=True, text=True, timeout=60)

    assert second.returncode == 2
    assert "another nginx-listeners answers on" in second.stderr


def test_an_nginx_conf_listening_elsewhere_is_replaced_by_the_bootstrap(instance):
    nginx, _ = instance()
    nginx.start()
    nginx.stop()
    other_port = nginx.config(http_port=nginx.http_port + 1 if nginx.http_port < 65535 else nginx.http_port - 1)
    nginx.paths.conf.write_text(render(other_port))

    nginx.start()

    assert "listens elsewhere than these settings" in nginx.log()
    assert nginx.get("/").status == 404


def test_in_a_terminal_a_resize_does_not_stop_nginx(instance):
    # A master with inherited sockets counts itself daemonized and takes SIGWINCH (sent to a terminal's
    # foreground process group when it is resized) for "stop accepting": the launcher keeps it out of that group.
    nginx, holder = instance()
    holder.start()
    command = " ".join(nginx.launcher_command())
    term = subprocess.Popen(["script", "-qfec", command, "/dev/null"], cwd=REPO, stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        master = eventually(lambda: processes.running_master(nginx.paths.prefix, nginx.paths.pid_file))
        def all_workers() -> set[int] | None:
            # worker_processes auto: one per CPU; the master may not have started them all yet.
            pids = nginx.worker_pids()
            return pids if len(pids) == os.cpu_count() else None

        workers = eventually(all_workers)
        # The terminal's foreground process group (tpgid in /proc/<pid>/stat): what a resize signals.
        stat = Path(f"/proc/{master.pid}/stat").read_text()
        foreground = int(stat[stat.rindex(")") + 2:].split()[5])
        assert foreground != os.getpgid(master.pid)

        os.killpg(foreground, signal.SIGWINCH)
        time.sleep(0.5)

        assert nginx.worker_pids() == workers and nginx.get("/").status == 404
        os.killpg(foreground, signal.SIGQUIT)  # as Ctrl-backslash: passed on, nginx stops gracefully
        eventually(lambda: not processes.instance_processes(nginx.paths.prefix))
    finally:
        term.kill()
        term.wait()

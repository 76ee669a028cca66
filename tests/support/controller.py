"""Run the whole controller (`pyngress up`: supervisord, nginx, watcher, syncer) as a user would."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterable, Sequence

import requests
import yaml

from tests.support import k8s
from tests.support.net import free_port, wait_for

VENV_BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parents[2]


class Controller:
    """`pyngress up` in its own run/state dirs on free ports; `stop()` (or the fixture) tears it down."""

    def __init__(self, workdir: Path, source_args: list[str], extra_args: Sequence[str] = ()) -> None:
        self.workdir = workdir
        self.run_dir = workdir / "run"
        self.state_dir = workdir / "state"
        self.http_port, self.https_port, self.healthz_port = free_port(), free_port(), free_port()
        self.status_port, self.ssl_passthrough_proxy_port = free_port(), free_port()
        self.args = [
            *source_args, f"--http-port={self.http_port}", f"--https-port={self.https_port}",
            f"--healthz-port={self.healthz_port}", f"--status-port={self.status_port}",
            f"--ssl-passthrough-proxy-port={self.ssl_passthrough_proxy_port}", f"--run-dir={self.run_dir}",
            f"--state-dir={self.state_dir}", *extra_args]
        self.log_path = workdir / "controller.log"
        self.proc: subprocess.Popen | None = None

    def start(self, wait: bool = True) -> "Controller":
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen([str(VENV_BIN / "pyngress"), "up", *self.args], stdout=log,
                                     stderr=subprocess.STDOUT, start_new_session=True, cwd=REPO)
        if wait:
            try:
                self.wait_healthy()
            except BaseException:
                self.stop()  # a controller that never became healthy must not outlive its test
                raise
        return self

    def wait_healthy(self, timeout: float = 30.0) -> None:
        def healthy() -> bool:
            # supervisord spawns its programs only after its first one-second poll: wake it (see _wait_woken).
            _wake_supervisord(self.run_dir / "supervisor.sock")
            return self.health().status_code == 200
        wait_for(healthy, timeout, what=f"/healthz 200 (log: {self.log_path})")

    def health(self) -> requests.Response:
        return requests.get(f"http://127.0.0.1:{self.healthz_port}/healthz", timeout=2)

    def get(self, path: str, host: str = "example.com", **kwargs) -> requests.Response:
        return self.request("GET", path, host, **kwargs)

    def request(self, method: str, path: str, host: str = "example.com", **kwargs) -> requests.Response:
        """One request to the HTTP port with `host` as its Host header."""
        headers = {"Host": host, **kwargs.pop("headers", {})}
        return requests.request(method, f"http://127.0.0.1:{self.http_port}{path}", headers=headers,
                                timeout=5, allow_redirects=False, **kwargs)

    def settled_reloads(self) -> float:
        """The reload count once it stops moving: a reload is counted just after nginx serves it, and a change
        written as several files may be applied in several syncs."""
        seen: list[float] = []

        def unchanged() -> bool:
            seen.append(self.metric("nginx_ingress_controller_success"))
            return len(seen) > 1 and seen[-1] == seen[-2]
        wait_for(unchanged, 30, interval=2.5, what="the reload count to settle")
        return seen[-1]

    def problems(self) -> list[str]:
        """What the status record says was refused or ignored (GET /status on the healthz port)."""
        return requests.get(f"http://127.0.0.1:{self.healthz_port}/status", timeout=5).json()["problems"]

    def metric(self, name: str, **labels: str) -> float:
        """The value of the first sample of `name` carrying every one of `labels`."""
        text = requests.get(f"http://127.0.0.1:{self.healthz_port}/metrics", timeout=2).text
        for line in text.splitlines():
            if (line.startswith(name + "{") or line.startswith(name + " ")) and \
                    all(f'{k}="{v}"' in line for k, v in labels.items()):
                return float(line.rsplit(" ", 1)[1])
        raise KeyError(f"metric {name} {labels or ''} not in /metrics")

    def nginx_conf(self) -> bytes:
        return (self.state_dir / "nginx" / "nginx.conf").read_bytes()

    def supervisorctl(self, *args: str) -> str:
        # Run from the run dir: from the repository, supervisorctl would read ./supervisord.conf.
        out = subprocess.run([str(VENV_BIN / "supervisorctl"), "-s", f"unix://{self.run_dir}/supervisor.sock", *args],
                             capture_output=True, text=True, timeout=30, cwd=self.run_dir)
        return out.stdout

    def pid(self, program: str) -> int:
        return int(self.supervisorctl("pid", program).strip())

    def pids(self) -> list[int]:
        """Every process of this controller: supervisord and everything it started (one session)."""
        assert self.proc is not None, "the controller was not started"
        return _pids_in_session(self.proc.pid)

    def kill9(self, program: str) -> int:
        pid = self.pid(program)
        os.kill(pid, signal.SIGKILL)
        return pid

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        if not self._wait_woken(timeout=40):
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        # Anything a killed program left behind (orphaned nginx workers) must not outlive the test.
        for pid in _pids_in_session(self.proc.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def _wait_woken(self, timeout: float) -> bool:
        """Wait for supervisord to exit, waking its loop every few milliseconds: it stops one program per turn and a
        turn in which no program writes anything lasts its whole one-second poll (a SIGCHLD does not end the
        poll), which made every stop take 4-5 s. A connection to its control socket ends the poll at once; the
        programs still stop one after another, in supervisord's order, with their own signals."""
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                self.proc.wait(timeout=0.02)
                return True
            except subprocess.TimeoutExpired:
                _wake_supervisord(self.run_dir / "supervisor.sock")
        return False


def _wake_supervisord(control_socket: Path) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        try:
            sock.connect(str(control_socket))
        except OSError:
            pass  # not listening yet, or gone


def _pids_in_session(sid: int) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.getsid(int(entry.name)) == sid:
                    pids.append(int(entry.name))
            except (ProcessLookupError, PermissionError):
                pass
    return pids


def tcp_ports_listened_by(pids: Iterable[int]) -> set[int]:
    """The TCP ports (IPv4 and IPv6) on which any of `pids` holds a listening socket."""
    inodes = set()
    for pid in pids:
        fd_dir = Path(f"/proc/{pid}/fd")
        try:
            fds = list(fd_dir.iterdir())
        except OSError:
            continue  # exited meanwhile
        for fd in fds:
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[len("socket:["):-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN; fields[9]: the socket's inode
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


class ManifestsCluster:
    """The cluster as a directory of manifests: apply writes a file per object, delete removes it."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)

    def _path(self, obj: dict) -> Path:
        meta = obj["metadata"]
        return self.directory / f"{obj['kind'].lower()}-{meta.get('namespace', '')}-{meta['name']}.yaml"

    def apply(self, *objects: dict) -> None:
        for obj in objects:
            self.write(self._path(obj).name, yaml.safe_dump(obj))

    def delete(self, *objects: dict) -> None:
        for obj in objects:
            self._path(obj).unlink(missing_ok=True)

    def write(self, filename: str, text: str) -> None:
        tmp = self.directory / f".{filename}.tmp"
        tmp.write_text(text)
        os.replace(tmp, self.directory / filename)
        # The watcher compares mtimes: make sure two writes within one clock tick still differ.
        time.sleep(0.01)


def start_manifests_controller(workdir: Path, extra_args: Sequence[str] = ()) -> tuple[Controller, ManifestsCluster]:
    """A running controller watching its own manifests directory, which holds IngressClass "nginx"."""
    cluster = ManifestsCluster(workdir / "manifests")
    cluster.apply(k8s.ingress_class("nginx"))
    return Controller(workdir, [f"--manifests={cluster.directory}"], extra_args).start(), cluster


class EchoBackends:
    """Echo backend processes, each on its own loopback address and a shared port."""

    def __init__(self) -> None:
        self.port = free_port()
        self.procs: dict[str, subprocess.Popen] = {}
        self.ips: dict[str, str] = {}

    def start(self, name: str) -> str:
        ip = f"127.0.{len(self.ips) // 250 + 10}.{len(self.ips) % 250 + 2}"
        self.ips[name] = ip
        self.procs[name] = subprocess.Popen(
            [sys.executable, str(REPO / "examples" / "echo_backend.py"), "--name", name, "--host", ip,
             "--port", str(self.port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(lambda: requests.get(f"http://{ip}:{self.port}/", timeout=1).ok, 10, what=f"echo backend {name}")
        return ip

    def stop(self) -> None:
        for proc in self.procs.values():
            proc.kill()
            proc.wait()

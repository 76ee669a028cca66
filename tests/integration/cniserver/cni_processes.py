"""Real cniserver and cniworker processes, and the real pyngress-cni plugin driven like a container runtime.

Shared by the cniserver integration tests and the CNI end-to-end tests.
"""
from __future__ import annotations

import ipaddress
import json
import os
import random
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.net import wait_for

VENV_BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parents[3]
STUB_WORKER = Path(__file__).with_name("stub_worker.py")
PLUGIN = VENV_BIN / "pyngress-cni"
# The server with a shorter request timeout than the kubelet's 2 minutes (no flag sets it).
_SERVER_WITH_TIMEOUT = ("import sys; from services.common.settings import parse; "
                        "from services.cniserver.main import run; "
                        "sys.exit(run(parse(sys.argv[2:]), request_timeout=float(sys.argv[1])))")


class Proc:
    """A child process in its own session, logging to a file."""

    def __init__(self, name: str, argv: list[str], log_path: Path) -> None:
        self.name = name
        self.log_path = log_path
        with open(log_path, "ab") as log:
            self.popen = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=REPO,
                                          start_new_session=True)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self, timeout: float = 10.0) -> int:
        """SIGTERM, then SIGKILL if it does not exit in time; its exit status."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.popen.wait()

    def kill(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
        self.popen.wait()


class CniStack:
    """A cniserver and its workers in private run/state directories; `stop()` ends every process it started."""

    def __init__(self, workdir: Path, pod_cidr: str | None = None, log_level: str = "debug",
                 extra_flags: tuple[str, ...] = ()) -> None:
        self.workdir = workdir
        self.extra_flags = list(extra_flags)
        self.log_level = log_level
        self.run_dir = workdir / "run"
        self.state_dir = workdir / "state"
        self.socket = self.run_dir / "cni" / "cni-server.sock"
        self.pod_cidr = pod_cidr
        self.server: Proc | None = None
        self.workers: list[Proc] = []
        self._count = 0

    def flags(self) -> list[str]:
        flags = [f"--run-dir={self.run_dir}", f"--state-dir={self.state_dir}", f"--log-level={self.log_level}",
                 *self.extra_flags]
        return flags + ([f"--pod-cidr={self.pod_cidr}"] if self.pod_cidr else [])

    def start_server(self, request_timeout: float | None = None, wait: bool = True) -> Proc:
        if request_timeout is None:
            argv = [str(VENV_BIN / "pyngress"), "cniserver", *self.flags()]
        else:
            argv = [sys.executable, "-c", _SERVER_WITH_TIMEOUT, str(request_timeout), *self.flags()]
        self.server = self._spawn("cniserver", argv)
        if wait:
            wait_for(lambda: curl(self.socket, "/healthz")[0] == 200, what=f"cniserver health ({self.server.log_path})")
        return self.server

    def start_worker(self, stub: bool = False) -> Proc:
        """A real cniworker; `stub` runs its loop with the stand-in handler of stub_worker.py."""
        argv = [sys.executable, str(STUB_WORKER), *self.flags()] if stub else \
            [str(VENV_BIN / "pyngress"), "cniworker", *self.flags()]
        worker = self._spawn("stubworker" if stub else "cniworker", argv)
        self.workers.append(worker)
        return worker

    def wait_workers(self, count: int) -> None:
        wait_for(lambda: self.metric("pyngress_cni_workers_registered") == count,
                 what=f"{count} worker(s) registered")

    def metric(self, name: str, labels: str = "") -> float | None:
        status, text = curl(self.socket, "/metrics")
        for line in text.splitlines():
            if line.startswith(name + labels + " ") or (not labels and line.startswith(name + "{")):
                return float(line.rsplit(" ", 1)[1])
        return None

    def stop(self) -> None:
        for proc in [*self.workers, *([self.server] if self.server else [])]:
            proc.stop(timeout=5)

    def _spawn(self, name: str, argv: list[str]) -> Proc:
        self._count += 1
        self.workdir.mkdir(parents=True, exist_ok=True)
        return Proc(name, argv, self.workdir / f"{name}-{self._count}.log")


def curl(socket_path: Path, path: str, data: bytes | None = None, as_user: str | None = None,
         method: str | None = None) -> tuple[int, str]:
    """One HTTP request over the Unix socket with curl; (status, body). Status 0: could not connect."""
    argv = ["curl", "-sS", "--max-time", "30", "--unix-socket", str(socket_path), "-o", "-",
            "-w", "\n%{http_code}", f"http://pyngress{path}"]
    if data is not None:
        argv += ["-H", "Content-Type: application/json", "--data-binary", "@-"]
    if method:
        argv += ["-X", method]
    if as_user:
        argv = ["setpriv", f"--reuid={as_user}", "--regid=nogroup", "--clear-groups", *argv]
    done = subprocess.run(argv, input=data, capture_output=True)
    body, _, status = done.stdout.decode(errors="replace").rpartition("\n")
    return int(status or 0), body


@dataclass
class PluginRun:
    returncode: int
    stdout: str
    stderr: str

    @property
    def result(self) -> dict[str, Any] | None:
        return json.loads(self.stdout) if self.stdout.strip() else None


def run_plugin(command: str, config: dict[str, Any] | bytes, container_id: str = "", netns: str = "",
               ifname: str = "eth0", cni_args: str | None = None, socket_path: Path | None = None,
               extra_env: dict[str, str] | None = None, plugin: Path = PLUGIN) -> PluginRun:
    """Execute pyngress-cni (or another plugin executable: see plugins.py) exactly as a container runtime
    does: CNI_* in the environment, config on stdin."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "CNI_COMMAND": command, "CNI_PATH": "/usr/lib/cni"}
    for key, value in (("CNI_CONTAINERID", container_id), ("CNI_NETNS", netns), ("CNI_IFNAME", ifname),
                       ("CNI_ARGS", cni_args)):
        if value:
            env[key] = value
    if socket_path is not None:
        env["PYNGRESS_CNI_SOCKET"] = str(socket_path)
    env.update(extra_env or {})
    stdin = config if isinstance(config, bytes) else json.dumps(config).encode()
    done = subprocess.run([str(plugin)], input=stdin, env=env, capture_output=True, timeout=180)
    return PluginRun(done.returncode, done.stdout.decode(), done.stderr.decode())


def pod_args(name: str, namespace: str = "default") -> str:
    return f"IgnoreUnknown=1;K8S_POD_NAMESPACE={namespace};K8S_POD_NAME={name};K8S_POD_UID=0b7f2c1e-{name}"


def stub_network(name: str = "stubnet", **stub: Any) -> dict[str, Any]:
    """A network configuration for stub workers; `stub` steers their stand-in handler (see stub_worker.py)."""
    config: dict[str, Any] = {"cniVersion": "1.1.0", "name": name, "type": "pyngress-cni"}
    if stub:
        config["stub"] = stub
    return config


def free_subnet(prefix: int = 24) -> ipaddress.IPv4Network:
    """A random 10.x.y.0/`prefix` that no route on this host overlaps (other tests run at the same time)."""
    routes = json.loads(subprocess.run(["ip", "-j", "route", "show", "table", "all"], capture_output=True,
                                       check=True).stdout)
    routed = [ipaddress.ip_network(r["dst"]) for r in routes
              if r.get("dst", "default") != "default" and ":" not in r["dst"]]
    while True:
        first = f"10.{random.randint(100, 199)}.{random.randint(0, 255)}.0"
        subnet = ipaddress.IPv4Network(f"{first}/{prefix}", strict=False)
        if not any(subnet.overlaps(other) for other in routed):
            return subnet

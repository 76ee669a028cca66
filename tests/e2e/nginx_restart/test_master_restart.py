"""nginx's master killed, crashing, restarted or reloaded under a steady load: not one request or connection lost.

The listening sockets belong to the nginx-listeners program (services/nginx/holder.py), so they stay open
through every restart (the probes connect every 10 ms); a killed master's workers keep serving until the new
master runs workers, then finish what they serve and exit. The load (steady_load.py) mixes keep-alive
connections, a new connection per request and slow requests (600 ms) that are in flight when the master goes.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
from typing import Callable, Iterator

import pytest

from services.nginxconf import processes
from services.nginxconf.processes import NginxProcess
from tests.support import k8s
from tests.support.controller import Controller, start_manifests_controller
from tests.support.net import wait_for

from .steady_load import RecordingBackend, SteadyLoad, answered_but_not_served_once, served_twice

HOST = "steady.example.com"
# Well within nginx's worker_shutdown_timeout (240 s): the slowest request in flight takes 600 ms.
ORPHANS_GONE_SECONDS = 10.0
SETTLE_SECONDS = 0.7  # steady load between restarts


@pytest.fixture(scope="module")
def backend() -> Iterator[RecordingBackend]:
    server = RecordingBackend("STEADY", "127.0.88.2")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def controller(tmp_path_factory, backend) -> Iterator[Controller]:
    controller, cluster = start_manifests_controller(tmp_path_factory.mktemp("restart"))
    cluster.apply(k8s.service("steady"), k8s.endpoint_slice("steady", [backend.ip], backend.port),
                  k8s.ingress("steady", [k8s.rule(HOST, ("/", "Prefix", "steady", 80))]))
    wait_for(lambda: controller.get("/", HOST).status_code == 200, 15, what=f"{HOST} served")
    yield controller
    controller.stop()


def _prefix(controller: Controller):
    return controller.state_dir / "nginx"


def _instance(controller: Controller) -> list[NginxProcess]:
    return processes.instance_processes(_prefix(controller))


def _serving_master(controller: Controller, not_pid: int) -> int:
    """The pid of a master other than `not_pid` once it runs workers; 0 before."""
    pid = controller.pid("nginx")
    if pid in (0, not_pid):
        return 0
    workers = [w for w in processes.workers_of(pid, _prefix(controller)) if w.is_worker]
    return pid if workers else 0


def _under_load(controller: Controller, backend: RecordingBackend, times: int,
                restart: Callable[[int], None]) -> tuple[SteadyLoad, list[float]]:
    """Run `restart(old master pid)` `times` times under the steady load; check each one's aftermath.

    Returns the load (what the clients saw) and, for each restart, how long the previous processes took to go.
    """
    load = SteadyLoad(controller.http_port, HOST, config_socket=controller.run_dir / "nginx" / "config.sock").start()
    gone_after = []
    try:
        time.sleep(SETTLE_SECONDS)
        for _ in range(times):
            old_master = controller.pid("nginx")
            old = {p.pid for p in _instance(controller)}
            started = time.monotonic()
            restart(old_master)
            wait_for(lambda: _serving_master(controller, old_master), 15, what="a new nginx master serving")
            wait_for(lambda: old.isdisjoint(p.pid for p in _instance(controller)), ORPHANS_GONE_SECONDS,
                     interval=0.02, what=f"the previous nginx processes gone ({old})")
            gone_after.append(time.monotonic() - started)
            time.sleep(SETTLE_SECONDS)
    finally:
        load.stop()
    return load, gone_after


def _assert_nothing_lost(load: SteadyLoad, backend: RecordingBackend) -> None:
    outcome = load.outcome
    print(outcome.summary())
    assert outcome.lost == [], f"lost requests: {outcome.lost[:10]}"
    assert outcome.probe_failures == [], f"connects failed: {outcome.probe_failures[:10]}"
    assert served_twice(backend, load) == []
    assert answered_but_not_served_once(backend, load) == []
    assert len(outcome.ok) > 200 and outcome.probe_connects > 100  # the load really ran


def test_kill_9_of_the_master_loses_no_request_three_times_in_a_row(controller, backend):
    load, gone_after = _under_load(controller, backend, 3, lambda master: os.kill(master, signal.SIGKILL))

    _assert_nothing_lost(load, backend)
    print(f"previous workers gone after {[round(s, 2) for s in gone_after]} s")


def test_a_master_that_crashes_by_itself_loses_no_request(controller, backend):
    # SIGSEGV stands for a crash: the master dies without signalling its workers, as with SIGKILL.
    load, _ = _under_load(controller, backend, 1, lambda master: os.kill(master, signal.SIGSEGV))

    _assert_nothing_lost(load, backend)


def test_supervisorctl_restart_nginx_loses_no_request_three_times_in_a_row(controller, backend):
    def restart(master: int) -> None:
        out = controller.supervisorctl("restart", "nginx")
        assert "nginx: started" in out, out

    load, _ = _under_load(controller, backend, 3, restart)

    _assert_nothing_lost(load, backend)


def test_a_reload_loses_no_request(controller, backend):
    load = SteadyLoad(controller.http_port, HOST, config_socket=controller.run_dir / "nginx" / "config.sock").start()
    try:
        time.sleep(SETTLE_SECONDS)
        master = controller.pid("nginx")
        for _ in range(2):
            workers = {w.pid for w in processes.workers_of(master, _prefix(controller))}
            controller.supervisorctl("signal", "HUP", "nginx")
            wait_for(lambda: workers.isdisjoint(p.pid for p in _instance(controller)), ORPHANS_GONE_SECONDS,
                     interval=0.02, what="the workers of the previous configuration gone")
            time.sleep(SETTLE_SECONDS)
        assert controller.pid("nginx") == master
    finally:
        load.stop()

    _assert_nothing_lost(load, backend)


def test_the_listening_sockets_belong_to_nginx_listeners(controller):
    holder = controller.pid("nginx-listeners")
    listening = subprocess.run(["ss", "-Hltnp", f"sport = :{controller.http_port}"], capture_output=True,
                               text=True, check=True).stdout
    lines = listening.strip().splitlines()
    assert all(f"pid={holder}," in line and '"nginx"' in line for line in lines), listening
    # One socket per family (0.0.0.0 and [::]) shared by every worker: no reuseport.
    assert sorted(line.split()[3].rsplit(":", 1)[0] for line in lines) == ["0.0.0.0", "[::]"], listening


def test_a_restarted_nginx_listeners_takes_the_sockets_back_from_nginx(controller, backend):
    old_holder = controller.kill9("nginx-listeners")
    wait_for(lambda: controller.pid("nginx-listeners") not in (0, old_holder), 10, what="nginx-listeners restarted")
    holder = controller.pid("nginx-listeners")
    wait_for(lambda: f"pid={holder}," in subprocess.run(
        ["ss", "-Hltnp", f"sport = :{controller.http_port}"], capture_output=True, text=True).stdout, 5,
        what="the new nginx-listeners holding the HTTP port")

    # The sockets it took over from the running master outlive that master too.
    load, _ = _under_load(controller, backend, 1, lambda master: os.kill(master, signal.SIGKILL))

    _assert_nothing_lost(load, backend)

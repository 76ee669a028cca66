"""Reload storms (issue 31, attack 5): a tenant rewriting a setting that needs a reload gets at most
--sync-rate-limit reloads a second, the last value wins, other tenants' new routes do not wait, and old workers
still draining stay bounded."""
from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from tests.e2e.ingress.scenarios import Stage
from tests.support import k8s
from tests.support.controller import Controller, start_manifests_controller
from tests.support.net import wait_for

PREFIX = "nginx.ingress.kubernetes.io/x-forwarded-prefix"  # a proxy_set_header in the location: a reload
CONFIGMAP = "ingress/controller"


def prefixed(name: str, host: str, value: str) -> dict:
    return k8s.ingress(name, [k8s.rule(host, ("/", "Prefix", "storm", 80))], annotations={PREFIX: value})


def seen_prefix(stage: Stage, host: str) -> str | None:
    """The X-Forwarded-Prefix the backend received (the echo backend sends back the request's headers)."""
    resp = stage.controller.get("/", host)
    assert resp.status_code == 200, f"{host} answered {resp.status_code} meanwhile"
    return resp.json()["headers"].get("x-forwarded-prefix")


@pytest.fixture
def stage(manifests_controller, echo):
    controller, cluster = manifests_controller
    return Stage(controller, cluster, echo)


def test_thirty_changes_in_fifteen_seconds_make_a_handful_of_reloads_and_the_last_wins(stage):
    host = "storm.rate.example"
    stage.cluster.apply(*stage.backend("STORM", "storm"), prefixed("storm", host, "/v0"))
    wait_for(lambda: seen_prefix(stage, host) == "/v0", 15, what="the first value")
    before = stage.controller.settled_reloads()

    started = time.monotonic()
    answers = []
    for i in range(1, 31):
        stage.cluster.apply(prefixed("storm", host, f"/v{i}"))
        answers.append(stage.controller.get("/", host).status_code)
        time.sleep(max(0.0, started + i * 0.5 - time.monotonic()))
    wait_for(lambda: seen_prefix(stage, host) == "/v30", 15, what="the last value applied")
    elapsed = time.monotonic() - started
    reloads = stage.controller.settled_reloads() - before

    # A token bucket of one, refilled at 0.3/s: one reload at once, then one per 3.3 s at most (issue: 30 of 30).
    assert reloads <= 1 + 0.3 * elapsed, f"{reloads} reloads in {elapsed:.1f}s"
    assert reloads <= 7
    assert seen_prefix(stage, host) == "/v30"
    # While a reload waits, the path keeps the settings nginx runs: never a 404. Between a reload and the push of
    # the routes that follows it, the route still names the profile the reload removed (503, not other settings):
    # a request 0.5 s apart can fall into each such moment once.
    assert 404 not in answers and answers.count(200) >= len(answers) - reloads, answers


def test_a_new_route_is_served_while_a_reload_waits(tmp_path, echo):
    controller, cluster = start_manifests_controller(tmp_path, ["--sync-rate-limit=0.1"])  # a reload per 10 s
    try:
        stage = Stage(controller, cluster, echo)
        host = "waiting.rate.example"
        stage.cluster.apply(*stage.backend("STORM", "storm"), prefixed("waiting", host, "/a"))
        wait_for(lambda: seen_prefix(stage, host) == "/a", 25, what="the first value")  # just reloaded for it

        stage.cluster.apply(prefixed("waiting", host, "/b"))
        stage.cluster.apply(k8s.ingress("newcomer", [k8s.rule("newcomer.rate.example", ("/", "Prefix", "storm", 80))]))
        stage.expect("newcomer.rate.example", "/", "STORM", timeout=3)
        assert seen_prefix(stage, host) == "/a"  # the reload for /b still waits for its token
        waits = stage.controller.health().json()["reload_waits_seconds"]
        assert waits is not None and 0 < waits <= 10  # /healthz says so (its detail, to a loopback client)
        wait_for(lambda: seen_prefix(stage, host) == "/b", 15, what="the waiting reload")
        wait_for(lambda: stage.controller.health().json()["reload_waits_seconds"] is None, 5,
                 what="no reload waiting once it happened")
    finally:
        controller.stop()


def settled_old_workers(controller: Controller, bound: int) -> int:
    """How many workers drain once the generations past `bound` are retired, which follows the reload by a moment
    (the last count seen when that takes over 3 s)."""
    seen: list[int] = []

    def bounded() -> bool:
        seen.append(len(old_workers(controller.pids())))
        return seen[-1] <= bound
    try:
        wait_for(bounded, 3, what=f"at most {bound} generations draining")
    except AssertionError:
        pass
    return seen[-1]


def old_workers(pids: list[int]) -> list[int]:
    """nginx workers that were told to shut down and still finish what they serve."""
    found = []
    for pid in pids:
        try:
            title = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").strip()
        except OSError:
            continue
        if title == b"nginx: worker process is shutting down":
            found.append(pid)
    return found


def slow_upload(port: int, host: str) -> socket.socket:
    """A request whose body never finishes: nginx reads it, so the worker holding it keeps draining."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(f"POST / HTTP/1.1\r\nHost: {host}\r\nContent-Length: 1000000\r\n\r\n".encode() + b"x" * 1000)
    return sock


def closed_by_nginx(sock: socket.socket) -> bool:
    sock.settimeout(0.2)
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


def test_old_workers_draining_are_bounded_by_generations(tmp_path, echo):
    controller, cluster = start_manifests_controller(
        tmp_path, [f"--configmap={CONFIGMAP}", "--sync-rate-limit=50", "--max-draining-worker-generations=2"])
    uploads: list[socket.socket] = []
    try:
        stage = Stage(controller, cluster, echo)
        host = "drain.rate.example"
        # One worker per generation: each slow upload holds exactly one generation's only worker.
        namespace, name = CONFIGMAP.split("/")
        cluster.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace},
                       "data": {"worker-processes": "1"}})
        stage.cluster.apply(*stage.backend("STORM", "storm"), prefixed("drain", host, "/g0"))
        wait_for(lambda: seen_prefix(stage, host) == "/g0", 15, what="the first value")
        counts = []
        for generation in range(1, 9):
            uploads.append(slow_upload(controller.http_port, host))
            time.sleep(0.3)  # accepted by the current worker before it is retired
            stage.cluster.apply(prefixed("drain", host, f"/g{generation}"))
            wait_for(lambda: seen_prefix(stage, host) == f"/g{generation}", 10, what=f"reload {generation}")
            counts.append(settled_old_workers(controller, 2))
        # Without the bound, each of the 8 reloads would leave its worker draining for worker_shutdown_timeout.
        assert max(counts) <= 2, counts
        assert counts[-1] == 2
        # The oldest were stopped (their uploads cut); the two newest generations still drain theirs.
        assert [closed_by_nginx(sock) for sock in uploads] == [True] * 6 + [False] * 2
    finally:
        for sock in uploads:
            sock.close()
        controller.stop()

"""The load-balancing broker with real worker processes (the worker loop with a stand-in handler).

Concurrency is shown by hand-offs between requests (one waits for a file the other creates), not by
timing: a request that waits for another can only finish if both ran at once.
"""
from __future__ import annotations

import os
import signal
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.integration.cniserver.cni_processes import CniStack, PluginRun, curl, pod_args, run_plugin, stub_network
from tests.support.net import wait_for


def add(stack: CniStack, container: str, **stub) -> PluginRun:
    return run_plugin("ADD", stub_network(**stub), container, f"/var/run/netns/{container}",
                      cni_args=pod_args(container), socket_path=stack.socket)


def test_different_containers_run_at_once_and_one_container_never_does(stack: CniStack, workdir: Path):
    stack.start_worker(stub=True)
    stack.wait_workers(1)
    handoff, events = workdir / "handoff", workdir / "events"
    with ThreadPoolExecutor(4) as pool:
        waiting = pool.submit(add, stack, "pod-a", wait_for=str(handoff))
        creating = pool.submit(add, stack, "pod-b", touch=str(handoff))
        assert waiting.result().returncode == 0 and creating.result().returncode == 0
        same = [pool.submit(add, stack, "pod-same", record=str(events), sleep=0.2) for _ in range(3)]
        assert [run.result().returncode for run in same] == [0, 0, 0]
    assert events.read_text().split("\n")[:-1] == ["start pod-same", "end pod-same"] * 3


def test_an_idle_worker_gets_the_next_request(stack: CniStack, workdir: Path):
    first, second = stack.start_worker(stub=True), stack.start_worker(stub=True)
    stack.wait_workers(2)
    release = workdir / "release"
    with ThreadPoolExecutor(2) as pool:
        runs = [pool.submit(add, stack, f"pod-{i}", touch=str(workdir / f"started-{i}"), wait_for=str(release))
                for i in range(2)]
        pids = {wait_for(lambda i=i: (workdir / f"started-{i}").read_text(), what=f"pod-{i} started") for i in range(2)}
        release.touch()
        assert [run.result().returncode for run in runs] == [0, 0]
    assert pids == {str(first.pid), str(second.pid)}


def test_a_worker_killed_mid_request_fails_it_with_code_11_and_the_rest_go_to_a_live_worker(
        stack: CniStack, workdir: Path):
    workers = {stack.start_worker(stub=True).pid, stack.start_worker(stub=True).pid}
    stack.wait_workers(2)
    started = workdir / "started"
    with ThreadPoolExecutor(1) as pool:
        hanging = pool.submit(add, stack, "pod-hang", touch=str(started), hang=True)
        victim = int(wait_for(started.read_text, what="the hanging request to start"))
        os.kill(victim, signal.SIGKILL)
        failed = hanging.result()
    assert failed.returncode == 1
    assert failed.result["code"] == 11 and f"(pid {victim}) running this request is gone" in failed.result["msg"]
    stack.wait_workers(1)
    survivor = (workers - {victim}).pop()
    for container in ("pod-hang", "pod-next"):  # the retry included: the container is not left locked
        retried = add(stack, container)
        assert retried.returncode == 0 and retried.result["stub"]["pid"] == survivor


def test_a_draining_worker_finishes_its_request_and_gets_no_new_one(stack: CniStack, workdir: Path):
    draining, staying = stack.start_worker(stub=True), stack.start_worker(stub=True)
    stack.wait_workers(2)
    started, release = workdir / "started", workdir / "release"
    with ThreadPoolExecutor(1) as pool:
        busy = pool.submit(add, stack, "pod-busy", touch=str(started), wait_for=str(release))
        busy_pid = int(wait_for(started.read_text, what="the request to start"))
        leaving = draining if busy_pid == draining.pid else staying
        leaving.popen.send_signal(signal.SIGTERM)
        stack.wait_workers(1)
        others = [add(stack, f"pod-{i}") for i in range(3)]
        release.touch()
        assert busy.result().returncode == 0
    assert {run.result["stub"]["pid"] for run in others} == {({draining.pid, staying.pid} - {leaving.pid}).pop()}
    assert leaving.popen.wait(10) == 0


def test_a_request_without_an_answer_in_time_fails_with_code_11_and_its_retry_waits_for_it(workdir: Path):
    stack = CniStack(workdir, pod_cidr="10.250.0.0/24")
    try:
        stack.start_server(request_timeout=1.0)
        nobody = add(stack, "pod-early")
        assert nobody.result["code"] == 11 and "no cniworker registered within 1s" in nobody.result["msg"]
        stack.start_worker(stub=True)
        stack.wait_workers(1)
        events, release = workdir / "events", workdir / "release"
        slow = add(stack, "pod-slow", record=str(events), wait_for=str(release))
        assert slow.result["code"] == 11 and "no answer within 1s" in slow.result["msg"]
        retry = add(stack, "pod-slow", record=str(events))  # queued behind the first, which still runs
        assert retry.result["code"] == 11
        release.touch()
        wait_for(lambda: events.read_text() == "start pod-slow\nend pod-slow\n", what="the first request to end")
        assert add(stack, "pod-slow", record=str(events)).returncode == 0
        assert events.read_text().count("start pod-slow") == 2  # the timed-out retry never ran
    finally:
        stack.stop()


def test_workers_register_again_with_a_restarted_server(stack: CniStack):
    stack.start_worker(stub=True)
    stack.wait_workers(1)
    assert stack.server.stop() == 0
    stack.start_server()
    stack.wait_workers(1)
    assert add(stack, "pod-after-restart").returncode == 0


def test_sigterm_stops_accepting_and_answers_the_request_in_flight(stack: CniStack, workdir: Path):
    stack.start_worker(stub=True)
    stack.wait_workers(1)
    started, release = workdir / "started", workdir / "release"
    with ThreadPoolExecutor(1) as pool:
        in_flight = pool.submit(add, stack, "pod-inflight", touch=str(started), wait_for=str(release))
        wait_for(started.exists, what="the request to reach the worker")
        stack.server.popen.send_signal(signal.SIGTERM)
        wait_for(lambda: curl(stack.socket, "/healthz")[0] == 0, what="the socket to stop accepting")
        release.touch()
        assert in_flight.result().returncode == 0
    assert stack.server.popen.wait(10) == 0
    assert not stack.socket.exists()

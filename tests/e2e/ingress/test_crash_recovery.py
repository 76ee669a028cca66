"""kill -9 of each supervised process in turn: supervisord restarts it and routes answer again.

tests/e2e/nginx_restart/ checks the nginx master's restarts under load, request by request."""
import time

import pytest

from tests.e2e.ingress.scenarios import Stage
from tests.support import k8s
from tests.support.controller import start_manifests_controller
from tests.support.net import wait_for

HOSTS = [f"crash{i}.example.com" for i in range(3)]


@pytest.fixture(scope="module")
def stage(tmp_path_factory, echo):
    controller, cluster = start_manifests_controller(tmp_path_factory.mktemp("crash"))
    stage = Stage(controller, cluster, echo)
    cluster.apply(*stage.backend("CRASH"))
    cluster.apply(k8s.ingress("crash", [k8s.rule(h, ("/", "Prefix", "crash", 80)) for h in HOSTS]))
    for host in HOSTS:
        stage.expect(host, "/", "CRASH")
    yield stage
    controller.stop()


def _all_routes_answer(stage: Stage) -> bool:
    return all(stage.served_by(h, "/") == "CRASH" for h in HOSTS)


@pytest.mark.parametrize("program", ["watcher", "syncer", "nginx-listeners"])
def test_killed_component_is_restarted_and_routes_keep_answering(stage, program):
    old_pid = stage.controller.kill9(program)
    wait_for(lambda: stage.controller.pid(program) not in (0, old_pid), 5, what=f"{program} restarted")
    wait_for(lambda: _all_routes_answer(stage), 5, what="routes answering")
    # The restarted piece picks up new changes too.
    stage.cluster.apply(k8s.ingress(f"after-{program}", [k8s.rule(f"after-{program}.example.com",
                                                                    ("/", "Prefix", "crash", 80))]))
    stage.expect(f"after-{program}.example.com", "/", "CRASH")


def test_killed_nginx_master_is_replaced_and_never_refuses_or_serves_an_empty_table(stage):
    old_pid = stage.controller.kill9("nginx")
    seen: list[str] = []
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            seen.append(stage.served_by(HOSTS[0], "/"))
        except Exception as err:  # the listening sockets outlive the master: nothing may be refused
            seen.append(f"down: {err}")
        if stage.controller.pid("nginx") not in (0, old_pid) and len(seen) > 10:
            break
        time.sleep(0.02)
    assert set(seen) == {"CRASH"}, f"while the master was replaced: {sorted(set(seen))}"
    assert stage.controller.pid("nginx") not in (0, old_pid), "no new master within 5 s"
    assert _all_routes_answer(stage)

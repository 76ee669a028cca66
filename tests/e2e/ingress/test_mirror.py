"""mirror-target, mirror-host, mirror-request-body through the whole controller: the mirror gets a copy of each
request, the client gets the backend's answer, and the request is logged for its own backend."""
from __future__ import annotations

from typing import Iterator

import pytest
import requests

from tests.e2e.ingress.scenarios import Stage
from tests.support import k8s
from tests.support.auth_service import AuthService, running_auth_service
from tests.support.net import wait_for

PREFIX = "nginx.ingress.kubernetes.io"


@pytest.fixture(scope="module")
def mirror_service() -> Iterator[AuthService]:
    yield from running_auth_service()  # it records what it is sent, and answers 200


def test_requests_are_copied_to_the_mirror(manifests_controller, echo, mirror_service):
    controller, cluster = manifests_controller
    stage = Stage(controller, cluster, echo)
    target = f"http://127.0.0.1:{mirror_service.port}/copy$request_uri"
    cluster.apply(*stage.backend("MAIN"),
                  k8s.ingress("mirrored", [k8s.rule("mirrored.example.com", ("/", "Prefix", "main", 80))],
                              annotations={f"{PREFIX}/mirror-target": target, f"{PREFIX}/mirror-host": "shadow.internal"}),
                  k8s.ingress("bodiless", [k8s.rule("bodiless.example.com", ("/", "Prefix", "main", 80))],
                              annotations={f"{PREFIX}/mirror-target": target, f"{PREFIX}/mirror-request-body": "off"}))
    stage.expect("mirrored.example.com", "/", "MAIN")
    stage.expect("bodiless.example.com", "/", "MAIN")
    url = f"http://127.0.0.1:{controller.http_port}"

    def copy_of(path: str) -> dict | None:
        # Copies go out beside the requests: those of the waits above may still arrive, in any order.
        return next((copy for copy in list(mirror_service.seen) if copy["path"] == path), None)

    answer = requests.post(url + "/page?x=1", data=b"hello mirror", headers={"Host": "mirrored.example.com",
                                                                          "X-Test-Verdict": "allow-quietly"}, timeout=5)
    assert answer.status_code == 200 and answer.json()["backend"] == "MAIN"
    assert answer.json()["body_bytes"] == len(b"hello mirror")
    copy = wait_for(lambda: copy_of("/copy/page?x=1"), 10, what="the copy")
    assert copy["method"] == "POST"
    assert copy["headers"]["host"] == "shadow.internal" and copy["headers"]["content-length"] == "12"

    requests.post(url + "/nobody", data=b"secret body", headers={"Host": "bodiless.example.com",
                                                                 "X-Test-Verdict": "allow-quietly"}, timeout=5)
    copy = wait_for(lambda: copy_of("/copy/nobody"), 10, what="the copy")
    assert copy["headers"].get("content-length") in (None, "0")
    assert copy["headers"]["host"] == f"127.0.0.1:{mirror_service.port}"  # the target's host by default

    # The mirror's subrequest does not change what the request is logged and counted for.
    requests.get(url + "/logged-once", headers={"Host": "mirrored.example.com",
                                                "X-Test-Verdict": "allow-quietly"}, timeout=5)
    wait_for(lambda: "/logged-once" in controller.log_path.read_text(), 10, what="the access log line")
    [line] = [line for line in controller.log_path.read_text().splitlines() if "GET /logged-once" in line]
    assert "[default-main-80]" in line, line

"""HTTPRoute RequestMirror through real nginx, as the conformance cases httproute-request-mirror,
httproute-request-multiple-mirrors and httproute-request-percentage-mirror check it: the client gets the main
backend's answer, each mirror a copy of the request; a mirror change is applied without a reload."""
from __future__ import annotations

import pytest

from tests.support import gateway_objects as gw
from tests.support import k8s
from tests.support.auth_service import AuthService, running_auth_service
from tests.support.net import wait_for

RELOADS = "nginx_ingress_controller_success"
PUBLIC = {"name": "public", "namespace": "infra"}


@pytest.fixture(scope="module")
def recorder_a():
    yield from running_auth_service()


@pytest.fixture(scope="module")
def recorder_b():
    yield from running_auth_service()


@pytest.fixture(scope="module")
def mirrors(stage, recorder_a, recorder_b):
    """Gateway "public", backend GW-ONE, and the Services mirror-a and mirror-b whose endpoints are the recorders."""
    stage.cluster.apply(gw.gateway("public", ns="infra", listeners=[gw.listener("http", namespaces={"from": "All"})]))
    stage.cluster.apply(*stage.backend("GW-ONE"))
    for name, recorder in (("mirror-a", recorder_a), ("mirror-b", recorder_b)):
        stage.cluster.apply(k8s.service(name), k8s.endpoint_slice(name, ["127.0.0.1"], recorder.port))
    return recorder_a, recorder_b


def mirror(service: str, **share) -> dict:
    return {"type": "RequestMirror", "requestMirror": {"backendRef": gw.backend_ref(service), **share}}


def route(name: str, host: str, *filters: dict, path: str = "/") -> dict:
    return gw.http_route(name, parents=[PUBLIC], hostnames=[host], rules=[
        gw.rule(gw.backend_ref("gw-one"), matches=[gw.path_match(path)], filters=filters)])


def copies(recorder: AuthService, marker: str) -> list[dict]:
    return [seen for seen in recorder.seen if marker in seen["path"]]


def test_the_client_gets_the_main_answer_and_the_mirror_a_copy(stage, mirrors):
    recorder, _ = mirrors
    host = "mirror.example.com"
    stage.cluster.apply(route("mirrored", host, mirror("mirror-a"), {
        "type": "RequestHeaderModifier", "requestHeaderModifier": {"set": [{"name": "X-Added", "value": "yes"}]}}))
    stage.expect_answer(host, "/", "GW-ONE")
    # The recorder answers 500 to this header: the client still gets the main backend's answer.
    answer = stage.answer(host, "/mirror?copy=1", headers={"X-Test-Verdict": "fail"})
    assert answer["backend"] == "GW-ONE" and answer["status"] == 200
    wait_for(lambda: copies(recorder, "copy=1"), 5, what="the mirrored copy")
    copy = copies(recorder, "copy=1")[0]
    assert copy["path"] == "/mirror?copy=1" and copy["method"] == "GET"
    assert copy["headers"]["host"] == host
    assert copy["headers"]["x-added"] == "yes"  # the rule's other filters apply to the copy too
    assert answer["headers"].get("x-added") == "yes"


def test_several_mirrors_each_get_a_copy(stage, mirrors):
    recorder_a, recorder_b = mirrors
    host = "mirrors.example.com"
    stage.cluster.apply(route("two-mirrors", host, mirror("mirror-a"), mirror("mirror-b")))
    stage.expect_answer(host, "/", "GW-ONE")
    assert stage.answer(host, "/both?copy=2", method="POST", data=b"body")["backend"] == "GW-ONE"
    wait_for(lambda: copies(recorder_a, "copy=2") and copies(recorder_b, "copy=2"), 5, what="a copy in each mirror")
    assert [c["method"] for c in copies(recorder_a, "copy=2") + copies(recorder_b, "copy=2")] == ["POST", "POST"]


def test_a_mirror_change_needs_no_reload(stage, mirrors):
    recorder_a, recorder_b = mirrors
    host = "mirror-change.example.com"
    stage.cluster.apply(route("changing", host, mirror("mirror-a")))
    stage.expect_answer(host, "/", "GW-ONE")
    reloads, conf = stage.controller.metric(RELOADS), stage.controller.nginx_conf()

    stage.cluster.apply(route("changing", host, mirror("mirror-b")))  # another Service
    wait_for(lambda: stage.answer(host, "/to-b?copy=3")["backend"] == "GW-ONE" and copies(recorder_b, "copy=3"), 10,
             what="copies going to mirror-b")
    assert stage.answer(host, "/to-b?copy=3b")["backend"] == "GW-ONE"
    wait_for(lambda: copies(recorder_b, "copy=3b"), 5, what="the copy in mirror-b")
    assert not copies(recorder_a, "copy=3b")

    stage.cluster.apply(route("changing", host, mirror("mirror-b", percent=0)))  # none copied
    stage.cluster.apply(route("marker", "marker.example.com", mirror("mirror-b")))
    wait_for(lambda: stage.answer("marker.example.com", "/")["status"] == 200, 10, what="the later route")
    for _ in range(20):
        assert stage.answer(host, "/none?copy=4")["backend"] == "GW-ONE"
    stage.cluster.apply(route("changing", host, mirror("mirror-b", fraction={"numerator": 1, "denominator": 1})))
    wait_for(lambda: stage.answer(host, "/all?copy=5")["backend"] == "GW-ONE" and copies(recorder_b, "copy=5"), 10,
             what="copies again at fraction 1/1")
    assert not copies(recorder_b, "copy=4")
    assert stage.controller.metric(RELOADS) == reloads
    assert stage.controller.nginx_conf() == conf


def test_a_mirror_without_a_service_leaves_the_route_served(stage, mirrors):
    host = "mirror-missing.example.com"
    stage.cluster.apply(route("missing", host, mirror("no-such-service")))
    stage.expect_answer(host, "/", "GW-ONE")
    wait_for(lambda: any("requests are not mirrored there" in p for p in stage.controller.problems()), 10,
             what="the warning in /status")

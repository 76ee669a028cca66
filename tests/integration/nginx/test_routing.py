"""Routing in nginx's Lua from pushed tables: hosts, paths, backends, balancing, headers, no reloads."""
from __future__ import annotations

import json
import re
import socket

import pytest

from services.nginxconf.config import LocationProfile
from services.syncer.model.types import HostRoutes
from services.nginxconf.table_schema import SCHEMA_VERSION
from tests.support.net import free_port

from .conftest import closed_endpoint, route

HOST = "example.test"


@pytest.fixture(scope="module")
def nginx(shared_nginx):
    # Larger bodies than the buffers, so that workers need their temp directories.
    shared_nginx.apply(shared_nginx.config(
        profiles=[LocationProfile("tagged", (("proxy_set_header", "X-Profile tagged"),))],
        globals_={"client_max_body_size": "8m"}))
    return shared_nginx


@pytest.fixture(scope="module")
def backends(echo):
    return {name: echo(name) for name in ("A", "B", "C", "D", "E")}


def tables(backends, **extra):
    table = {name: [b.endpoint] for name, b in backends.items()}
    table.update(extra)
    return table


def test_exact_paths_win_over_prefixes_and_longest_prefix_wins(nginx, backends):
    nginx.push({HOST: HostRoutes(exact={"/": route("A"), "/foo": route("C")},
                                 prefix={"/": route("B"), "/foo": route("D")})}, tables(backends))

    answered = {path: nginx.get(path).backend for path in ("/", "/bar", "/foo", "/foo/bar", "/foobar")}

    assert answered == {"/": "A", "/bar": "B", "/foo": "C", "/foo/bar": "D", "/foobar": "B"}


def test_a_prefix_matches_whole_path_elements(nginx, backends):
    nginx.push({HOST: HostRoutes(prefix={"/aaa": route("A"), "/aaa/bbb": route("B")})}, tables(backends))

    assert nginx.get("/aaa").backend == "A"
    assert nginx.get("/aaa/").backend == "A"
    assert nginx.get("/aaa/x?q=1").backend == "A"
    assert nginx.get("/aaa/bbb/c").backend == "B"
    assert nginx.get("/aaa/bbbc").backend == "A"
    missed = nginx.get("/aaacccc")
    assert missed.status == 404 and b"<title>404 Not Found</title>" in missed.body


def test_hosts_match_exactly_then_by_one_label_wildcard_then_catch_all(nginx, backends):
    nginx.push({"exact.test": HostRoutes(prefix={"/": route("A")}),
                "*.wild.test": HostRoutes(prefix={"/": route("B")}),
                "_": HostRoutes(prefix={"/": route("C")})}, tables(backends))

    assert nginx.get("/", host="exact.test").backend == "A"
    assert nginx.get("/", host="EXACT.test:8080").backend == "A"
    assert nginx.get("/", host="a.wild.test").backend == "B"
    assert nginx.get("/", host="a.b.wild.test").backend == "C"
    assert nginx.get("/", host="wild.test").backend == "C"
    assert nginx.get("/", host="other.test").backend == "C"


def test_an_unknown_host_gets_the_default_backend_404(nginx, backends):
    nginx.push({"exact.test": HostRoutes(prefix={"/app": route("A")})}, tables(backends))

    for host, path in (("other.test", "/"), ("exact.test", "/elsewhere")):
        response = nginx.get(path, host=host)
        # nginx's own page, as ingress-nginx's built-in default backend answers.
        assert response.status == 404 and b"<title>404 Not Found</title>" in response.body
        assert response.headers["content-type"] == "text/html"


def test_a_host_default_route_takes_unmatched_paths(nginx, backends):
    nginx.push({HOST: HostRoutes(prefix={"/app": route("A")}, default=route("E"))}, tables(backends))

    assert nginx.get("/app/x").backend == "A"
    assert nginx.get("/other").backend == "E"


def test_routes_without_a_usable_backend_answer_503(nginx, backends):
    nginx.push({HOST: HostRoutes(prefix={"/null": route(None), "/empty": route("EMPTY"),
                                         "/missing": route("NOT-PUSHED"), "/ok": route("A")})},
               tables(backends, EMPTY=[]))

    assert [nginx.get(p).status for p in ("/null", "/empty", "/missing")] == [503, 503, 503]
    assert nginx.get("/ok").backend == "A"


def test_round_robin_over_endpoints_and_failover_on_refused_connections(nginx, echo):
    first, second = echo("rr-1"), echo("rr-2")
    nginx.push({HOST: HostRoutes(prefix={"/rr": route("rr"), "/failover": route("failover")})},
               {"rr": [first.endpoint, second.endpoint], "failover": [closed_endpoint(), first.endpoint]})

    # One connection stays on one worker, whose round robin alternates.
    answered = [nginx.get("/rr").backend for _ in range(12)]
    assert set(answered) == {"rr-1", "rr-2"}
    assert all(nginx.get("/failover").status == 200 for _ in range(6))


@pytest.mark.parametrize("family", [socket.AF_INET, socket.AF_INET6], ids=["ipv4", "ipv6"])
def test_a_retry_tries_each_endpoint_once_so_one_live_endpoint_of_three_always_answers(nginx, echo, family):
    # A first try keeps no state (the balancer finds the endpoint tried last in $upstream_addr): each retry must
    # go on from there, or some requests would try a refusing endpoint twice and answer 502.
    live = echo(f"live-{family.name}", family)
    refused = [live.endpoint.rsplit(":", 1)[0] + f":{free_port()}" for _ in range(2)]
    nginx.push({HOST: HostRoutes(prefix={"/": route("three")})}, {"three": [refused[0], live.endpoint, refused[1]]})

    answers = [nginx.get("/") for _ in range(12)]
    assert [a.status for a in answers] == [200] * 12
    assert {a.backend for a in answers} == {f"live-{family.name}"}


def test_ipv6_endpoints(nginx, echo):
    v6 = echo("v6", socket.AF_INET6)
    nginx.push({HOST: HostRoutes(prefix={"/": route("v6")})}, {"v6": [v6.endpoint]})

    assert v6.endpoint.startswith("[::1]:")
    assert nginx.get("/").backend == "v6"


def test_backends_receive_the_standard_proxy_headers(nginx, backends):
    nginx.push({HOST: HostRoutes(prefix={"/": route("A"), "/tagged": route("B", profile="tagged")})},
               tables(backends))

    headers = nginx.get("/x", host=f"{HOST}:{nginx.http_port}",
                        headers={"Upgrade": "websocket", "Connection": "Upgrade",
                                 "X-Forwarded-For": "6.6.6.6", "Proxy": "http://evil"}).json["headers"]
    assert headers["host"] == f"{HOST}:{nginx.http_port}"
    assert headers["x-real-ip"] == "127.0.0.1"
    assert headers["x-forwarded-for"] == "127.0.0.1"  # a client's own X-Forwarded-For is not trusted
    assert headers["x-forwarded-proto"] == "http"
    assert headers["x-forwarded-host"] == f"{HOST}:{nginx.http_port}"
    assert headers["x-forwarded-port"] == str(nginx.http_port)
    assert re.fullmatch(r"[0-9a-f]{32}", headers["x-request-id"])
    assert headers["upgrade"] == "websocket" and headers["connection"].lower() == "upgrade"
    assert "proxy" not in headers
    assert nginx.get("/x", headers={"X-Request-ID": "given-id"}).json["headers"]["x-request-id"] == "given-id"

    tagged = nginx.get("/tagged").json["headers"]
    assert tagged["x-profile"] == "tagged" and tagged["x-real-ip"] == "127.0.0.1"


def test_an_http_1_0_request_without_a_host_header_sends_the_host_it_was_routed_by(nginx, backends):
    # ingress-nginx's $best_http_host: the Host header as sent, else $host (here from the absolute URI).
    nginx.push({HOST: HostRoutes(prefix={"/": route("A")})}, tables(backends))
    with socket.create_connection(("127.0.0.1", nginx.http_port), timeout=10) as connection:
        connection.sendall(f"GET http://{HOST.upper()}/x HTTP/1.0\r\n\r\n".encode())
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head
    headers = json.loads(body)["headers"]
    assert headers["host"] == headers["x-forwarded-host"] == HOST


def test_every_request_gets_a_request_id_of_its_own(nginx, backends):
    # Each worker draws the random bytes of many ids at once (request_id.lua): ids drawn before the workers
    # forked, or a buffer handed out twice, would repeat here. Each request on a connection of its own, so that
    # both workers answer.
    nginx.push({HOST: HostRoutes(prefix={"/": route("A")})}, tables(backends))
    assert len(nginx.worker_pids()) >= 2
    ids = [nginx.get("/x").json["headers"]["x-request-id"] for _ in range(100)]

    assert all(re.fullmatch(r"[0-9a-f]{32}", i) for i in ids)
    assert len(set(ids)) == len(ids)


def test_large_request_and_response_bodies_pass_through_worker_temp_files(nginx, backends):
    nginx.push({HOST: HostRoutes(prefix={"/": route("A")})}, tables(backends))

    upload = nginx.get("/upload", method="POST", body=b"u" * (3 * 1024 * 1024))
    assert (upload.status, upload.json["body_length"]) == (200, 3 * 1024 * 1024)
    download = nginx.get(f"/big/{5 * 1024 * 1024}")
    assert (download.status, len(download.body)) == (200, 5 * 1024 * 1024)
    assert nginx.get("/upload", method="POST", body=b"u" * (9 * 1024 * 1024)).status == 413


def test_route_and_endpoint_changes_apply_without_a_reload(nginx, echo, backends):
    replacement = echo("replacement")
    workers = nginx.worker_pids()
    nginx.push({HOST: HostRoutes(prefix={"/": route("A")})}, tables(backends))
    assert nginx.get("/").backend == "A"

    nginx.push({HOST: HostRoutes(prefix={"/": route("A")})}, tables(backends, A=[replacement.endpoint]))
    assert nginx.get("/").backend == "replacement"
    nginx.push({HOST: HostRoutes(prefix={"/": route("B")})}, tables(backends))
    assert nginx.get("/").backend == "B"
    nginx.push({}, {})
    assert nginx.get("/").status == 404

    assert nginx.worker_pids() == workers


def test_a_push_sends_only_tables_nginx_does_not_hold(nginx, backends):
    routes = {HOST: HostRoutes(prefix={"/": route("A")})}
    nginx.push(routes, tables(backends))

    assert nginx.push(routes, tables(backends)) == []
    assert nginx.push(routes, tables(backends, A=[backends["B"].endpoint])) == ["backends"]
    assert nginx.run(nginx.pusher.needs_push()) is False
    held = nginx.run(nginx.pusher.versions())
    assert not held.pop("taking")  # no whole table being taken in
    assert set(held) == {"routes", "backends", "certificates"} and all(held.values())


def test_a_route_to_a_profile_nginx_conf_lacks_answers_503(nginx, backends):
    nginx.push({HOST: HostRoutes(prefix={"/": route("A", profile="not-reloaded-yet")})}, tables(backends))

    # Never served with another profile's settings: after waiting for a push that would move it (router.lua).
    assert nginx.get("/").status == 503


def test_a_malformed_entry_is_refused_and_its_last_good_value_keeps_serving(nginx, backends):
    nginx.push({HOST: HostRoutes(prefix={"/": route("A")})}, tables(backends))

    nginx.push({HOST: HostRoutes(prefix={"/": route("B"), "no-slash": route("B")})}, tables(backends))
    assert "a path must be a string starting with /" in nginx.pusher.refused["routes"][HOST]
    assert nginx.get("/").backend == "A"
    # nginx holds the version pushed: nothing to push again until the model changes.
    assert nginx.run(nginx.pusher.needs_push()) is False

    refused = nginx.api("POST", "/configuration/backends", json.dumps(
        {"version": "v", "schema": SCHEMA_VERSION, "data": {"A": ["not-an-address"]}}).encode())
    assert refused.status == 201 and "not-an-address" in json.loads(refused.body)["refused"]["A"]
    assert nginx.get("/").backend == "A"
    not_json = nginx.api("POST", "/configuration/backends", b'{"version": "v3"')
    assert not_json.status == 400 and "must be a JSON object" in json.loads(not_json.body)["error"]
    assert nginx.get("/").backend == "A"

"""Rate limits through real nginx: limit_req/limit_conn in a profile's named location, which the router
enters with ngx.exec, counted in shared memory by every worker, per client address (127.0.0.x here)."""
from __future__ import annotations

import socket
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest

from services.nginxconf.config import LocationProfile, RateLimit
from services.syncer.model.types import HostRoutes

from .conftest import eventually, route

HOST = "limited.example"
# The snippet only shows which worker answered, so that the test can prove the count is shared.
WORKER_PID = "add_header X-Worker $pid always;"


def limited(rate_limit: RateLimit, **directives: str) -> LocationProfile:
    return LocationProfile.of(tuple(sorted(directives.items())), rate_limit=rate_limit, snippet=WORKER_PID)


@pytest.fixture
def nginx(nginx_factory, echo):
    instance = nginx_factory()
    eventually(lambda: len(instance.worker_pids()) >= 2)  # the test needs several workers
    instance.backend = echo("app")
    return instance


def serve(nginx, profile: LocationProfile, globals_: dict[str, str] | None = None, **extra_paths: str) -> None:
    """Route HOST's "/" (and `extra_paths`: path → endpoint) through `profile`."""
    assert nginx.apply(nginx.config([profile], globals_=globals_))
    routes = HostRoutes(prefix={"/": route("app", profile.name)})
    backends = {"app": [nginx.backend.endpoint]}
    for path, endpoint in extra_paths.items():
        routes.prefix[path] = route(path.strip("/"), profile.name)
        backends[path.strip("/")] = [endpoint]
    nginx.push({HOST: routes}, backends)


def test_requests_past_the_limit_and_its_burst_are_refused_whichever_worker_answers(nginx):
    # One request a minute and a burst of 2: within the test's few seconds exactly 3 requests pass. Had each
    # worker its own count, each would let 3 through.
    serve(nginx, limited(RateLimit(zone="default_rpm", rpm=1, burst_multiplier=2)))
    statuses: Counter[tuple[str, int]] = Counter()

    def every_worker_answered_past_the_limit() -> bool:
        # In parallel, so that the kernel hands connections to more than one worker.
        with ThreadPoolExecutor(8) as pool:
            for response in pool.map(lambda _: nginx.get("/", host=HOST), range(16)):
                statuses[response.headers["x-worker"], response.status] += 1
        answered = Counter(worker for worker, _ in statuses.elements())
        return answered.keys() == {str(pid) for pid in nginx.worker_pids()} and min(answered.values()) > 3

    eventually(every_worker_answered_past_the_limit, timeout=60)
    assert sum(n for (_, status), n in statuses.items() if status == 200) == 3, statuses
    assert {status for _, status in statuses} == {200, 503}


def test_each_client_address_has_its_own_count(nginx):
    serve(nginx, limited(RateLimit(zone="default_per_client", rpm=1, burst_multiplier=0)))
    assert nginx.get("/", host=HOST, source="127.0.0.2").status == 200
    assert nginx.get("/", host=HOST, source="127.0.0.2").status == 503
    assert nginx.get("/", host=HOST, source="127.0.0.3").status == 200


def test_allowlisted_clients_are_never_limited(nginx):
    serve(nginx, limited(RateLimit(zone="default_allow", rpm=1, burst_multiplier=0, allowlist=("127.0.0.4/32",))))
    assert [nginx.get("/", host=HOST, source="127.0.0.4").status for _ in range(10)] == [200] * 10
    assert [nginx.get("/", host=HOST, source="127.0.0.5").status for _ in range(2)] == [200, 503]


def test_the_configured_status_answers_a_limited_request(nginx):
    profile = limited(RateLimit(zone="default_status", rpm=1, burst_multiplier=0))
    assert nginx.apply(nginx.config([profile], globals_={"limit_req_status": "429"}))
    assert nginx.push({HOST: HostRoutes(prefix={"/": route("app", profile.name)})},
                      {"app": [nginx.backend.endpoint]})
    assert [nginx.get("/", host=HOST).status for _ in range(2)] == [200, 429]


def test_connections_in_progress_are_limited_per_client_with_the_configured_status(nginx):
    # A backend that accepts and never answers keeps a request in progress for as long as the client waits.
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    profile = limited(RateLimit(zone="default_conn", connections=1))
    serve(nginx, profile, {"limit_conn_status": "429"}, **{"/hang": f"127.0.0.1:{silent.getsockname()[1]}"})
    hanging: list[socket.socket] = []

    def a_second_request_is_refused_while_one_hangs() -> bool:
        # A worker of the configuration before may still take the connection for a moment after the reload,
        # and serve it without the limit: then it is tried again on a new connection.
        held = socket.create_connection(("127.0.0.1", nginx.http_port), source_address=("127.0.0.6", 0))
        hanging.append(held)
        held.sendall(f"GET /hang HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode())
        return eventually(lambda: nginx.get("/", host=HOST, source="127.0.0.6").status == 429, timeout=2)

    try:
        eventually(a_second_request_is_refused_while_one_hangs)
        assert nginx.get("/", host=HOST, source="127.0.0.7").status == 200
    finally:
        for held in hanging:
            held.close()
        silent.close()
    # Once that request ends, the client may start another one.
    eventually(lambda: nginx.get("/", host=HOST, source="127.0.0.6").status == 200)


def test_limit_rate_slows_the_response_after_its_first_kilobytes(nginx):
    # limit_rate_after 1k then 1k/s: 4 KiB take about 3 s; shown by the body still arriving, not by timing.
    profile = LocationProfile.of((("limit_rate", "1k"), ("limit_rate_after", "1k"), ("proxy_buffering", "on")))
    assert nginx.apply(nginx.config([profile]))
    assert nginx.push({HOST: HostRoutes(prefix={"/": route("app", profile.name)})},
                      {"app": [nginx.backend.endpoint]})
    with socket.create_connection(("127.0.0.1", nginx.http_port), timeout=10) as sock:
        sock.sendall(f"GET /big/65536 HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n\r\n".encode())
        sock.settimeout(1)
        received = b""
        try:
            while chunk := sock.recv(65536):
                received += chunk
        except socket.timeout:
            pass
    assert received.startswith(b"HTTP/1.1 200")
    assert len(received) < 65536  # a second in, the 1 KiB/s limit holds most of the 64 KiB back


def test_changing_an_ingress_limits_reloads_and_keeps_its_zones(nginx):
    # nginx reuses a zone of the same name and size across reloads, and refuses the reload when its key
    # changed: the key is the same variable with or without an allowlist.
    serve(nginx, limited(RateLimit(zone="default_changing", rpm=1, burst_multiplier=0)))
    assert [nginx.get("/", host=HOST, source="127.0.0.8").status for _ in range(2)] == [200, 503]
    serve(nginx, limited(RateLimit(zone="default_changing", rpm=2, burst_multiplier=0, allowlist=("127.0.0.9/32",))))
    assert nginx.get("/", host=HOST, source="127.0.0.8").status == 503  # its count went on across the reload
    assert [nginx.get("/", host=HOST, source="127.0.0.9").status for _ in range(3)] == [200] * 3

"""pyngress's nginx module balancing what the router hands it (nginx-module/pyngress_balancer.c), through real nginx:
a backend's endpoints outlive a push that drops them while a request still uses them, and an error page's request
goes to the error backend, not to the endpoint the router chose for the route, used or not."""
from __future__ import annotations

import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from services.nginxconf.config import LocationProfile
from services.syncer.model.types import HostRoutes, Route

HOST = "native.example.test"


@pytest.fixture(scope="module")
def nginx(shared_nginx):
    shared_nginx.apply(shared_nginx.config(
        profiles=[LocationProfile("pages", custom_http_errors=(404, 403)),
                  LocationProfile("denied", custom_http_errors=(403,), denied=("127.0.0.0/8",))]))
    return shared_nginx


def raw_backend(status: str, body: bytes, delay: float = 0) -> tuple[str, socket.socket]:
    """An endpoint that answers each request with `status` and `body`, `delay` seconds after reading it."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            with connection:
                connection.recv(65536)
                time.sleep(delay)
                connection.sendall(b"HTTP/1.1 %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s"
                                   % (status.encode(), len(body), body))

    threading.Thread(target=serve, daemon=True).start()
    return f"127.0.0.1:{listener.getsockname()[1]}", listener


def test_a_request_outlives_a_push_that_drops_its_endpoints(nginx, echo):
    endpoint, listener = raw_backend("200 OK", b"slow answer", delay=1.5)
    other = echo("other")
    workers = nginx.worker_pids()
    try:
        nginx.push({HOST: HostRoutes(prefix={"/": Route("slow-80", ingress="team/slow")})}, {"slow-80": [endpoint]})
        with ThreadPoolExecutor(1) as pool:
            answer = pool.submit(nginx.get, "/", HOST)
            time.sleep(0.5)  # the request is at the endpoint now
            # The backend goes, and many pushes make the workers' Lua collect the old tables' objects.
            for n in range(30):
                nginx.push({HOST: HostRoutes(prefix={"/": Route(f"other-{n}", ingress="team/slow")})},
                           {f"other-{n}": [other.endpoint]})
            response = answer.result(10)
    finally:
        listener.close()
    assert (response.status, response.body) == (200, b"slow answer")
    assert nginx.get("/", HOST).backend == "other"
    assert nginx.worker_pids() == workers  # no worker died on the way
    assert "exited on signal" not in nginx.log()


def test_an_error_page_goes_to_the_error_backend_not_the_routes_endpoint(nginx, echo):
    # The route's endpoint answers 404; custom-http-errors asks the default backend for the page. Both are the
    # same upstream: the router's choice of endpoint must not follow the request to its error page.
    errors = echo("errors")
    endpoint, listener = raw_backend("404 Not Found", b"the app's own 404")
    try:
        nginx.push({HOST: HostRoutes(prefix={"/": Route("app-80", profile="pages", ingress="team/app")})},
                   {"app-80": [endpoint], "upstream-default-backend": [errors.endpoint]})
        answers = [nginx.get("/missing", HOST) for _ in range(6)]
    finally:
        listener.close()
    assert {(a.status, a.backend) for a in answers} == {(200, "errors")}
    assert {a.json["headers"]["x-code"] for a in answers} == {"404"}


def test_an_error_page_before_any_upstream_does_not_take_the_routes_endpoint(nginx, echo):
    # The profile denies the client (403) before the request reaches an upstream: the router's choice of the app's
    # endpoint is still unused when the error page asks the same upstream for the default backend's page.
    errors, app = echo("errors-403"), echo("app-403")
    nginx.push({HOST: HostRoutes(prefix={"/": Route("app-80", profile="denied", ingress="team/app")})},
               {"app-80": [app.endpoint], "upstream-default-backend": [errors.endpoint]})
    answers = [nginx.get("/", HOST) for _ in range(6)]
    assert {(a.status, a.backend) for a in answers} == {(200, "errors-403")}
    assert {a.json["headers"]["x-code"] for a in answers} == {"403"}

"""Per-request metrics counted by pyngress's nginx module and added up by the syncer's collector, through real nginx."""
from __future__ import annotations

import re
import socket
import time

import pytest

from services.nginxconf.request_metrics import RequestMetricsLayout
from services.syncer.annotations.base import CanaryPolicy
from services.syncer.model.types import CanaryRoute, HostRoutes, Route
from services.syncer.observability.request_collector import RequestTotals

from .conftest import closed_endpoint, eventually

LAYOUT = RequestMetricsLayout()
CONST = {"controller_class": "k8s.io/ingress-nginx", "controller_namespace": "ingress", "controller_pod": "p"}


@pytest.fixture(scope="module")
def nginx(shared_nginx):
    shared_nginx.apply(shared_nginx.config(request_metrics=LAYOUT))
    return shared_nginx


@pytest.fixture(scope="module")
def backends(echo):
    return {"team-web-80": [echo("web").endpoint], "team-web-canary-80": [echo("canary").endpoint]}


def web_route(**extra) -> Route:
    return Route("team-web-80", ingress="team/web", service="web", **extra)


def collect(nginx, totals: RequestTotals, expected_requests: int) -> dict[str, float]:
    """Collect until `expected_requests` are counted (workers hand their batches on once a second);
    then the sample values by their exposition line's name and labels."""
    def counted() -> bool:
        answer = nginx.api("GET", "/configuration/metrics")
        assert answer.status == 200
        totals.add_batches(answer.body)
        return sum(numbers[0] for numbers in totals.totals.values()) >= expected_requests
    eventually(counted, timeout=10)
    time.sleep(1.2)  # nothing more may arrive
    totals.add_batches(nginx.api("GET", "/configuration/metrics").body)
    samples = {}
    for line in b"".join(totals.chunks(CONST)).decode().splitlines():
        if not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            samples[name] = float(value)
    return samples


def sample(samples: dict[str, float], name: str, **labels: str) -> float:
    """The value of the one sample of `name` whose labels include `labels`."""
    found = [value for key, value in samples.items()
             if key.split("{")[0] == name and all(f'{k}="{v}"' in key for k, v in labels.items())]
    assert len(found) == 1, (name, labels, [k for k in samples if k.startswith(name)])
    return found[0]


def test_requests_are_counted_with_ingress_nginx_labels_and_histograms(nginx, backends):
    nginx.push({"web.example.test": HostRoutes(prefix={"/": web_route(), "/api": web_route()})}, backends)
    totals = RequestTotals(LAYOUT)
    nginx.api("GET", "/configuration/metrics")  # start from nothing
    for _ in range(3):
        assert nginx.get("/api/x", host="web.example.test").status == 200
    assert nginx.get("/", host="web.example.test", method="POST", body=b"x" * 50).status == 200
    assert nginx.get("/", host="web.example.test").status == 200

    samples = collect(nginx, totals, 5)

    name = "nginx_ingress_controller_requests"
    assert sample(samples, name, path="/api", method="GET", status="200", host="web.example.test",
                  namespace="team", ingress="web", service="web", canary="", controller_pod="p") == 3
    assert sample(samples, name, path="/", method="POST") == 1
    assert sample(samples, name, path="/", method="GET") == 1
    # Histograms: cumulative buckets ending in +Inf, _count equal to the requests, _sum of the observations.
    duration = "nginx_ingress_controller_request_duration_seconds"
    assert sample(samples, duration + "_count", path="/api") == 3
    assert sample(samples, duration + "_bucket", path="/api", le="+Inf") == 3
    assert sample(samples, duration + "_bucket", path="/api", le="10.0") == 3
    assert sample(samples, "nginx_ingress_controller_connect_duration_seconds_count", path="/api") == 3
    assert sample(samples, "nginx_ingress_controller_header_duration_seconds_count", path="/api") == 3
    assert sample(samples, "nginx_ingress_controller_response_duration_seconds_count", path="/api") == 3
    # request_length of the POST: request line, headers and the 50-byte body (more than 100 bytes).
    size = "nginx_ingress_controller_request_size"
    assert sample(samples, size + "_bucket", path="/", method="POST", le="100.0") == 0
    assert sample(samples, size + "_sum", path="/", method="POST") > 100
    assert sample(samples, "nginx_ingress_controller_bytes_sent_count", path="/", method="POST") == 1
    assert sample(samples, "nginx_ingress_controller_response_size_count", path="/", method="POST") == 1
    # The deprecated summary, per Ingress.
    assert sample(samples, "nginx_ingress_controller_ingress_upstream_latency_seconds_count", ingress="web") == 5


def test_more_distinct_requests_than_a_worker_keeps_between_batches_are_all_counted(nginx, backends):
    # 1,000 requests with headers of 1,000 sizes, pipelined on one connection (so one worker, within a fraction of
    # its one-second batch): each is added to the same key, with its own request length.
    # (A Service without endpoints: nginx answers 503 itself, quickly, and counts the request for its route.)
    nginx.push({"many.example.test": HostRoutes(prefix={"/": Route("team-none-80", ingress="team/none")})}, backends)
    totals = RequestTotals(LAYOUT)
    nginx.api("GET", "/configuration/metrics")
    sizes = range(1, 1001)
    with socket.create_connection(("127.0.0.1", nginx.http_port), timeout=10) as connection:
        connection.sendall(b"".join(f"GET / HTTP/1.1\r\nHost: many.example.test\r\nX-Pad: {'x' * size}\r\n\r\n"
                                    .encode() for size in sizes))
        answers = b""
        while answers.count(b"HTTP/1.1 ") < len(sizes):
            chunk = connection.recv(65536)
            assert chunk, answers[-200:]
            answers += chunk
    assert answers.count(b"HTTP/1.1 503 ") == len(sizes)

    samples = collect(nginx, totals, len(sizes))

    assert sample(samples, "nginx_ingress_controller_requests", host="many.example.test", method="GET",
                  status="503") == len(sizes)
    size = "nginx_ingress_controller_request_size"
    assert sample(samples, size + "_count", host="many.example.test") == len(sizes)
    # Each request's length is its padding plus the same request line and headers: the sum says each was added.
    assert sample(samples, size + "_sum", host="many.example.test") >= sum(sizes) + len(sizes) * 50


def test_labels_with_quotes_backslashes_and_non_ascii_arrive_as_written(nginx, backends):
    # The module writes each batch as JSON itself: a path is the Ingress's own text.
    path = '/say "hi"\\there/caf\u00e9'
    nginx.push({"odd.example.test": HostRoutes(prefix={path: web_route()})}, backends)
    totals = RequestTotals(LAYOUT)
    nginx.api("GET", "/configuration/metrics")
    target = "/say%20%22hi%22%5Cthere/caf%C3%A9/x"
    for _ in range(2):
        assert nginx.get(target, host="odd.example.test").status == 200

    samples = collect(nginx, totals, 2)

    assert sample(samples, "nginx_ingress_controller_requests", host="odd.example.test", ingress="web",
                  status="200") == 2
    [key] = [key for key in samples if key.startswith("nginx_ingress_controller_requests{")
             and "odd.example.test" in key]
    assert 'path="/say \\"hi\\"\\\\there/caf\u00e9"' in key  # Prometheus's escaping of " and \


def test_unrouted_requests_have_empty_labels_and_undefined_hosts_are_not_counted(nginx, backends):
    nginx.push({"web.example.test": HostRoutes(exact={"/only": web_route()})}, backends)
    totals = RequestTotals(LAYOUT)
    nginx.api("GET", "/configuration/metrics")
    assert nginx.get("/elsewhere", host="web.example.test").status == 404   # defined host, no route
    assert nginx.get("/", host="random-1.example.test").status == 404        # no Ingress defines it
    assert nginx.get("/", host="random-2.example.test").status == 404
    assert nginx.get("/only", host="web.example.test").status == 200

    samples = collect(nginx, totals, 2)

    name = "nginx_ingress_controller_requests"
    assert sample(samples, name, host="web.example.test", ingress="", namespace="", service="", status="404") == 1
    assert sample(samples, name, host="web.example.test", ingress="web", path="/only") == 1
    assert not [key for key in samples if "random-" in key]
    # No latency for a request that no upstream answered.
    assert not [key for key in samples if key.startswith("nginx_ingress_controller_connect_duration_seconds_count")
                and 'status="404"' in key]


def test_a_retried_request_is_counted_but_its_upstream_times_are_not_observed(nginx, backends):
    # One endpoint refuses connections: a request that tries it first is retried on the other, and its
    # upstream times read "0.000, 0.001" (not a number: not observed, as in ingress-nginx).
    flaky = {**backends, "team-web-80": [closed_endpoint(), *backends["team-web-80"]]}
    nginx.push({"web.example.test": HostRoutes(prefix={"/": web_route()})}, flaky)
    layout = RequestMetricsLayout(excluded=("header_duration_seconds", "request_size"))
    nginx.apply(nginx.config(request_metrics=layout))
    totals = RequestTotals(layout)
    nginx.api("GET", "/configuration/metrics")
    for _ in range(6):
        assert nginx.get("/", host="web.example.test").status == 200

    samples = collect(nginx, totals, 6)

    assert sample(samples, "nginx_ingress_controller_requests", ingress="web") == 6
    assert sample(samples, "nginx_ingress_controller_request_duration_seconds_count", ingress="web") == 6
    assert sample(samples, "nginx_ingress_controller_response_size_count", ingress="web") == 6
    # Each worker takes the endpoints in turn, so at least two of the six requests were retried.
    observed = sample(samples, "nginx_ingress_controller_response_duration_seconds_count", ingress="web")
    assert 2 <= observed <= 4
    assert sample(samples, "nginx_ingress_controller_connect_duration_seconds_count", ingress="web") == observed
    assert not [key for key in samples if "header_duration" in key or "request_size" in key]
    nginx.apply(nginx.config(request_metrics=LAYOUT))


def test_the_canary_label_names_the_canary_backend_when_it_answered(nginx, backends):
    canary = CanaryRoute(backend="team-web-canary-80", ingress="team/web-canary",
                         policy=CanaryPolicy(header="X-Canary"))
    nginx.push({"web.example.test": HostRoutes(prefix={"/": web_route(canary=canary)})}, backends)
    totals = RequestTotals(LAYOUT)
    nginx.api("GET", "/configuration/metrics")
    assert nginx.get("/", host="web.example.test", headers={"X-Canary": "always"}).backend == "canary"
    assert nginx.get("/", host="web.example.test").backend == "web"

    samples = collect(nginx, totals, 2)

    name = "nginx_ingress_controller_requests"
    assert sample(samples, name, canary="team-web-canary-80", service="web", ingress="web") == 1
    assert sample(samples, name, canary="", service="web", ingress="web") == 1


def test_status_classes_and_no_host_label_and_gone_ingresses_dropped(nginx, backends):
    nginx.push({"web.example.test": HostRoutes(prefix={"/": web_route()}),
                "other.example.test": HostRoutes(prefix={"/": Route("team-web-80", ingress="team/other",
                                                                     service="web")})}, backends)
    layout = RequestMetricsLayout(per_host=False)
    nginx.apply(nginx.config(request_metrics=layout))
    totals = RequestTotals(layout, report_status_classes=True)
    nginx.api("GET", "/configuration/metrics")
    assert nginx.get("/", host="web.example.test").status == 200
    assert nginx.get("/", host="other.example.test").status == 200
    assert nginx.get("/", host="nobody.example.test").status == 404

    samples = collect(nginx, totals, 3)  # the batches carry the host; the collector drops it

    assert not [key for key in samples if "host=" in key]
    assert sample(samples, "nginx_ingress_controller_requests", ingress="web", status="2xx") == 1
    # Without per-host metrics, a request for a host no Ingress defines is counted, with empty labels.
    assert sample(samples, "nginx_ingress_controller_requests", ingress="", status="4xx") == 1
    totals.drop_ingresses({"team/other"})
    lines = b"".join(totals.chunks(CONST)).decode()
    assert 'ingress="other"' not in lines and 'ingress="web"' in lines


def test_undefined_hosts_are_counted_under_their_own_name_when_asked(nginx, backends):
    nginx.push({"web.example.test": HostRoutes(prefix={"/": web_route()})}, backends)
    layout = RequestMetricsLayout(per_undefined_host=True)
    nginx.apply(nginx.config(request_metrics=layout))
    totals = RequestTotals(layout)
    nginx.api("GET", "/configuration/metrics")
    long_host = ("a" * 60 + ".") * 5 + "example.test"  # 317 characters: counted under its first 253
    assert nginx.get("/", host="random-3.example.test").status == 404
    assert nginx.get("/", host=long_host).status == 404
    assert nginx.get("/", host="web.example.test").status == 200

    samples = collect(nginx, totals, 3)

    name = "nginx_ingress_controller_requests"
    assert sample(samples, name, host="random-3.example.test", ingress="", status="404") == 1
    assert sample(samples, name, host=long_host[:253], ingress="", status="404") == 1
    assert sample(samples, name, host="web.example.test", ingress="web", status="200") == 1
    nginx.apply(nginx.config(request_metrics=LAYOUT))


def test_batches_survive_a_reload_and_are_handed_out_once(nginx, backends):
    nginx.push({"web.example.test": HostRoutes(prefix={"/": web_route()})}, backends)
    totals = RequestTotals(LAYOUT)
    nginx.api("GET", "/configuration/metrics")
    for _ in range(4):
        assert nginx.get("/", host="web.example.test").status == 200
    # A reload right away: the old workers hand on what they counted as they exit.
    nginx.apply(nginx.config(request_metrics=LAYOUT, globals_={"keepalive_timeout": "61s"}))

    samples = collect(nginx, totals, 4)

    assert sample(samples, "nginx_ingress_controller_requests", ingress="web") == 4
    assert nginx.api("GET", "/configuration/metrics").body == b"[]"


def test_the_api_refuses_other_methods_for_metrics(nginx):
    answer = nginx.api("POST", "/configuration/metrics", b"{}")
    assert answer.status == 405
    assert re.search(rb"use GET", answer.body)

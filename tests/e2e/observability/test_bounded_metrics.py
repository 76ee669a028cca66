"""What a client sends cannot grow /metrics, and a large /metrics does not hold up /healthz (issue 31), through
the whole controller and real nginx.

nginx takes any upper-case token as a request method: each made-up one is counted under one method label,
"_OTHER". /metrics is streamed as it is written: while a scrape is under way, /healthz answers."""
from __future__ import annotations

import socket
import string

import pytest
import requests

from tests.e2e.ingress.scenarios import Stage
from tests.support import k8s
from tests.support.controller import start_manifests_controller
from tests.support.net import wait_for

HOST = "bounded.metrics.example.com"
OTHER = "_OTHER"


@pytest.fixture(scope="module")
def stage(tmp_path_factory, echo):
    controller, cluster = start_manifests_controller(tmp_path_factory.mktemp("bounded-metrics"))
    stage = Stage(controller, cluster, echo)
    cluster.apply(*stage.backend("BOUNDED", service="web", namespace="metrics"),
                  k8s.ingress("web", [k8s.rule(HOST, ("/", "Prefix", "web", 80))], namespace="metrics"))
    stage.expect(HOST, "/", "BOUNDED", timeout=20)
    yield stage
    controller.stop()


def scrape(stage: Stage) -> str:
    return requests.get(f"http://127.0.0.1:{stage.controller.healthz_port}/metrics", timeout=60).text


def requests_with_method(text: str, method: str) -> float:
    """The web Ingress's requests counted under `method`, every status together."""
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("nginx_ingress_controller_requests{") and 'ingress="web"' in line
               and f'method="{method}"' in line)


def made_up_method(i: int) -> str:
    """A distinct upper-case token of about 2 KB: a method to nginx."""
    letters = "".join(string.ascii_uppercase[int(digit)] for digit in str(i))
    return f"MADEUP{letters}".ljust(2000, "Q")


def send_made_up_methods(stage: Stage, first: int, count: int) -> None:
    with requests.Session() as session:
        for i in range(first, first + count):
            session.request(made_up_method(i), f"http://127.0.0.1:{stage.controller.http_port}/",
                            headers={"Host": HOST}, timeout=5)


def test_made_up_methods_are_counted_under_one_value_and_do_not_grow_metrics(stage):
    # One made-up method first, so that the _OTHER series exist before the size is taken.
    send_made_up_methods(stage, 0, 1)
    wait_for(lambda: requests_with_method(scrape(stage), OTHER) == 1, 20, what="the first made-up method counted")
    before = len(scrape(stage).encode())

    send_made_up_methods(stage, 1, 300)
    def counted() -> str | None:
        text = scrape(stage)
        return text if requests_with_method(text, OTHER) == 301 else None
    text = wait_for(counted, 20, what="301 requests counted under _OTHER")
    assert abs(len(text.encode()) - before) < 4096, (before, len(text.encode()))
    assert "MADEUP" not in text
    assert {line.split('method="', 1)[1].split('"', 1)[0] for line in text.splitlines()
            if line.startswith("nginx_ingress_controller_requests{") and 'ingress="web"' in line} <= {"GET", OTHER}


def test_healthz_answers_while_a_large_metrics_is_being_written(stage):
    # About 400 series (one per status the backend answers): tens of MB of histograms. Not 204 and 304: the echo
    # backend sends a body with every status, and after one of those the kept-alive connection would read that
    # body as the next response's status line.
    with requests.Session() as session:
        for status in (s for s in range(200, 600) if s not in (204, 304)):
            session.get(f"http://127.0.0.1:{stage.controller.http_port}/?status={status}", headers={"Host": HOST},
                        timeout=5)
    wait_for(lambda: 'status="599"' in scrape(stage), 20, what="every status counted")

    # A client that reads the first bytes of /metrics and then nothing: the server cannot write the rest (its
    # socket buffers fill), so the scrape is under way until the client reads on.
    with socket.create_connection(("127.0.0.1", stage.controller.healthz_port), timeout=60) as slow:
        slow.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        first = slow.recv(65536)
        assert first.startswith(b"HTTP/1.1 200")

        health = requests.get(f"http://127.0.0.1:{stage.controller.healthz_port}/healthz", timeout=30)
        assert health.status_code == 200 and health.json()["healthy"] is True

        rest = bytearray()
        while chunk := slow.recv(1 << 20):
            rest += chunk
    body = first + bytes(rest)
    assert b"\r\n0\r\n\r\n" == body[-7:]  # the last chunk: the scrape ended whole
    assert len(body) > 5_000_000, len(body)  # more than the socket buffers hold: written while the client read
    assert b"pyngress_config_generation" in body and b'nginx_ingress_controller_requests{' in body

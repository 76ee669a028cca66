"""load-balance: ewma through the whole controller: with one endpoint slow, ewma sends it almost nothing, round
robin half."""
from __future__ import annotations

import json
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler

import pytest

from tests.e2e.ingress.scenarios import Stage
from tests.support import k8s
from tests.support.net import wait_for
from tests.support.http_servers import serving

PREFIX = "nginx.ingress.kubernetes.io"
SLOW_IP = "127.0.21.2"


class _Slow(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        time.sleep(0.1)
        body = json.dumps({"backend": "SLOW"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def slow(echo):
    with serving(_Slow, (SLOW_IP, echo.port)):
        yield


def test_ewma_keeps_traffic_off_a_slow_endpoint(manifests_controller, echo, slow):
    controller, cluster = manifests_controller
    stage = Stage(controller, cluster, echo)
    fast_ip = echo.ips.get("FAST") or echo.start("FAST")
    cluster.apply(k8s.service("mixed"), k8s.endpoint_slice("mixed", [fast_ip, SLOW_IP], echo.port),
                  k8s.ingress("ewma", [k8s.rule("ewma.example.com", ("/", "Prefix", "mixed", 80))],
                              annotations={f"{PREFIX}/load-balance": "ewma"}),
                  k8s.ingress("rr", [k8s.rule("rr.example.com", ("/", "Prefix", "mixed", 80))]))
    for host in ("ewma.example.com", "rr.example.com"):  # each Ingress is a manifest file of its own
        wait_for(lambda: stage.served_by(host, "/") in ("FAST", "SLOW"), 15, what=f"{host} served")
    ewma = Counter(stage.served_by("ewma.example.com", "/") for _ in range(40))
    round_robin = Counter(stage.served_by("rr.example.com", "/") for _ in range(40))
    # Each worker tries each endpoint once (an endpoint never measured scores best), then keeps to the fast one.
    assert ewma["FAST"] + ewma["SLOW"] == 40 and ewma["SLOW"] <= 6, ewma
    assert round_robin["SLOW"] >= 12, round_robin

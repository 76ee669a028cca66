"""/metrics from the syncer's status server (observability/healthz_server.py) on a real socket: gzipped when the
client's Accept-Encoding asks for it (Prometheus does), the same text as without."""
from __future__ import annotations

import asyncio
import gzip
import threading
from typing import Iterator

import pytest
import requests

from services.common.settings import Settings
from services.nginxconf.config import NginxConfig
from services.syncer.model.types import HostRoutes, Model, Route
from services.syncer.observability.healthz_server import start_healthz_server
from services.syncer.observability.metrics import SyncerMetrics
from tests.support.net import free_port

INGRESSES = 600  # more series than one piece of the exposition holds


def serving() -> Model:
    routes = {f"h{i}.gzip.test": HostRoutes(prefix={"/": Route(f"ns-web{i}-80", ingress=f"ns/web{i}", service=f"web{i}")})
              for i in range(INGRESSES)}
    return Model(config=NginxConfig(http_port=80, https_port=443, state_dir="", run_dir=""), routes=routes,
                 backends={f"ns-web{i}-80": ["10.0.0.1:80"] for i in range(INGRESSES)})


@pytest.fixture(scope="module")
def url(tmp_path_factory) -> Iterator[str]:
    tmp, port = tmp_path_factory.mktemp("metrics-gzip"), free_port()
    settings = Settings.from_flags(run_dir=str(tmp / "run"), state_dir=str(tmp / "state"), healthz_port=port,
                                   healthz_host="127.0.0.1")
    metrics = SyncerMetrics(settings)
    assert metrics.requests is not None
    metrics.note_routes(serving())
    width = metrics.requests.layout.width
    metrics.requests.add_batches([{f"h{i}.gzip.test\tns\tweb{i}\tweb{i}\t/\t\t200\tGET": [i % 7 + 1] * width
                                   for i in range(INGRESSES)}])
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    runner = asyncio.run_coroutine_threadsafe(
        start_healthz_server(settings, healthy=lambda: (True, {}), metrics=metrics), loop).result(10)
    yield f"http://127.0.0.1:{port}/metrics"
    asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    loop.close()


def get(url: str, accept_encoding: str) -> tuple[requests.Response, bytes]:
    """The answer, and its body as it came on the wire (not inflated)."""
    response = requests.get(url, headers={"Accept-Encoding": accept_encoding}, stream=True, timeout=30)
    with response:
        return response, b"".join(response.raw.stream(1 << 16, decode_content=False))


def test_a_client_that_asks_for_gzip_gets_the_same_text_gzipped(url):
    (plain, text), (gzipped, compressed) = get(url, "identity"), get(url, "gzip")

    assert plain.status_code == gzipped.status_code == 200
    assert "Content-Encoding" not in plain.headers and gzipped.headers["Content-Encoding"] == "gzip"
    assert plain.headers["Vary"] == gzipped.headers["Vary"] == "Accept-Encoding"
    assert text.count(b"\nnginx_ingress_controller_requests{") == INGRESSES
    assert gzip.decompress(compressed) == text
    assert len(compressed) * 10 < len(text)


@pytest.mark.parametrize("accept_encoding, gzipped", [
    ("gzip", True), ("deflate, GZIP;q=0.5", True), ("gzip; q=1.0", True),
    ("gzip;q=0", False), ("gzip;q=0.000", False), ("deflate, br", False), ("", False), ("*", False)])
def test_gzip_only_when_accept_encoding_takes_it(url, accept_encoding, gzipped):
    response, body = get(url, accept_encoding)
    assert (response.headers.get("Content-Encoding") == "gzip") == gzipped
    body = gzip.decompress(body) if gzipped else body
    assert body.endswith(b"\n") and b"# TYPE nginx_ingress_controller_requests counter\n" in body

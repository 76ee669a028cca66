"""The live dashboard of a running controller in Debian's headless Chromium: it shows the routes, endpoints
and request figures, follows a change, and is refused to anyone not on the node."""
from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
import requests

from tests.e2e.ingress.scenarios import Stage
from tests.support import k8s
from tests.support.controller import start_manifests_controller
from tests.support.net import wait_for

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# As root, without a sandbox; no background connections (this machine's network is closed).
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage", "--virtual-time-budget=5000"]


@pytest.fixture(scope="module")
def stage(tmp_path_factory, echo):
    controller, cluster = start_manifests_controller(tmp_path_factory.mktemp("dashboard"))
    yield Stage(controller, cluster, echo)
    controller.stop()


def chromium(url: str, *args: str) -> str:
    with tempfile.TemporaryDirectory() as profile:
        done = subprocess.run([CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args, url],
                              capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_the_dashboard_shows_routes_backends_and_figures_and_follows_changes(stage, tmp_path):
    stage.cluster.apply(*stage.backend("DASH-SHOP", service="shop"),
                        k8s.ingress("shop", [k8s.rule("shop.dash.example", ("/", "Prefix", "shop", 80),
                                                      ("/api", "Prefix", "shop", 80))]))
    wait_for(lambda: stage.controller.get("/api/x", "shop.dash.example").status_code == 200, 20, what="shop served")
    for _ in range(30):
        assert stage.controller.get("/api/x", "shop.dash.example").status_code == 200
    url = f"http://127.0.0.1:{stage.controller.healthz_port}/dashboard"
    wait_for(lambda: requests.get(url + "/data", timeout=5).json()["backends"][0]["requests"] >= 30, 15,
             what="the requests counted")

    time.sleep(1.5)  # every worker has handed its counts on (once a second): the count no longer moves
    counted = requests.get(url + "/data", timeout=5).json()["backends"][0]["requests"]

    dom = chromium(url, "--dump-dom")
    for text in ("shop.dash.example", "/api", "default/shop", "default-shop-80",
                 f"{stage.echo.ips['DASH-SHOP']}:{stage.echo.port}", "watcher", "nginx"):
        assert text in dom, text
    assert f">{counted:g}</span>" in dom and " ms</span>" in dom and "0.0 %" in dom  # the request figures
    assert "not answering" in dom and 'id="stale" style="display: none;"' in dom  # the data arrived

    screenshot = tmp_path / "dashboard.png"
    chromium(url, f"--screenshot={screenshot}", "--window-size=1400,1000", "--hide-scrollbars")
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and screenshot.stat().st_size > 20_000
    shutil.copy(screenshot, Path(stage.controller.workdir) / "dashboard.png")  # kept with the run for review

    stage.cluster.apply(k8s.ingress("blog", [k8s.rule("blog.dash.example", ("/", "Prefix", "shop", 80))]))
    wait_for(lambda: stage.controller.get("/", "blog.dash.example").status_code == 200, 20, what="blog served")
    assert "blog.dash.example" in chromium(url, "--dump-dom")


def test_the_dashboard_is_for_the_node_only_and_read_only(stage):
    base = f"http://127.0.0.1:{stage.controller.healthz_port}"
    for path in ("/dashboard", "/dashboard/data"):
        refused = requests.get(base + path, headers={"X-Forwarded-For": "203.0.113.9"}, timeout=5)
        assert refused.status_code == 403 and "port-forward" in refused.json()["error"]
        assert requests.post(base + path, timeout=5).status_code == 405
    assert requests.get(base + "/dashboard/../status", headers={"X-Real-IP": "203.0.113.9"},
                        timeout=5).status_code == 403
    assert requests.get(base + "/dashboard/anything", timeout=5).status_code == 404
    page = requests.get(base + "/dashboard", timeout=5)
    assert "default-src 'none'" in page.headers["Content-Security-Policy"]
    assert "http://" not in page.text and "https://" not in page.text  # no external assets

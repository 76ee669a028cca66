"""The dashboard's data from a built model, request totals as nginx hands them on, and status records:
routes, endpoints, recent rates and percentiles, certificates, and never any Secret material."""
import asyncio
import base64
import json
import subprocess

from services.common import component_state
from services.common.settings import Settings
from services.nginxconf.request_metrics import RequestMetricsLayout
from services.syncer.observability.dashboard import (BackendTotals, Recent, backend_figures, backend_totals,
                                                     dashboard_data)
from services.syncer.observability.metrics import SyncerMetrics
from services.syncer.observability.request_collector import RequestTotals

LAYOUT = RequestMetricsLayout()
TIME_BOUNDS = LAYOUT.time_buckets


def batch(key_labels: str, status_code: str, count: int, duration_bucket: int) -> bytes:
    """One batch: `count` GET requests of these labels, all in one request-duration bucket."""
    numbers = [0.0] * LAYOUT.width
    numbers[0] = count
    numbers[1 + duration_bucket] = count
    numbers[1 + len(TIME_BOUNDS) + 1] = count * TIME_BOUNDS[duration_bucket]
    return json.dumps([{f"{key_labels}\t{status_code}\tGET": numbers}]).encode()


def self_signed(tmp_path, host: str) -> tuple[str, str]:
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", str(tmp_path / "k.pem"), "-out", str(tmp_path / "c.pem"), "-days", "30",
                    "-subj", f"/CN={host}"], check=True, capture_output=True)
    return (tmp_path / "c.pem").read_text(), (tmp_path / "k.pem").read_text()


def test_backends_get_their_requests_errors_and_latency(cluster):
    cluster.app("web")
    model = cluster.build()
    totals = RequestTotals(LAYOUT)
    labels = "app.example.com\tdefault\tweb\tweb\t/\t"
    totals.add_batches(batch(labels, "200", 90, 2))   # <= 25 ms
    totals.add_batches(batch(labels, "502", 10, 6))   # <= 500 ms
    totals.add_batches(batch("other.example.com\tdefault\tgone\tweb\t/\t", "200", 5, 0))  # no such route

    per_backend = backend_totals(model, totals)

    assert list(per_backend) == ["default-web-80"]
    web = per_backend["default-web-80"]
    assert (web.requests, web.errors) == (100, 10)
    figures = backend_figures(web, None, 10.0, TIME_BOUNDS)
    assert figures["rate"] == 10.0 and figures["error_rate"] == 0.1
    assert 0.01 < figures["p50"] <= 0.025 and 0.25 < figures["p99"] <= 0.5


def test_recent_figures_are_the_difference_over_the_window():
    recent = Recent()
    recent.add(1000.0, {"b": BackendTotals(100, 0, [100.0] + [0.0] * 11)})
    recent.add(1010.0, {"b": BackendTotals(150, 0, [150.0] + [0.0] * 11)})
    recent.add(1040.0, {"b": BackendTotals(450, 30, [420.0, 30.0] + [0.0] * 10)})
    then_time, then = recent.baseline(1040.0)
    assert then_time == 1010.0  # the newest snapshot at least 30 s old
    figures = backend_figures(recent.snapshots[-1][1]["b"], then["b"], 1040.0 - then_time, TIME_BOUNDS)
    assert figures["rate"] == 10.0 and figures["error_rate"] == 0.1 and figures["requests"] == 450


def test_the_data_names_routes_endpoints_components_and_certificates_but_no_secret(cluster, tmp_path):
    cert, key = self_signed(tmp_path, "app.example.com")
    cluster.app("web", addresses=("10.0.0.1", "10.0.0.2"),
                tls=[{"hosts": ["app.example.com"], "secretName": "app-tls"}])
    cluster.tls_secret("app-tls", data={"tls.crt": base64.b64encode(cert.encode()).decode(),
                                        "tls.key": base64.b64encode(key.encode()).decode()})
    cluster.ingress("broken", host="broken.example.com", annotations={"backend-protocol": "AJP"})
    run_dir = tmp_path / "run"
    component_state.write_status(run_dir, "watcher", state="watching")
    component_state.write_status(run_dir, "crashmon", exits={"nginx": 2})
    metrics = SyncerMetrics(Settings.from_flags(run_dir=str(run_dir), state_dir=str(tmp_path / "state")))
    metrics.applied(cluster.build())

    data = asyncio.run(dashboard_data(metrics, Recent()))

    [route] = data["routes"]
    assert (route["host"], route["path"], route["kind"], route["ingress"], route["backend"], route["tls"]) == (
        "app.example.com", "/", "prefix", "default/web", "default-web-80", True)
    assert data["backends"][0]["name"] == "default-web-80"
    assert data["backends"][0]["endpoints"] == ["10.0.0.1:8080", "10.0.0.2:8080"]
    [certificate] = data["certificates"]
    assert (certificate["host"], certificate["secret"], certificate["issuer"]) == (
        "app.example.com", "default/app-tls", "app.example.com")
    assert 29 < certificate["days_left"] <= 30
    assert data["restarts"] == {"nginx": 2}
    assert {c["name"] for c in data["components"]} == {"watcher", "crashmon"}
    assert any(p["error"] and "backend-protocol" in p["text"] for p in data["problems"])
    text = json.dumps(data)
    assert "BEGIN" not in text and key.splitlines()[1] not in text and cert.splitlines()[1] not in text

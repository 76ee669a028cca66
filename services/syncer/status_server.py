"""The status port: /healthz (with detail), /metrics (Prometheus text) and /status (JSON)."""
from __future__ import annotations

from typing import Callable

from aiohttp import web

from services.common.settings import Settings
from services.syncer.metrics import SyncerMetrics

CONTENT_TYPE_METRICS = "text/plain; version=0.0.4; charset=utf-8"


async def start_status_server(settings: Settings, healthy: Callable[[], tuple[bool, dict]],
                              metrics: SyncerMetrics) -> web.AppRunner:
    async def healthz(_: web.Request) -> web.Response:
        ok, detail = healthy()
        return web.json_response({"healthy": ok, **detail}, status=200 if ok else 503)

    async def metrics_handler(_: web.Request) -> web.Response:
        return web.Response(body=metrics.exposition(), headers={"Content-Type": CONTENT_TYPE_METRICS})

    async def status_handler(_: web.Request) -> web.Response:
        return web.json_response(metrics.status_json())

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/metrics", metrics_handler)
    app.router.add_get("/status", status_handler)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "0.0.0.0", settings.status_port, reuse_address=True).start()
    return runner

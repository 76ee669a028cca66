"""The healthz port: /healthz, /metrics (Prometheus text), /status (JSON) and the read-only /dashboard.

It listens on --healthz-host (every address when empty), because the kubelet probes /healthz and
Prometheus scrapes /metrics from outside the pod. What names other tenants' objects or nginx's error
messages (the /status record, the detail of /healthz) is only for clients on the loopback interface: a
remote client gets /healthz's status code and a bare {"healthy": ...}. A request that nginx proxied (an
Ingress whose backend is this port, from a manifests directory that names 127.0.0.1) also comes from
loopback, but nginx always adds X-Forwarded-For and X-Real-IP: such a request is not local.
"""
from __future__ import annotations

import asyncio
import ipaddress
import zlib
from typing import AsyncIterator, Callable

from aiohttp import web

from services.common.settings import Settings

from .dashboard import PAGE, Recent, dashboard_data
from .metrics import SyncerMetrics

CONTENT_TYPE_METRICS = "text/plain; version=0.0.4; charset=utf-8"
# gzip's fastest level: /metrics at 10,000 Ingresses with traffic (322 MB) becomes 10 MB, for ~0.55 s of CPU in a
# thread beside the event loop; level 6 saves a fourth of that for twice the CPU (BENCHMARKS.md).
METRICS_GZIP_LEVEL = 1


# Set by nginx on every proxied request (and by other proxies): the client is not on this host.
_PROXY_HEADERS = ("X-Forwarded-For", "X-Real-IP", "Forwarded", "Via")


# The page loads nothing from elsewhere and may not be framed by another site.
_PAGE_HEADERS = {"Content-Security-Policy": "default-src 'none'; script-src 'unsafe-inline'; style-src "
                                            "'unsafe-inline'; connect-src 'self'; frame-ancestors 'none'",
                 "X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"}


def _dashboard_refused() -> web.Response:
    return web.json_response({"error": "the dashboard is served to clients on the node only (it names every "
                                       "tenant's routes): use `kubectl port-forward` to this port and open "
                                       "http://127.0.0.1:<port>/dashboard"}, status=403)


def accepts_gzip(request: web.Request) -> bool:
    """Whether the client's Accept-Encoding takes gzip (Prometheus asks for it), not refused with q=0."""
    for part in request.headers.get("Accept-Encoding", "").split(","):
        coding, _, params = part.partition(";")
        if coding.strip().lower() == "gzip":
            quality = params.replace(" ", "").lower().removeprefix("q=")
            try:
                return not params or float(quality) > 0
            except ValueError:
                return False
    return False


async def gzipped(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """The chunks as one gzip stream. Each is compressed in a thread while the next one is written (zlib lets go
    of the interpreter: the two can run on two cores, and the event loop runs meanwhile)."""
    compressor = zlib.compressobj(METRICS_GZIP_LEVEL, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    compressing: asyncio.Future[bytes] | None = None
    async for chunk in chunks:
        if compressing is not None and (compressed := await compressing):
            yield compressed
        compressing = asyncio.ensure_future(asyncio.to_thread(compressor.compress, chunk))
    if compressing is not None:
        yield await compressing
    yield compressor.flush()


def is_local_client(request: web.Request) -> bool:
    """A client on this host that talks to the port directly, not through a proxy."""
    if any(name in request.headers for name in _PROXY_HEADERS):
        return False
    try:
        address = ipaddress.ip_address((request.remote or "").split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        address = address.ipv4_mapped
    return address.is_loopback


async def start_healthz_server(settings: Settings, *, healthy: Callable[[], tuple[bool, dict]],
                               metrics: SyncerMetrics) -> web.AppRunner:
    async def healthz(request: web.Request) -> web.Response:
        ok, detail = healthy()
        body = {"healthy": ok, **detail} if is_local_client(request) else {"healthy": ok}
        return web.json_response(body, status=200 if ok else 503)

    async def metrics_handler(request: web.Request) -> web.StreamResponse:
        # Streamed as it is written (metrics.exposition), so a large /metrics is never whole in memory and a slow
        # client paces its own scrape.
        gzip = accepts_gzip(request)
        response = web.StreamResponse(headers={"Content-Type": CONTENT_TYPE_METRICS, "Vary": "Accept-Encoding",
                                               **({"Content-Encoding": "gzip"} if gzip else {})})
        await response.prepare(request)
        async for chunk in gzipped(metrics.exposition()) if gzip else metrics.exposition():
            await response.write(chunk)
        await response.write_eof()
        return response

    async def status_handler(request: web.Request) -> web.Response:
        if not is_local_client(request):
            return web.json_response({"error": "/status is served to loopback clients only; run "
                                               "`pyngress status` on the node"}, status=403)
        return web.json_response(metrics.status_json())

    recent = Recent()

    async def dashboard_page(request: web.Request) -> web.Response:
        if not is_local_client(request):
            return _dashboard_refused()
        return web.Response(body=PAGE.read_bytes(), content_type="text/html", charset="utf-8",
                            headers=_PAGE_HEADERS)

    async def dashboard_data_handler(request: web.Request) -> web.Response:
        if not is_local_client(request):
            return _dashboard_refused()
        return web.json_response(await dashboard_data(metrics, recent), headers={"Cache-Control": "no-store"})

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/metrics", metrics_handler)
    app.router.add_get("/status", status_handler)
    app.router.add_get("/dashboard", dashboard_page, allow_head=False)
    app.router.add_get("/dashboard/data", dashboard_data_handler, allow_head=False)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, settings.ports.healthz_host or None, settings.ports.healthz, reuse_address=True).start()
    return runner

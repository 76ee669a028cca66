"""`pyngress cniserver`: the CNI server on `<run-dir>/cni/cni-server.sock` and the broker to the workers.

SIGTERM (or SIGINT) stops it gracefully: /readyz turns 503, the socket stops accepting, the requests
in flight are answered, then the process exits.
"""
from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

import zmq.asyncio
from aiohttp import web

from proto import endpoints
from services.cniserver.broker import Broker
from services.cniserver.http_api import REQUEST_TIMEOUT_SECONDS, CniApi
from services.cniserver.metrics import CniMetrics
from services.cniserver.socket_dir import SocketDirError, bind_private_socket, prepare_socket_dir, socket_dir, \
    socket_path
from services.common import logs
from services.common.cni_config.node_pod_cidr import NodePodCidr
from services.common.component_state import write_status
from services.common.runner import StartupError, run_process
from services.common.settings import Settings

log = logging.getLogger("cniserver")


def run(settings: Settings, *, request_timeout: float = REQUEST_TIMEOUT_SECONDS) -> int:
    return run_process("cniserver", settings=settings, main=lambda: serve(settings, request_timeout))


async def serve(settings: Settings, request_timeout: float) -> None:
    """Serve until cancelled (SIGTERM), then drain: /readyz 503, stop accepting, answer what is in flight."""
    if os.geteuid() != 0:
        raise StartupError("cniserver must run as root: it configures network namespaces and its socket is "
                           "root-only")
    try:
        prepare_socket_dir(socket_dir(settings.paths.run_dir))
    except SocketDirError as err:
        raise StartupError(str(err)) from None
    path = socket_path(settings.paths.run_dir)
    listener = bind_private_socket(path)
    metrics = CniMetrics()
    ctx = zmq.asyncio.Context()

    def workers_changed(count: int) -> None:
        metrics.workers_registered.set(count)
        write_status(settings.paths.run_dir, "cniserver", state="serving", socket=str(path), workers=count)

    broker = Broker(ctx, endpoint=endpoints.cni_workers(settings.paths.run_dir), on_workers_changed=workers_changed)
    broker.start()
    api = CniApi(broker=broker, metrics=metrics, pod_cidr=settings.cni.pod_cidr, request_timeout=request_timeout)
    pod_cidr = NodePodCidr(run_dir=settings.paths.run_dir, node_name=settings.cni.node_name, pod_cidr=settings.cni.pod_cidr,
                           on_change=api.set_pod_cidr)
    follow_node = asyncio.get_running_loop().create_task(pod_cidr.follow(ctx)) if pod_cidr.needs_following else None
    # In-flight requests may take up to their timeout; shutdown waits that long for them.
    runner = web.AppRunner(api.application(), access_log=None, shutdown_timeout=request_timeout + 1)
    await runner.setup()
    await web.SockSite(runner, listener).start()
    workers_changed(0)
    log.info("serving", extra=logs.kv(socket=path, workers_endpoint=endpoints.cni_workers(settings.paths.run_dir)))

    try:
        await asyncio.Event().wait()  # until SIGTERM cancels this task
    finally:
        await _drain(settings, api=api, follow_node=follow_node, runner=runner, broker=broker, ctx=ctx, path=path)


async def _drain(settings: Settings, *, api: CniApi, follow_node: asyncio.Task | None, runner: web.AppRunner,
                 broker: Broker, ctx: zmq.asyncio.Context, path: Path) -> None:
    log.info("stopping: finishing the requests in flight")
    api.shutting_down = True
    if follow_node:
        follow_node.cancel()
    await runner.cleanup()
    await broker.close()
    ctx.term()
    path.unlink(missing_ok=True)
    write_status(settings.paths.run_dir, "cniserver", state="stopped", socket=str(path), workers=0)

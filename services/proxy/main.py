"""`pyngress proxy`: TLS passthrough on the HTTPS port (like ingress-nginx's --enable-ssl-passthrough).

supervisord runs N of these (numprocs) sharing the port with SO_REUSEPORT. Each one follows the
passthrough table the syncer publishes (clone pattern), so a restarted proxy, or a restarted syncer,
converges without help. Limits and timeouts: the --proxy-* flags (settings.ProxySettings).
Each process reports its counters in `<run-dir>/status/proxy-<pid>.json` for `pyngress status`.
"""
from __future__ import annotations

import asyncio
import logging
import os
import resource
from typing import Any

import zmq.asyncio

from proto import endpoints
from services.common.clone import CloneSubscriber
from services.common.component_state import write_status
from services.common.files import ensure_private_dir
from services.common.logs import kv
from services.common.runner import run_process
from services.common.settings import ProxySettings, Settings
from services.nginxconf.paths import NginxPaths
from services.proxy.relay import RelayUnavailable
from services.proxy.server import PassthroughServer
from services.proxy.table import RoutingTable

log = logging.getLogger("proxy")

# How long to hold the port closed at start while waiting for the first table: serving before it
# would send passthrough hosts to nginx (wrong certificate) for a moment; not serving at all because
# the syncer is down would be worse.
FIRST_TABLE_WAIT_SECONDS = 5.0
STATUS_PERIOD_SECONDS = 2.0


def run(settings: Settings) -> int:
    async def main() -> int:
        ensure_private_dir(settings.paths.run_dir)  # the syncer's table arrives over sockets in it
        _raise_open_files_limit()
        return await _serve(settings, settings.proxy)
    return run_process("proxy", settings=settings, main=main)


def _raise_open_files_limit() -> None:
    """Each proxied connection holds two descriptors; the usual soft limit of 1024 is far too low."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


class _StatusReporter:
    """Writes this process's status file periodically, and soon after the table changes."""

    def __init__(self, settings: Settings, server: PassthroughServer) -> None:
        self.settings = settings
        self.server = server
        self.component = f"proxy-{os.getpid()}"
        self.table_seq = 0
        self.table_epoch: str | None = None
        self._changed = asyncio.Event()

    def table_changed(self, seq: int, epoch: str | None) -> None:
        self.table_seq, self.table_epoch = seq, epoch
        self._changed.set()

    def fields(self, state: str) -> dict[str, Any]:
        table = self.server.table
        return {"state": state, "https_port": self.settings.ports.https,
                "nginx_socket": self.server.nginx[0],
                "table_hosts": len(table), "table_seq": self.table_seq, "table_epoch": self.table_epoch,
                "use_proxy_protocol": table.use_proxy_protocol, **self.server.status()}

    async def write(self, state: str) -> None:
        # Off the event loop: the atomic write fsyncs, and the loop is carrying traffic.
        fields = self.fields(state)
        await asyncio.get_running_loop().run_in_executor(
            None, lambda: write_status(self.settings.paths.run_dir, self.component, **fields))

    async def run(self) -> None:
        while True:
            try:
                await self.write("serving")
            except OSError as err:
                log.warning("cannot write the status file", extra=kv(error=err))
            try:
                await asyncio.wait_for(self._changed.wait(), STATUS_PERIOD_SECONDS)
            except TimeoutError:
                pass
            self._changed.clear()


async def _follow_table(subscriber: CloneSubscriber, *, table: RoutingTable, server: PassthroughServer,
                        status: _StatusReporter,
                        first: asyncio.Event) -> None:
    async for event in subscriber.events():
        table.apply(event)
        if server.port:  # started (with the table's choice then): follow the ConfigMap's disable-ipv6
            server.listen_ipv6(table.listen_ipv6)
        status.table_changed(subscriber.seq, subscriber.epoch)
        if not first.is_set():
            log.info("passthrough table received", extra=kv(hosts=len(table),
                                                            use_proxy_protocol=table.use_proxy_protocol))
            first.set()


async def _serve(settings: Settings, options: ProxySettings) -> int:
    loop = asyncio.get_running_loop()
    table = RoutingTable()
    # nginx's TLS listener is a Unix socket (--ssl-passthrough-proxy-port is accepted but opens no port).
    nginx_paths = NginxPaths.of(settings.paths.state_dir, settings.paths.run_dir)
    try:
        server = PassthroughServer(table, nginx_socket=nginx_paths.passthrough_tls_socket, options=options)
    except RelayUnavailable as err:
        log.error("cannot start the proxy", extra=kv(error=err))
        return 1
    ctx = zmq.asyncio.Context()
    subscriber = CloneSubscriber(ctx, updates_endpoint=endpoints.syncer_updates(settings.paths.run_dir),
                                 snapshot_endpoint=endpoints.syncer_snapshot(settings.paths.run_dir))
    status = _StatusReporter(settings, server)
    first_table = asyncio.Event()
    follow = asyncio.create_task(_follow_table(subscriber, table=table, server=server, status=status,
                                                     first=first_table))
    tasks: list[asyncio.Task[Any]] = [follow]
    try:
        try:
            await asyncio.wait_for(first_table.wait(), FIRST_TABLE_WAIT_SECONDS)
        except TimeoutError:
            log.warning("no passthrough table from the syncer yet; serving with an empty one "
                        "(every connection goes to nginx) until it arrives",
                        extra=kv(endpoint=endpoints.syncer_snapshot(settings.paths.run_dir)))
        try:
            await server.start(settings.ports.https, ipv6=table.listen_ipv6)
        except OSError as err:
            log.error("cannot listen on the HTTPS port; free it or change --https-port",
                      extra=kv(port=settings.ports.https, error=err))
            return 1
        log.info("serving", extra=kv(pid=os.getpid(), port=settings.ports.https, nginx_socket=server.nginx[0],
                                     loop=type(loop).__module__, hello_timeout=options.hello_timeout,
                                     idle_timeout=options.idle_timeout))
        reporting = asyncio.create_task(status.run())
        tasks.append(reporting)
        try:
            await asyncio.wait([follow])  # until SIGTERM cancels this task, or the subscription fails
            log.error("passthrough table subscription ended; exiting so that supervisord restarts us",
                      exc_info=follow.exception())
        finally:
            reporting.cancel()
            log.info("stopping", extra=kv(active=server.established, drain_timeout=options.drain_timeout))
            server.stop_accepting()
            await status.write("draining")
            await server.drain()
            await status.write("stopped")
        return 1
    finally:
        for task in tasks:
            task.cancel()
        subscriber.close()
        ctx.destroy(linger=0)

"""`pyngress cniworker`: one process of the CNI worker pool behind the cniserver's load-balancing broker.

It connects a DEALER to the broker's ROUTER, announces `cni.worker_ready {"pid", "slots"}`, runs each
`cni.request` through `handler.handle` in a thread pool of `slots` threads (several containers at
once; the broker never sends two requests for one container together) and answers `cni.reply`.

A socket monitor reports every (re)connection to the broker; each one re-sends `cni.worker_ready`, so a
restarted cniserver learns about this worker without a restart here. On SIGTERM the worker announces
0 slots (the broker stops sending), finishes what it runs, and exits.
"""
from __future__ import annotations

import asyncio
import logging
import os
import time
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, Protocol

import zmq
import zmq.asyncio
from zmq.utils.monitor import parse_monitor_message

from proto import ProtocolError, decode, encode, endpoints
from proto.cni import INTERNAL, TRY_AGAIN_LATER, CniError
from proto.limits import CNI_MAX_MESSAGE_BYTES
from services.common import logs
from services.common.cni_config.node_pod_cidr import NodePodCidr
from services.common.cni_config.request import CniRequest, parse_request
from services.common.component_state import write_status
from services.common.files import ensure_private_dir
from services.common.runner import run_process
from services.common.settings import Settings

log = logging.getLogger("cniworker")


class Handler(Protocol):
    """What serves one request: `handler.handle`, or a stand-in in tests."""

    def __call__(self, request: CniRequest, *, state_dir: str, pod_cidr: str | None) -> dict: ...


# Requests one worker runs at once. A 50-pod burst took as long with 2 as with 8 on 2 cores (the plugin
# processes use the CPU); more slots keep one slow request (a busy netns, a slow disk) from holding up others.
SLOTS = 8


def run(settings: Settings, *, handle: Handler | None = None) -> int:
    """Serve until SIGTERM; `handle` replaces the pod-networking core (tests use a stand-in)."""
    async def main() -> None:
        ensure_private_dir(settings.paths.run_dir)  # the broker's socket is in it: whoever binds there gets root's work
        chosen = handle
        if chosen is None:
            from services.cniworker.handler import handle as pod_networking
            chosen = pod_networking
        # At debug, pyroute2 logs every netlink message: megabytes of log, and ~5 ms more per ADD. (Set
        # after the import above: importing pyroute2 resets its logger's level.)
        logging.getLogger("pyroute2").setLevel(max(logging.getLogger().level, logging.INFO))
        await WorkerLoop(settings, handle=chosen).serve()
    return run_process("cniworker", settings=settings, main=main)


class WorkerLoop:
    def __init__(self, settings: Settings, *, handle: Handler, slots: int = SLOTS) -> None:
        self.settings = settings
        self.handle = handle
        self.slots = slots
        self.stopping = False
        self.name = os.environ.get("SUPERVISOR_PROCESS_NAME") or f"cniworker-{os.getpid()}"
        self._pool = ThreadPoolExecutor(max_workers=slots, thread_name_prefix="cni")
        self._running: set[asyncio.Task] = set()
        self.pod_cidr = NodePodCidr(run_dir=settings.paths.run_dir, node_name=settings.cni.node_name,
                                    pod_cidr=settings.cni.pod_cidr)
        self._ctx = zmq.asyncio.Context()
        self._sock = self._ctx.socket(zmq.DEALER)
        self._sock.setsockopt(zmq.LINGER, 1000)  # let the last replies out on exit
        self._sock.setsockopt(zmq.MAXMSGSIZE, CNI_MAX_MESSAGE_BYTES)
        # A fixed identity keeps this worker the same one to the broker across reconnections.
        self._sock.setsockopt(zmq.ROUTING_ID, f"{os.getpid()}-{os.urandom(4).hex()}".encode())

    async def serve(self) -> None:
        """Serve until cancelled (SIGTERM), then drain: announce no slots, finish what is in flight."""
        loop = asyncio.get_running_loop()
        monitor = self._sock.get_monitor_socket(zmq.EVENT_CONNECTED | zmq.EVENT_DISCONNECTED)
        endpoint = endpoints.cni_workers(self.settings.paths.run_dir)
        self._sock.connect(endpoint)
        log.info("started", extra=logs.kv(broker=endpoint, slots=self.slots))
        self._status("connecting")
        tasks = [loop.create_task(self._watch_connection(monitor)), loop.create_task(self._receive())]
        if self.pod_cidr.needs_following:
            tasks.append(loop.create_task(self.pod_cidr.follow(self._ctx)))
        try:
            await asyncio.Event().wait()  # until SIGTERM cancels this task
        finally:
            await self._drain(tasks, monitor)

    async def _drain(self, tasks: list[asyncio.Task], monitor: zmq.asyncio.Socket) -> None:
        log.info("stopping: finishing the requests in flight", extra=logs.kv(in_flight=len(self._running)))
        self.stopping = True
        await self._announce(0)
        if self._running:
            await asyncio.wait(self._running)
        for task in tasks:
            task.cancel()
        self._sock.disable_monitor()
        monitor.close()
        self._sock.close()
        self._ctx.term()
        self._pool.shutdown()
        self._status("stopped")

    async def _watch_connection(self, monitor: zmq.asyncio.Socket) -> None:
        while True:
            event = parse_monitor_message(await monitor.recv_multipart())
            if event["event"] == zmq.EVENT_CONNECTED:
                # First connection, or the cniserver restarted: (re-)register.
                await self._announce(0 if self.stopping else self.slots)
                self._status("connected")
            else:
                log.warning("lost the connection to the broker; reconnecting")
                self._status("connecting")

    async def _announce(self, slots: int) -> None:
        await self._sock.send(encode("cni.worker_ready", {"pid": os.getpid(), "slots": slots}))
        log.info("announced to the broker", extra=logs.kv(slots=slots))

    async def _receive(self) -> None:
        while True:
            payload = await self._sock.recv()
            try:
                message = decode(payload)
            except ProtocolError as err:
                log.warning("dropped a message from the broker: %s", err)
                continue
            if message.type != "cni.request":
                log.warning("dropped a %s message from the broker", message.type)
                continue
            task = asyncio.get_running_loop().create_task(self._serve_request(message.body))
            self._running.add(task)
            task.add_done_callback(self._running.discard)

    async def _serve_request(self, body: dict[str, Any]) -> None:
        request_id, started = body["id"], time.monotonic()
        command, container = body["env"].get("CNI_COMMAND", ""), body["env"].get("CNI_CONTAINERID", "")
        try:
            if self.stopping:
                raise CniError(TRY_AGAIN_LATER, "the cniworker is stopping",
                               details="retry: another worker will take it")
            request = parse_request(body["env"], body["config"])
            result = await asyncio.get_running_loop().run_in_executor(self._pool, partial(
                self.handle, request, state_dir=self.settings.paths.state_dir, pod_cidr=self.pod_cidr.value))
            reply: dict[str, Any] = {"id": request_id, "ok": True, "result": result or {}}
        except CniError as err:
            reply = {"id": request_id, "ok": False, "error": err.to_json()}
        except Exception as err:
            log.exception("request failed unexpectedly", extra=logs.kv(id=request_id))
            reply = {"id": request_id, "ok": False, "error": CniError(
                INTERNAL, f"the cniworker failed unexpectedly: {err}", details="see the cniworker log").to_json()}
        await self._sock.send(encode("cni.reply", reply))
        log.debug("answered", extra=logs.kv(command=command, container=container, ok=reply["ok"],
                                            ms=round((time.monotonic() - started) * 1000, 1)))

    def _status(self, state: str) -> None:
        write_status(self.settings.paths.run_dir, self.name, state=state, slots=self.slots)

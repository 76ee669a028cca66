"""`pyngress tracer`: takes the spans batches nginx recorded (GET /configuration/spans on its configuration socket,
a few times a second while tracing is on, once a second while it is off) into the export queue, and writes what
became of the spans to its status record (<run-dir>/status/tracer.json), which the syncer's /metrics reads."""
from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import TYPE_CHECKING

import orjson

from services.common import component_state, logs
from services.common.runner import run_process
from services.common.settings import Settings
from services.nginxconf import config_api
from services.nginxconf.config_api import NginxUnavailableError
from services.nginxconf.paths import NginxPaths

if TYPE_CHECKING:
    from .export_queue import ExportQueue

log = logging.getLogger("tracer")

POLL_SECONDS = 0.2  # tracing on: nginx keeps at most a fraction of its spans dictionary between two takes
IDLE_POLL_SECONDS = 1.0  # tracing off, or nginx down
STATUS_SECONDS = 2.0
# Below nginx on the same cores: a tracer short of CPU drops spans (counted) instead of slowing requests.
NICENESS = 10


async def take_forever(paths: NginxPaths, run_dir: str) -> None:
    queue: ExportQueue | None = None
    status_at = 0.0
    while True:
        pause = IDLE_POLL_SECONDS
        try:
            answer = orjson.loads(await config_api.get(paths, "/configuration/spans"))
        except (NginxUnavailableError, orjson.JSONDecodeError):
            answer = {}
        if answer.get("exporter"):
            if queue is None:
                from .export_queue import ExportQueue  # the SDK: loaded once something is traced
                queue = ExportQueue()
            queue.configure(answer["exporter"])
            queue.counts.dropped_in_nginx += answer.get("dropped", 0)
            for batch in answer.get("batches", ()):
                queue.add(batch)
            pause = 0 if answer.get("more") else POLL_SECONDS
        if time.monotonic() >= status_at:
            status_at = time.monotonic() + STATUS_SECONDS
            await asyncio.to_thread(component_state.write_status, run_dir, "tracer", tracing=queue is not None,
                                    spans=queue.counts.as_dict() if queue else {})
        await asyncio.sleep(pause)


def run(settings: Settings) -> int:
    paths = NginxPaths.of(settings.paths.state_dir, settings.paths.run_dir)
    os.nice(NICENESS)

    async def main() -> None:
        log.info("taking spans from nginx", extra=logs.kv(socket=paths.config_socket))
        await take_forever(paths, settings.paths.run_dir)

    run_process("tracer", settings=settings, main=main)

"""One way to run a pyngress process: logging, the uvloop event loop, SIGTERM and SIGINT, errors.

Every long-running component's `run(settings)` is `run_process(name, settings=settings, main=main)`, where
`main` is a coroutine function that runs the component (usually an `asyncio.TaskGroup` of its tasks) until
cancelled:
- SIGTERM or SIGINT cancels `main`; its `finally` blocks and the TaskGroup's cancellation close sockets and
  release what the process holds (a Lease, say), and the process exits 0;
- a `StartupError` (a setting or a directory the process cannot use) is logged as one line saying what to
  change, without a traceback, and the process exits 2;
- any other exception (each cause of an ExceptionGroup on its own) is logged with its traceback, and the
  process exits 1 so that supervisord restarts it;
- `main` may return an exit code of its own.
Once `main` has returned, the process ends at once (os._exit): the interpreter's own teardown would free every
object one by one (0.7 s for the syncer at 10,000 Ingresses), and closing the event loop would wait for worker
threads still computing what nobody awaits any more (a model build: 0.6 s more). What a thread writes is
written atomically (a temporary file renamed), so stopping it half way leaves nothing half written; work that
must finish (a CNI request in flight) is awaited by `main` itself before it returns.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from typing import Awaitable, Callable, NoReturn

import uvloop

from services.common import logs
from services.common.settings import Settings


class StartupError(RuntimeError):
    """The process cannot start as configured; the message says what to change."""


def run_process(component: str, *, settings: Settings, main: Callable[[], Awaitable[int | None]]) -> NoReturn:
    """Run `main` on a uvloop event loop until it returns, fails, or a signal stops it, then exit."""
    code = _run(component, settings=settings, main=main)
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _run(component: str, *, settings: Settings, main: Callable[[], Awaitable[int | None]]) -> int:
    log = logs.setup(component, settings.log_level)
    # The runner is not closed: closing it would wait for the loop's worker threads, and the process ends next.
    runner = asyncio.Runner(loop_factory=uvloop.new_event_loop)
    try:
        code = runner.run(_until_signalled(main))
    except StartupError as err:
        log.error(f"{component} cannot start: {err}")
        return 2
    except Exception as failure:  # noqa: BLE001 - reported, then supervisord restarts the process
        # A task group wraps what failed in an ExceptionGroup: report each cause on its own.
        for cause in failure.exceptions if isinstance(failure, ExceptionGroup) else [failure]:
            if isinstance(cause, StartupError):
                log.error(f"{component} cannot start: {cause}")
                return 2
            log.error(f"{component} stopped: {cause}", exc_info=cause)
        return 1
    log.info(f"{component} stopped")
    return code or 0


async def _until_signalled(main: Callable[[], Awaitable[int | None]]) -> int | None:
    task = asyncio.current_task()
    assert task is not None
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, task.cancel)
    with contextlib.suppress(asyncio.CancelledError):
        return await main()
    return None

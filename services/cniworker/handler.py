"""The worker's entry point: one CNI request in, its result (or a CniError) out.

Thread-safe and process-safe: calls for different containers may run at once in threads of one
worker and in several workers. Everything shared lives in the kernel (links, addresses, nftables,
each change atomic and retried on EEXIST) or in the IPAM store (flock). Call it from a thread
pool, not from inside a running asyncio loop (pyroute2's synchronous API refuses that).
"""
from __future__ import annotations

import logging
from typing import Callable

from proto.cni import INTERNAL, INVALID_ENV, CniError
from services.common.cni_config.request import CniRequest
from services.common.logs import kv

from .commands import cmd_add, cmd_check, cmd_del, cmd_gc, cmd_status, cmd_update

log = logging.getLogger("cniworker")


_COMMANDS: dict[str, Callable[..., dict]] = {
    "ADD": cmd_add,
    "DEL": cmd_del,
    "CHECK": cmd_check,
    "UPDATE": cmd_update,
    "STATUS": cmd_status,
    "GC": cmd_gc,
}


def handle(request: CniRequest, *, state_dir: str, pod_cidr: str | None) -> dict:
    """Performs `request`; returns the CNI result, {} when the command has no output (DEL, CHECK,
    STATUS, GC). Raises CniError, whose code and message are meant for the runtime's user."""
    command_name = request.env.command
    command = _COMMANDS.get(command_name)
    if command is None:
        raise CniError(INVALID_ENV, f"CNI_COMMAND {command_name!r} is not handled by the worker",
                       details=f"expected one of {', '.join(_COMMANDS)}")
    try:
        return command(request, state_dir=state_dir, pod_cidr=pod_cidr)
    except CniError:
        raise
    except Exception as e:
        log.exception("unexpected failure", extra=kv(command=command_name, container=request.env.container_id))
        raise CniError(INTERNAL, f"{command_name} failed unexpectedly: {e}",
                       details="this is a bug in pyngress's CNI worker; the worker log has the traceback") from e

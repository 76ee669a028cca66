"""Helpers for the leader election and Ingress status tests."""
from __future__ import annotations

import asyncio
import time
from typing import Any, Callable

from services.common.objects import object_key
from tests.kube_api import KubeApiServer


async def until(condition: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(0.02)


def store_of(api: KubeApiServer) -> dict[str, Any]:
    """The store the watcher would publish for Ingresses and IngressClasses (both kept whole)."""
    return {object_key(obj): obj for kind in ("Ingress", "IngressClass") for obj in api.objects(kind)}

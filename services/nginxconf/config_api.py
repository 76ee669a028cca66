"""The client side of nginx's configuration API (templates/lua/pyngress/api.lua and nginx.conf's internal
server), on a Unix socket only root can open (paths.py), never on TCP: the host name is unused."""
from __future__ import annotations

import asyncio

import aiohttp

from services.nginxconf.paths import NginxPaths

HTTP_TIMEOUT_SECONDS = 30.0


class NginxUnavailableError(ConnectionError):
    """nginx's configuration socket does not answer (nginx is starting or stopped)."""


def session(paths: NginxPaths, *, timeout: float = HTTP_TIMEOUT_SECONDS) -> aiohttp.ClientSession:
    return aiohttp.ClientSession(
        base_url="http://nginx", connector=aiohttp.UnixConnector(path=str(paths.config_socket)),
        timeout=aiohttp.ClientTimeout(total=timeout))


async def get(paths: NginxPaths, path: str, *, timeout: float = 5.0) -> bytes:
    """The body of a 200 answer to GET `path`; NginxUnavailableError otherwise."""
    try:
        async with session(paths, timeout=timeout) as client, client.get(path) as response:
            body = await response.read()
    except (aiohttp.ClientConnectionError, asyncio.TimeoutError) as err:
        raise NginxUnavailableError(f"nginx does not answer on {paths.config_socket}: {err}") from err
    if response.status != 200:
        raise NginxUnavailableError(f"nginx answered {response.status} for {path}")
    return body

"""The tables nginx's Lua routes by (routes, backends, certificates), pushed without a reload.

Each table goes to `<state-dir>/dynamic/<table>.json` (0600, read by a freshly started master) and, when
nginx does not hold that version yet, to `POST /configuration/<table>` on nginx's configuration socket (a
Unix socket only root can open, see paths.py). A table's version is the SHA-256 of its canonical JSON, so an
unchanged table is never sent twice and a restarted nginx reports what it loaded.

The formats are documented in templates/lua/pyngress/{router,balancer,certificates}.lua; backends hold
addresses only (names are resolved before they get here).
"""
from __future__ import annotations

import asyncio
import hashlib
import json
from typing import Any

import aiohttp

from services.common.files import atomic_write
from services.nginxconf import config_api
from services.nginxconf.config_api import NginxUnavailableError
from services.nginxconf.paths import DYNAMIC_TABLES, NginxPaths
from services.nginxconf.prefix import prepare


class NginxPushError(RuntimeError):
    """nginx refused a pushed table; the message is nginx's reason."""


def canonical_json(data: Any) -> bytes:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


class TablePusher:
    def __init__(self, paths: NginxPaths) -> None:
        self.paths = paths
        self._lock = asyncio.Lock()
        self._written: dict[str, str] = {}  # table → version in its state file
        self._pushed: dict[str, str] = {}   # table → version nginx acknowledged

    async def push(self, *, routes: dict[str, Any], backends: dict[str, list[str]],
                   certificates: dict[str, Any]) -> list[str]:
        """Bring nginx's tables to these, without a reload; the names of the tables nginx did not hold yet.

        A table's state file is replaced once nginx has taken it, or when nginx does not answer (so that
        a starting nginx loads it). Raises NginxUnavailableError when nginx does not answer, and
        NginxPushError when nginx refuses a table: nginx and the state file keep the last good one.
        """
        tables = {"routes": routes, "backends": backends, "certificates": certificates}
        async with self._lock:
            bodies: dict[str, bytes] = {}
            versions: dict[str, str] = {}
            for name in DYNAMIC_TABLES:
                data = canonical_json(tables[name])
                versions[name] = hashlib.sha256(data).hexdigest()
                bodies[name] = b'{"version":"' + versions[name].encode() + b'","data":' + data + b"}"
            pushed = []
            async with self._session() as session:
                try:
                    held = await self._get_versions(session)
                except NginxUnavailableError:
                    for name in DYNAMIC_TABLES:
                        await self._keep(name, version=versions[name], body=bodies[name])
                    raise
                for name in DYNAMIC_TABLES:  # backends before the routes that may name them
                    if held.get(name) != versions[name]:
                        await self._post(session, name, body=bodies[name])
                        pushed.append(name)
                    self._pushed[name] = versions[name]
                    await self._keep(name, version=versions[name], body=bodies[name])
            return pushed

    async def needs_push(self) -> bool:
        """True when nginx holds other tables than the last push (or nothing was pushed yet)."""
        held = await self.versions()
        return not self._pushed or any(held.get(name) != version for name, version in self._pushed.items())

    async def versions(self) -> dict[str, str | None]:
        """The version of each table nginx holds (None for a table it has not received)."""
        async with self._session() as session:
            return await self._get_versions(session)

    async def _keep(self, name: str, *, version: str, body: bytes) -> None:
        """Make `body` the state file of table `name` (0600), unless it already is."""
        if self._written.get(name) != version:
            await asyncio.to_thread(self._write_state_file, name, body)
            self._written[name] = version

    def _write_state_file(self, name: str, body: bytes) -> None:
        prepare(self.paths)
        atomic_write(self.paths.table_file(name), body, mode=0o600)

    def _session(self) -> aiohttp.ClientSession:
        return config_api.session(self.paths)

    async def _get_versions(self, session: aiohttp.ClientSession) -> dict[str, str | None]:
        try:
            async with session.get("/configuration/versions") as response:
                if response.status != 200:
                    raise NginxUnavailableError(f"nginx answered {response.status} for its table versions")
                return await response.json()
        except (aiohttp.ClientConnectionError, asyncio.TimeoutError) as err:
            raise NginxUnavailableError(f"nginx does not answer on {self.paths.config_socket}: {err}") from err

    async def _post(self, session: aiohttp.ClientSession, name: str, *, body: bytes) -> None:
        try:
            async with session.post(f"/configuration/{name}", data=body,
                                    headers={"Content-Type": "application/json"}) as response:
                text = await response.text()
        except (aiohttp.ClientConnectionError, asyncio.TimeoutError) as err:
            raise NginxUnavailableError(f"pushing {name} to nginx failed: {err}") from err
        if response.status != 201:
            try:
                reason = json.loads(text)["error"]
            except (ValueError, KeyError, TypeError):
                reason = text.strip() or f"status {response.status}"
            raise NginxPushError(f"nginx refused {name}: {reason}")

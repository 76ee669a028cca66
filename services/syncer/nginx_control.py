"""Driving a running nginx from the syncer: test and reload nginx.conf, push the dynamic tables.

- `apply(conf)`: `nginx -t` on a copy beside the live file, atomic replace, SIGHUP to the master (not
  `nginx -s reload`, which parses the whole configuration once more before signalling), then wait until
  the master runs workers of the new configuration and the old ones no longer accept connections.
- `push(routes, backends, certificates)`: each table goes to `<state-dir>/dynamic/<table>.json` (0600,
  read by a freshly started master) and, when nginx does not hold that version yet, to
  `POST /configuration/<table>` on nginx's configuration socket (a Unix socket, see paths.py). A table's
  version is the SHA-256 of its canonical JSON, so an unchanged table is never sent twice and a restarted
  nginx reports what it loaded.
- `needs_push()`: whether nginx holds something other than the last push (it restarted, say).

The formats of the three tables are documented in templates/lua/pyngress/{router,balancer,certificates}.lua.
"""
from __future__ import annotations

import asyncio
import hashlib
import ipaddress
import json
import logging
import os
import signal
import socket
import ssl
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from services.common import logs
from services.common.files import atomic_write
from services.common.settings import Settings
from services.syncer.backends import forbidden_address
from services.nginx import processes
from services.nginx.config_test import NginxConfigError, failure_message, check_command
from services.nginx.paths import DYNAMIC_TABLES, NginxPaths
from services.nginx.prefix import prepare

log = logging.getLogger("syncer")

__all__ = ["NginxControl", "NginxConfigError", "NginxReloadError", "NginxUnavailableError", "NginxPushError",
           "PushResult"]

# Generous: nginx.conf stays small (routing is in Lua), so a reload normally takes well under a second.
RELOAD_TIMEOUT_SECONDS = 60.0
HTTP_TIMEOUT_SECONDS = 30.0
_UNCHECKED = object()


class NginxReloadError(NginxConfigError):
    """nginx was signalled but did not start workers for the new configuration; the old one still serves."""


class NginxUnavailableError(ConnectionError):
    """nginx's configuration socket does not answer (nginx is starting or stopped); the state files are written."""


class NginxPushError(RuntimeError):
    """nginx refused a pushed table; the message is nginx's reason."""


@dataclass
class PushResult:
    pushed: list[str] = field(default_factory=list)  # tables sent to nginx (the others it already held)
    # Certificates left out of the push, cert-id → why (their hosts get the wildcard or default one).
    rejected_certificates: dict[str, str] = field(default_factory=dict)


def canonical_json(data: Any) -> bytes:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


class NginxControl:
    def __init__(self, state_dir: str | Path, run_dir: str | Path,
                 reload_timeout: float = RELOAD_TIMEOUT_SECONDS) -> None:
        self.paths = NginxPaths.of(state_dir, run_dir)
        self.reload_timeout = reload_timeout
        self._apply_lock = asyncio.Lock()
        self._push_lock = asyncio.Lock()
        self._written: dict[str, str] = {}  # table → version in its state file
        self._pushed: dict[str, str] = {}   # table → version nginx acknowledged
        self._certificate_checks: dict[str, str | None] = {}  # digest of cert+key → problem or None

    @classmethod
    def from_settings(cls, settings: Settings) -> NginxControl:
        return cls(settings.state_dir, settings.run_dir)

    @property
    def conf_path(self) -> Path:
        return self.paths.conf

    # --- nginx.conf -------------------------------------------------------------------------------

    async def test(self, conf_text: str) -> None:
        """Run `nginx -t` on `conf_text`; raise NginxConfigError with nginx's error lines if it fails."""
        await asyncio.to_thread(prepare, self.paths)
        fd, tmp = tempfile.mkstemp(dir=self.paths.prefix, prefix=".nginx.conf.test-")
        try:
            with os.fdopen(fd, "w") as f:
                f.write(conf_text)
            # cwd "/": the prefix directory is how processes.py recognises this instance's processes.
            proc = await asyncio.create_subprocess_exec(
                *check_command(self.paths, Path(tmp)), cwd="/",
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
            output, _ = await proc.communicate()
        finally:
            os.unlink(tmp)
        if proc.returncode != 0:
            raise NginxConfigError(failure_message(output.decode(errors="replace"), Path(tmp), self.paths.conf))

    async def apply(self, conf_text: str) -> bool:
        """Test, install and load `conf_text`.

        Returns True once nginx serves it, False when no master is running (the file is in place for the
        next start). Raises NginxConfigError (nothing changed) or NginxReloadError (the file is replaced,
        but nginx kept the old configuration: its log says why).
        """
        async with self._apply_lock:
            await self.test(conf_text)
            master = processes.running_master(self.paths.prefix, self.paths.pid_file)
            before = {w.pid for w in processes.workers_of(master.pid, self.paths.prefix)} if master else set()
            atomic_write(self.paths.conf, conf_text.encode(), mode=0o600)
            if master is None or not processes.send_signal(master, self.paths.prefix, signal.SIGHUP):
                log.info("nginx is not running; it loads the new configuration when it starts",
                         extra=logs.kv(conf=str(self.paths.conf)))
                return False
            await self._wait_for_new_workers(master.pid, before)
            return True

    async def _wait_for_new_workers(self, master: int, before: set[int]) -> None:
        deadline = time.monotonic() + self.reload_timeout
        while time.monotonic() < deadline:
            workers = processes.workers_of(master, self.paths.prefix)
            started = any(w.pid not in before for w in workers)
            # An old worker's title changes once it has stopped accepting connections.
            old_accepting = any(w.pid in before and w.title == "nginx: worker process" for w in workers)
            if started and not old_accepting:
                return
            if not workers and processes.running_master(self.paths.prefix, self.paths.pid_file) is None:
                raise NginxReloadError("nginx's master exited during the reload; see nginx's log")
            await asyncio.sleep(0.05)
        raise NginxReloadError(f"nginx did not start workers for the new configuration within "
                               f"{self.reload_timeout:.0f}s; the previous configuration keeps serving "
                               "(nginx's log says why)")

    # --- dynamic tables ---------------------------------------------------------------------------

    async def push(self, routes: dict[str, Any], backends: dict[str, list[str]],
                   certificates: dict[str, Any]) -> PushResult:
        """Bring nginx's routes, backends and certificates to these tables, without a reload.

        A table's state file is replaced once nginx has taken it, or when nginx does not answer (so that
        a starting nginx loads it). Raises NginxUnavailableError when nginx does not answer, and
        NginxPushError when nginx refuses a table: nginx and the state file keep the last good one.
        """
        async with self._push_lock:
            result = PushResult()
            certificates, result.rejected_certificates = await asyncio.to_thread(
                self._usable_certificates, certificates)
            tables = {"routes": routes, "backends": await resolve_backends(backends), "certificates": certificates}
            bodies: dict[str, bytes] = {}
            versions: dict[str, str] = {}
            for name in DYNAMIC_TABLES:
                data = canonical_json(tables[name])
                versions[name] = hashlib.sha256(data).hexdigest()
                bodies[name] = b'{"version":"' + versions[name].encode() + b'","data":' + data + b"}"
            async with self._session() as session:
                try:
                    held = await self._get_versions(session)
                except NginxUnavailableError:
                    for name in DYNAMIC_TABLES:
                        await self._keep(name, versions[name], bodies[name])
                    raise
                for name in DYNAMIC_TABLES:  # backends before the routes that may name them
                    if held.get(name) != versions[name]:
                        await self._post(session, name, bodies[name])
                        result.pushed.append(name)
                    self._pushed[name] = versions[name]
                    await self._keep(name, versions[name], bodies[name])
            return result

    async def needs_push(self) -> bool:
        """True when nginx holds other tables than the last push (or nothing was pushed yet)."""
        held = await self.versions()
        return not self._pushed or any(held.get(name) != version for name, version in self._pushed.items())

    async def versions(self) -> dict[str, str | None]:
        """The version of each table nginx holds (None for a table it has not received)."""
        async with self._session() as session:
            return await self._get_versions(session)

    async def _keep(self, name: str, version: str, body: bytes) -> None:
        """Make `body` the state file of table `name` (0600), unless it already is."""
        if self._written.get(name) != version:
            await asyncio.to_thread(self._write_state_file, name, body)
            self._written[name] = version

    def _write_state_file(self, name: str, body: bytes) -> None:
        prepare(self.paths)
        atomic_write(self.paths.table_file(name), body, mode=0o600)

    def _session(self) -> aiohttp.ClientSession:
        # The API is on a Unix socket only root can open (paths.py), never on TCP: the host name is unused.
        return aiohttp.ClientSession(
            base_url="http://nginx", connector=aiohttp.UnixConnector(path=str(self.paths.config_socket)),
            timeout=aiohttp.ClientTimeout(total=HTTP_TIMEOUT_SECONDS))

    async def _get_versions(self, session: aiohttp.ClientSession) -> dict[str, str | None]:
        try:
            async with session.get("/configuration/versions") as response:
                if response.status != 200:
                    raise NginxUnavailableError(f"nginx answered {response.status} for its table versions")
                return await response.json()
        except (aiohttp.ClientConnectionError, asyncio.TimeoutError) as err:
            raise NginxUnavailableError(f"nginx does not answer on {self.paths.config_socket}: {err}") from err

    async def _post(self, session: aiohttp.ClientSession, name: str, body: bytes) -> None:
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

    def _usable_certificates(self, certificates: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
        """The certificates table without pairs that OpenSSL cannot load, and why each was left out."""
        certs = certificates.get("certs") or {}
        checks: dict[str, str | None] = {}
        rejected: dict[str, str] = {}
        for cert_id, pair in certs.items():
            if not (isinstance(pair, dict) and isinstance(pair.get("cert"), str) and isinstance(pair.get("key"), str)):
                raise ValueError(f"certificate {cert_id!r} must be {{'cert': PEM, 'key': PEM}}")
            digest = hashlib.sha256(f"{pair['cert']}\n{pair['key']}".encode()).hexdigest()
            if digest not in checks:
                known = self._certificate_checks.get(digest, _UNCHECKED)
                if known is _UNCHECKED:
                    known = certificate_problem(pair["cert"], pair["key"])
                    if known:
                        log.warning("certificate left out", extra=logs.kv(certificate=cert_id, problem=known))
                checks[digest] = known
            problem = checks[digest]
            if problem:
                rejected[cert_id] = problem
        self._certificate_checks = checks  # only the pairs still in use
        if not rejected:
            return certificates, rejected
        live = set(certs) - set(rejected)
        default = certificates.get("default")
        return {
            "certs": {i: certs[i] for i in live},
            "hosts": {h: i for h, i in (certificates.get("hosts") or {}).items() if i in live},
            "default": default if default in live else None,
        }, rejected


def certificate_problem(cert_pem: str, key_pem: str) -> str | None:
    """Why OpenSSL would not serve this certificate chain with this key, or None."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    cert_fd, key_fd = os.memfd_create("cert"), os.memfd_create("key")
    try:
        os.write(cert_fd, cert_pem.encode())
        os.write(key_fd, key_pem.encode())
        # An encrypted key would make OpenSSL ask for a password: refuse it instead.
        context.load_cert_chain(f"/proc/self/fd/{cert_fd}", f"/proc/self/fd/{key_fd}", password=lambda: b"")
        return None
    except ssl.SSLError as err:
        return f"certificate and key do not load together ({err.reason or err})"
    finally:
        os.close(cert_fd)
        os.close(key_fd)


async def resolve_backends(backends: dict[str, list[str]]) -> dict[str, list[str]]:
    """Backends with host-name endpoints (ExternalName Services) resolved to addresses.

    The Lua balancer takes addresses only. A name that does not resolve is left out and logged; the
    backend answers 503 if nothing else is left.
    """
    names = {endpoint for endpoints in backends.values() for endpoint in endpoints if _is_name(endpoint)}
    if not names:
        return backends
    resolved = dict(zip(names, await asyncio.gather(*(_resolve(endpoint) for endpoint in names))))
    return {backend: [address for endpoint in endpoints for address in resolved.get(endpoint, [endpoint])]
            for backend, endpoints in backends.items()}


def _split_endpoint(endpoint: str) -> tuple[str, str]:
    host, _, port = endpoint.rpartition(":")
    return host.removeprefix("[").removesuffix("]"), port


def _is_name(endpoint: str) -> bool:
    host, _ = _split_endpoint(endpoint)
    try:
        ipaddress.ip_address(host)
        return False
    except ValueError:
        return True


async def _resolve(endpoint: str) -> list[str]:
    host, port = _split_endpoint(endpoint)
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, int(port), type=socket.SOCK_STREAM)
    except (OSError, ValueError) as err:
        log.warning("endpoint left out: its name does not resolve", extra=logs.kv(endpoint=endpoint, error=str(err)))
        return []
    addresses = []
    for family, _, _, _, sockaddr in infos:
        if forbidden_address(sockaddr[0]):
            # The model refuses such names written out; one that only resolves to the node itself (a DNS
            # record pointing at 127.0.0.1, say) must not reach the controller's own ports either.
            log.warning("endpoint address left out: the name resolves to the node itself",
                        extra=logs.kv(endpoint=endpoint, address=sockaddr[0]))
            continue
        address = f"[{sockaddr[0]}]:{sockaddr[1]}" if family == socket.AF_INET6 else f"{sockaddr[0]}:{sockaddr[1]}"
        if address not in addresses:
            addresses.append(address)
    return addresses

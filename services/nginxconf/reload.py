"""Test and load nginx.conf into one running nginx instance.

`apply(conf)`: `nginx -t` on a copy beside the live file, atomic replace, SIGHUP to the master (not
`nginx -s reload`, which parses the whole configuration once more before signalling), then wait until the
master runs workers of the new configuration and the old ones no longer accept connections. Old workers still
draining are bounded by generations (draining.py). A configuration that binds other single addresses (the
ConfigMap's bind-address) cannot be reloaded: the master is stopped gracefully and supervisord starts a new one.
"""
from __future__ import annotations

import asyncio
import logging
import os
import signal
import tempfile
import time
from pathlib import Path

from services.common import logs
from services.common.files import atomic_write
from services.nginxconf import processes
from services.nginxconf.config_check import NginxConfigError, check_command, failure_message
from services.nginxconf.draining import DrainingGenerations
from services.nginxconf.listen_addresses import bound_addresses
from services.nginxconf.paths import NginxPaths
from services.nginxconf.prefix import prepare

log = logging.getLogger(__name__)

# Generous: nginx.conf stays small (routing is in Lua), so a reload normally takes well under a second.
RELOAD_TIMEOUT_SECONDS = 60.0
# Generations of old workers that may drain at once unless the caller says otherwise (draining.py).
MAX_DRAINING_GENERATIONS = 8


class NginxReloadError(RuntimeError):
    """nginx took the new nginx.conf (it passed `nginx -t` and is installed) but did not finish loading it:
    its master exited, or no new workers started in time. Not a rejected configuration: nginx's log says why."""


class NginxReloader:
    def __init__(self, paths: NginxPaths, *, reload_timeout: float = RELOAD_TIMEOUT_SECONDS,
                 max_draining_generations: int = MAX_DRAINING_GENERATIONS) -> None:
        self.paths = paths
        self.reload_timeout = reload_timeout
        self.draining = DrainingGenerations(max_draining_generations)
        self._lock = asyncio.Lock()

    async def test(self, conf_text: str) -> None:
        """Run `nginx -t` on `conf_text`; raise NginxConfigError with nginx's error lines if it fails."""
        await asyncio.to_thread(prepare, self.paths)
        fd, tmp = tempfile.mkstemp(dir=self.paths.prefix, prefix=".nginx.conf.test-")
        try:
            with os.fdopen(fd, "w") as f:
                f.write(conf_text)
            # cwd "/": the prefix directory is how processes.py recognises this instance's processes.
            # stdout /dev/null: nginx -t opens the access log, and /dev/stdout cannot be opened when it is the
            # socket uvloop gives a child for a pipe (ENXIO); nginx says what it found on stderr.
            proc = await asyncio.create_subprocess_exec(
                *check_command(self.paths, Path(tmp)), cwd="/",
                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
            _, output = await proc.communicate()
        finally:
            os.unlink(tmp)
        if proc.returncode != 0:
            raise NginxConfigError(failure_message(output.decode(errors="replace"), tested=Path(tmp),
                                                   shown_as=self.paths.conf))

    async def apply(self, conf_text: str) -> bool:
        """Test, install and load `conf_text`.

        Returns True once nginx serves it, False when no master is running or it restarts for new addresses
        (the file is in place for the next start). Raises NginxConfigError (nothing changed) or NginxReloadError (the file is installed,
        but nginx has not loaded it).
        """
        async with self._lock:
            await self.test(conf_text)
            master = processes.running_master(self.paths.prefix, self.paths.pid_file)
            workers = processes.workers_of(master.pid, self.paths.prefix) if master else []
            before = {w.pid for w in workers}
            rebinds = master is not None and self._rebinds(conf_text)
            atomic_write(self.paths.conf, conf_text.encode(), mode=0o600)
            if rebinds and master is not None and processes.send_signal(master, self.paths.prefix, signal.SIGQUIT):
                # The master drains and exits; supervisord starts nginx again, which binds the new addresses.
                log.info("nginx restarts for its new listening addresses (bind-address): a reload could not bind "
                         "them beside the old ones of the same ports", extra=logs.kv(conf=str(self.paths.conf)))
                return False
            if master is None or not processes.send_signal(master, self.paths.prefix, signal.SIGHUP):
                log.info("nginx is not running; it loads the new configuration when it starts",
                         extra=logs.kv(conf=str(self.paths.conf)))
                return False
            await self._wait_for_new_workers(master.pid, before)
            self._bound_draining(master.pid, retired={w.pid for w in workers if w.is_worker})
            return True

    def _rebinds(self, conf_text: str) -> bool:
        """Whether `conf_text` binds other single addresses than the file in place (the ConfigMap's bind-address
        changed): on Linux a socket cannot bind 10.0.0.5:80 while another listens on 0.0.0.0:80, or the reverse,
        so such a change needs a new master rather than a reload."""
        try:
            running = self.paths.conf.read_text()
        except FileNotFoundError:
            return False
        return bound_addresses(running) != bound_addresses(conf_text)

    def _bound_draining(self, master: int, retired: set[int]) -> None:
        """Stop the oldest old workers beyond the generations allowed to drain (draining.py)."""
        draining = {w.pid: w for w in processes.workers_of(master, self.paths.prefix)
                    if w.is_shutting_down and w.title.startswith("nginx: worker process")}
        stopped = [draining[pid] for pid in sorted(self.draining.after_reload(master, retired, set(draining)))]
        stopped = [w for w in stopped if processes.send_signal(w, self.paths.prefix, signal.SIGTERM)]
        if stopped:
            log.warning("too many generations of old nginx workers still draining; stopped the oldest, closing the "
                        "requests they still served", extra=logs.kv(
                            pids=",".join(str(w.pid) for w in stopped), generations=self.draining.limit))

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

"""Leader election with a coordination.k8s.io/v1 Lease, as client-go's leaderelection package does it.

One Lease (name --election-id, in the pod's namespace) names the leader in spec.holderIdentity. The
leader renews spec.renewTime every lease_duration/3; another candidate takes the Lease over only when it
has seen the same record, unchanged, for a whole leaseDurationSeconds by its own clock (so clocks that
disagree between nodes do not matter). Every write carries the resourceVersion it read: of two
candidates racing for an expired Lease, one gets 409 Conflict and stays a follower.

A leader that cannot renew for 2/3 of the lease duration stops leading before anyone else may start.
A leader that stops cleanly releases the Lease (empty holder, 1 s duration, as client-go does on
cancel), so that the next candidate takes over at its next retry rather than a lease duration later.
"""
from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from typing import Any, Awaitable, Callable

from kubernetes import client

from services.common.kube import api_error_text, read_json
from services.common.logs import kv
from services.common.settings import Settings

log = logging.getLogger(__name__)

DEFAULT_LEASE_SECONDS = 30
REQUEST_TIMEOUT_SECONDS = (5.0, 10.0)  # (connect, read)


def _micro_time() -> str:
    """A Kubernetes MicroTime: RFC 3339 with microseconds, UTC."""
    now = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1_000_000):06d}Z"


def default_identity() -> str:
    """POD_NAME in a pod; else hostname_pid, unique per process on one host."""
    return os.environ.get("POD_NAME") or f"{socket.gethostname()}_{os.getpid()}"


class LeaderElector:
    """Campaigns for one Lease. `run(on_started_leading, on_stopped_leading)` until cancelled.

    on_started_leading: a coroutine function, run as a task for as long as this process leads and
    cancelled the moment it stops leading (as client-go cancels the context it hands its callback).
    on_stopped_leading: called after that task is cancelled and finished.
    """

    def __init__(self, api_client: client.ApiClient, *, name: str, namespace: str, identity: str,
                 lease_duration: int = DEFAULT_LEASE_SECONDS, errors: dict[str, str] | None = None) -> None:
        if lease_duration < 1:
            raise ValueError(f"lease_duration must be at least 1 second, got {lease_duration}")
        self.name, self.namespace, self.identity = name, namespace, identity
        self.lease_duration = lease_duration
        self.renew_period = lease_duration / 3
        self.renew_deadline = lease_duration * 2 / 3
        self.retry_period = lease_duration / 15
        self._api = client.CoordinationV1Api(api_client)
        self._leading = False
        # Shared with the syncer's /healthz detail: "lease" → why the last round failed, while it fails.
        self.errors = {} if errors is None else errors
        self._last_renew = 0.0  # monotonic time of the last successful acquire or renew (when it was sent)
        # The last Lease record seen, and when it was first seen (by our clock): expiry is judged by these.
        self._observed_spec: dict[str, Any] | None = None
        self._observed_at = 0.0
        self._written: dict[str, Any] | None = None  # the Lease as this process last wrote it

    @classmethod
    def from_settings(cls, settings: Settings, api_client: client.ApiClient, *,
                      errors: dict[str, str] | None = None) -> "LeaderElector":
        return cls(api_client, name=settings.leader.election_id,
                   namespace=os.environ.get("POD_NAMESPACE") or "default", identity=default_identity(),
                   lease_duration=settings.leader.lease_seconds, errors=errors)

    @property
    def is_leader(self) -> bool:
        return self._leading

    async def run(self, on_started_leading: Callable[[], Awaitable[None]],
                  on_stopped_leading: Callable[[], None] | None = None, *,
                  before_release: Callable[[], Awaitable[object]] | None = None) -> None:
        """Campaign until cancelled; while leading, run on_started_leading. When cancelled while leading,
        before_release runs (still the leader) before the Lease is given up."""
        leading_task: asyncio.Task | None = None
        try:
            while True:
                attempt_started = time.monotonic()
                held = await self._try_acquire_or_renew()
                if held:
                    self._last_renew = attempt_started
                if held and not self._leading:
                    self._leading = True
                    log.info("started leading", extra=kv(lease=f"{self.namespace}/{self.name}", identity=self.identity))
                    leading_task = asyncio.create_task(self._lead(on_started_leading), name="while leading")
                elif self._leading and not held and (
                        self._held_by_other() or time.monotonic() - self._last_renew >= self.renew_deadline):
                    log.warning("stopped leading: the lease could not be renewed",
                                extra=kv(lease=f"{self.namespace}/{self.name}", identity=self.identity))
                    await self._stop_leading(leading_task, on_stopped_leading)
                    leading_task = None
                await asyncio.sleep(self.renew_period if self._leading and held else self.retry_period)
        finally:
            if self._leading:
                await self._stop_leading(leading_task, on_stopped_leading)
                if before_release is not None:
                    try:
                        await before_release()
                    except Exception:  # the Lease is released all the same
                        log.exception("the leader's last task failed")
                await self._release()

    @staticmethod
    async def _lead(on_started_leading: Callable[[], Awaitable[None]]) -> None:
        try:
            await on_started_leading()
        except asyncio.CancelledError:
            raise
        except Exception:
            # Leading continues (the Lease is still ours); what failed is the leader's work.
            log.exception("the leader's task failed")

    async def _stop_leading(self, task: asyncio.Task | None, on_stopped_leading: Callable[[], None] | None) -> None:
        self._leading = False
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        if on_stopped_leading is not None:
            on_stopped_leading()

    def _held_by_other(self) -> bool:
        holder = (self._observed_spec or {}).get("holderIdentity")
        return bool(holder) and holder != self.identity

    def _observe(self, spec: dict[str, Any]) -> None:
        if spec != self._observed_spec:
            self._observed_spec, self._observed_at = spec, time.monotonic()

    def _observed_expired(self) -> bool:
        spec = self._observed_spec or {}
        if not spec.get("holderIdentity"):
            return True  # released
        duration = spec.get("leaseDurationSeconds") or self.lease_duration
        return time.monotonic() >= self._observed_at + duration

    @staticmethod
    async def _call(fn: Callable[..., Any], *args: Any) -> dict[str, Any]:
        return await asyncio.to_thread(read_json, fn, *args, request_timeout=REQUEST_TIMEOUT_SECONDS)

    async def _try_acquire_or_renew(self) -> bool:
        """One round: True when this process holds the Lease afterwards."""
        now = _micro_time()
        try:
            try:
                lease = await self._call(self._api.read_namespaced_lease, self.name, self.namespace)
            except client.ApiException as err:
                if err.status != 404:
                    raise
                spec: dict[str, Any] = {"holderIdentity": self.identity, "leaseDurationSeconds": self.lease_duration,
                        "acquireTime": now, "renewTime": now, "leaseTransitions": 0}
                created = await self._call(self._api.create_namespaced_lease, self.namespace,
                                           {"metadata": {"name": self.name}, "spec": spec})
                self._remember(created)
                return self._succeeded(True)
            spec = lease.get("spec") or {}
            self._observe(spec)
            holder = spec.get("holderIdentity")
            if holder and holder != self.identity and not self._observed_expired():
                return self._succeeded(False)
            new_spec = {**spec, "holderIdentity": self.identity, "leaseDurationSeconds": self.lease_duration,
                        "renewTime": now}
            if holder != self.identity:
                new_spec["acquireTime"] = now
                new_spec["leaseTransitions"] = (spec.get("leaseTransitions") or 0) + 1
            # The resourceVersion read above makes this write fail (409) if anyone wrote in between.
            replaced = await self._call(self._api.replace_namespaced_lease, self.name, self.namespace,
                                        {**lease, "spec": new_spec})
            self._remember(replaced)
            return self._succeeded(True)
        except client.ApiException as err:
            if err.status == 409:
                log.info("lost a race for the lease", extra=kv(lease=f"{self.namespace}/{self.name}"))
                return self._succeeded(False)
            return self._failed(err)
        except Exception as err:  # the API unreachable: try again at the next round
            return self._failed(err)

    def _succeeded(self, holding: bool) -> bool:
        self.errors.pop("lease", None)
        return holding

    def _failed(self, err: BaseException) -> bool:
        self.errors["lease"] = text = api_error_text(err)
        log.warning("lease request failed", extra=kv(lease=f"{self.namespace}/{self.name}", error=text))
        return False

    def _remember(self, lease: dict[str, Any]) -> None:
        self._observe(lease.get("spec") or {})
        self._written = lease

    async def _release(self) -> None:
        """Give the Lease up, if it is still ours as we last wrote it (the resourceVersion guards that)."""
        if self._written is None:
            return
        spec = {**self._written["spec"], "leaseDurationSeconds": 1, "renewTime": _micro_time()}
        spec.pop("holderIdentity", None)
        body = {**self._written, "spec": spec}
        try:
            await self._call(self._api.replace_namespaced_lease, self.name, self.namespace, body)
            log.info("released the lease", extra=kv(lease=f"{self.namespace}/{self.name}"))
        except Exception as err:  # it expires by itself anyway
            log.warning("could not release the lease", extra=kv(lease=f"{self.namespace}/{self.name}",
                                                               error=f"{type(err).__name__}: {err}"))

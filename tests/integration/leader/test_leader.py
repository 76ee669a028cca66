"""Lease-based leader election: exactly one of several candidates leads; a leader that stops, is killed,
or cannot reach the API hands over within the lease duration."""
from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path
from typing import Any

from kubernetes import client

from services.syncer.ingress_status.leader import LeaderElector
from tests.integration.leader.support import until

ELECTION = "test-election"
LEASE = 3  # seconds: short, so that handovers happen quickly in tests
ELECTOR_PROCESS = Path(__file__).with_name("elector_process.py")


class Candidate:
    """An in-process candidate that records when it leads."""

    def __init__(self, api_client: client.ApiClient, identity: str) -> None:
        self.elector = LeaderElector(api_client, name=ELECTION, namespace="default", identity=identity, lease_duration=LEASE)
        self.terms = 0
        self.leading_now = False
        self.task: asyncio.Task | None = None

    async def _lead(self) -> None:
        self.terms += 1
        self.leading_now = True
        try:
            await asyncio.Event().wait()
        finally:
            self.leading_now = False

    def start(self) -> "Candidate":
        self.task = asyncio.create_task(self.elector.run(self._lead))
        return self

    async def stop(self) -> None:
        assert self.task is not None
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)


def lease(api_client: client.ApiClient) -> dict[str, Any]:
    return client.CoordinationV1Api(api_client).read_namespaced_lease(ELECTION, "default").to_dict()["spec"]


async def spawn(api_url: str, identity: str) -> asyncio.subprocess.Process:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[3])}
    return await asyncio.create_subprocess_exec(sys.executable, str(ELECTOR_PROCESS), api_url, identity, str(LEASE),
                                                stdout=asyncio.subprocess.PIPE, env=env)


async def read_line(process: asyncio.subprocess.Process) -> str:
    assert process.stdout is not None
    return (await asyncio.wait_for(process.stdout.readline(), 20)).decode().strip()


def test_exactly_one_of_two_candidates_leads_and_keeps_leading(api_client):
    async def scenario():
        a, b = Candidate(api_client, "a").start(), Candidate(api_client, "b").start()
        try:
            await until(lambda: a.leading_now or b.leading_now, "a leader")
            leader = a if a.leading_now else b
            # Watch two whole lease durations: renewals keep the same single leader all along.
            for _ in range(int(2 * LEASE / 0.05)):
                assert [a.elector.is_leader, b.elector.is_leader].count(True) == 1
                assert leader.elector.is_leader and leader.leading_now
                await asyncio.sleep(0.05)
            assert (a.terms, b.terms) in ((1, 0), (0, 1))
            assert (await asyncio.to_thread(lease, api_client))["holder_identity"] == leader.elector.identity
        finally:
            await a.stop()
            await b.stop()
    asyncio.run(scenario())


def test_a_stopped_leader_releases_the_lease_and_the_other_takes_over(api_client):
    async def scenario():
        a = Candidate(api_client, "a").start()
        await until(lambda: a.elector.is_leader, "a to lead")
        b = Candidate(api_client, "b").start()
        await a.stop()
        assert not a.leading_now  # its work was cancelled
        # Released: b need not wait for the lease to expire.
        await until(lambda: b.elector.is_leader, "b to take over", timeout=LEASE)
        spec = await asyncio.to_thread(lease, api_client)
        assert spec["holder_identity"] == "b" and spec["lease_transitions"] == 1
        await b.stop()
        assert (await asyncio.to_thread(lease, api_client))["holder_identity"] is None
    asyncio.run(scenario())


def test_a_killed_leader_is_replaced_once_its_lease_expires(api, api_client):
    async def scenario():
        process = await spawn(api.url, "doomed")
        try:
            assert await read_line(process) == "leading"
            b = Candidate(api_client, "b").start()
            # While the process lives and renews, b stays a follower.
            for _ in range(int(LEASE / 0.05)):
                assert not b.elector.is_leader
                await asyncio.sleep(0.05)
            process.kill()
            await process.wait()
            await until(lambda: b.elector.is_leader, "b to take over", timeout=2 * LEASE)
            assert (await asyncio.to_thread(lease, api_client))["holder_identity"] == "b"
            await b.stop()
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
    asyncio.run(scenario())


def test_an_interrupted_leader_process_releases_its_lease(api, api_client):
    async def scenario():
        process = await spawn(api.url, "leaving")
        try:
            assert await read_line(process) == "leading"
            process.send_signal(signal.SIGINT)
            assert await read_line(process) == "stopped"
            assert await asyncio.wait_for(process.wait(), 20) == 0
            assert (await asyncio.to_thread(lease, api_client))["holder_identity"] is None
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
    asyncio.run(scenario())


def test_a_leader_that_cannot_renew_stops_leading_before_its_lease_expires(api, api_client):
    async def scenario():
        stopped = asyncio.Event()
        a = LeaderElector(api_client, name=ELECTION, namespace="default", identity="a", lease_duration=LEASE)
        leading = asyncio.Event()

        async def lead() -> None:
            leading.set()
            await asyncio.Event().wait()
        task = asyncio.create_task(a.run(lead, stopped.set))
        try:
            await asyncio.wait_for(leading.wait(), 20)
            api.refuse_connections(LEASE + 1)
            await asyncio.wait_for(stopped.wait(), 2 * LEASE)
            assert not a.is_leader
            # The API back: the lease expired meanwhile, and the candidate leads again.
            await until(lambda: a.is_leader, "a to lead again")
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    asyncio.run(scenario())

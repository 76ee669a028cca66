"""KubeSource against the test API server, publishing through a real ClonePublisher to a real
CloneSubscriber over ZeroMQ ipc sockets: the store a syncer would see."""
from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
import zmq.asyncio
from kubernetes import client

from proto import endpoints
from services.common.clone import ClonePublisher, CloneSubscriber, Snapshot
from services.common.objects import WATCHED_KINDS, object_key
from services.common.settings import Settings
from services.watcher.filters import keep, slim
from services.watcher.kube_source import KubeSource
from tests.kube_api import KubeApiServer


@pytest.fixture
def api() -> Iterator[KubeApiServer]:
    with KubeApiServer(bookmark_interval=0.5) as server:
        yield server


@pytest.fixture
def run_dir() -> Iterator[Path]:
    # ipc:// paths must stay under ~100 characters: pytest's tmp_path can be longer.
    path = Path(tempfile.mkdtemp(prefix="ks-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def settings(api: KubeApiServer, run_dir: Path) -> Settings:
    return Settings.from_flags(kubeconfig=api.write_kubeconfig(run_dir / "kubeconfig"), run_dir=str(run_dir),
                               configmap="default/pyngress", node_name="node-a")


def api_state(api: KubeApiServer, settings: Settings) -> dict[str, Any]:
    """What the store should hold: every object the API has that the filters keep, slimmed."""
    return {object_key(obj): slim(obj) for kind in WATCHED_KINDS for obj in api.objects(kind)
            if keep(obj, settings)}


class Harness:
    """A running KubeSource → ClonePublisher → CloneSubscriber, with the subscriber's copy of the store."""

    def __init__(self, api: KubeApiServer, settings: Settings, **source_options: Any) -> None:
        self.api, self.settings = api, settings
        self.source = KubeSource(settings, **source_options)
        self.mirror: dict[str, Any] = {}
        api_client = client.ApiClient(api.configuration())
        self.core = client.CoreV1Api(api_client)
        self.networking = client.NetworkingV1Api(api_client)
        self.discovery = client.DiscoveryV1Api(api_client)

    async def __aenter__(self) -> "Harness":
        run_dir = self.settings.paths.run_dir
        self._ctx = zmq.asyncio.Context()
        self.publisher = ClonePublisher(self._ctx, updates_endpoint=endpoints.watcher_updates(run_dir),
                                        snapshot_endpoint=endpoints.watcher_snapshot(run_dir))
        self._subscriber = CloneSubscriber(self._ctx, updates_endpoint=endpoints.watcher_updates(run_dir),
                                           snapshot_endpoint=endpoints.watcher_snapshot(run_dir))
        self._tasks = [asyncio.create_task(self.publisher.serve()),
                       asyncio.create_task(self.source.run(self.publisher)),
                       asyncio.create_task(self._follow())]
        return self

    async def __aexit__(self, *exc: object) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._subscriber.close()
        self.publisher.close()
        self._ctx.term()

    async def _follow(self) -> None:
        async for event in self._subscriber.events():
            if isinstance(event, Snapshot):
                self.mirror = dict(event.state)
            elif event.value is None:
                self.mirror.pop(event.key, None)
            else:
                self.mirror[event.key] = event.value

    async def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """A blocking client call, off the event loop."""
        return await asyncio.to_thread(fn, *args, **kwargs)

    async def until(self, condition: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}")
            await asyncio.sleep(0.05)

    async def converged(self) -> None:
        """Wait until the subscriber's store equals what the API holds."""
        expected: dict[str, Any] = {}

        def equal() -> bool:
            nonlocal expected
            expected = api_state(self.api, self.settings)
            return self.mirror == expected
        try:
            await self.until(equal, "the store to equal the API state")
        except AssertionError:
            assert self.mirror == expected  # shows the difference
            raise

    async def watching(self) -> None:
        """Wait until every target has an open watch on the server."""
        await self.until(lambda: self.api.open_watches >= len(self.source.targets), "every watch to be open")


@pytest.fixture
def harness(api: KubeApiServer, settings: Settings) -> Callable[..., Harness]:
    """harness(**KubeSource options), or harness(settings=other settings, ...)."""
    def make(settings: Settings = settings, **options: Any) -> Harness:
        return Harness(api, settings, **options)
    return make

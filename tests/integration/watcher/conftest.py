"""A real `pyngress watcher` subprocess over a manifests directory, and a real clone subscriber following it."""
from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

import pytest
import zmq.asyncio

from proto import endpoints
from services.common.clone import CloneSubscriber, Snapshot
from services.common.component_state import status_dir

REPO = Path(__file__).resolve().parents[3]
WAIT_SECONDS = 20  # a hang guard, not a performance figure


def watcher_command() -> list[str]:
    script = Path(sys.executable).with_name("pyngress")
    return [str(script)] if script.exists() else [sys.executable, "-m", "services.cli"]


class Watcher:
    def __init__(self, root: Path) -> None:
        self.manifests = root / "manifests"
        self.manifests.mkdir()
        self.run_dir = root / "run"
        self.state_dir = root / "state"
        self.log = root / "watcher.log"
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                watcher_command() + ["watcher", "--manifests", str(self.manifests), "--run-dir", str(self.run_dir),
                                     "--state-dir", str(self.state_dir)],
                cwd=REPO, stdout=log, stderr=log)

    def stop(self) -> int:
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(WAIT_SECONDS)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError(f"the watcher did not exit on SIGTERM; log:\n{self.log.read_text()}") from None

    def kill(self) -> None:
        assert self.process is not None
        self.process.kill()
        self.process.wait()

    def write(self, name: str, text: str) -> None:
        (self.manifests / name).write_text(text)

    def status(self) -> dict[str, Any]:
        try:
            return json.loads((status_dir(self.run_dir) / "watcher.json").read_text())
        except (OSError, ValueError):
            return {}

    def wait_for_status(self, predicate: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        deadline = time.monotonic() + WAIT_SECONDS
        while time.monotonic() < deadline:
            status = self.status()
            if status and predicate(status):
                return status
            time.sleep(0.1)
        raise AssertionError(f"status never matched; last: {self.status()}\nlog:\n{self.log.read_text()}")


class StoreFollower:
    """Follows the watcher's store with CloneSubscriber in a thread of its own."""

    def __init__(self, run_dir: Path) -> None:
        self.state: dict[str, Any] = {}
        self.snapshots = 0
        self._changed = threading.Condition()
        self._run_dir = run_dir
        self._loop = asyncio.new_event_loop()
        self._task: asyncio.Task | None = None
        self._thread = threading.Thread(target=self._loop.run_until_complete, args=(self._follow(),), daemon=True)
        self._thread.start()

    async def _follow(self) -> None:
        self._task = asyncio.current_task()
        ctx = zmq.asyncio.Context()
        subscriber = CloneSubscriber(ctx, updates_endpoint=endpoints.watcher_updates(self._run_dir),
                                     snapshot_endpoint=endpoints.watcher_snapshot(self._run_dir))
        try:
            async for event in subscriber.events():
                with self._changed:
                    if isinstance(event, Snapshot):
                        self.state = dict(event.state)
                        self.snapshots += 1
                    elif event.value is None:
                        self.state.pop(event.key, None)
                    else:
                        self.state[event.key] = event.value
                    self._changed.notify_all()
        except asyncio.CancelledError:
            pass
        finally:
            subscriber.close()
            ctx.term()

    def wait_for(self, predicate: Callable[[dict[str, Any]], bool], what: str) -> dict[str, Any]:
        with self._changed:
            if not self._changed.wait_for(lambda: predicate(self.state), WAIT_SECONDS):
                raise AssertionError(f"the store never showed {what}; it holds {sorted(self.state)}")
            return dict(self.state)

    def close(self) -> None:
        while self._task is None and self._thread.is_alive():
            time.sleep(0.01)
        if self._task is not None:
            self._loop.call_soon_threadsafe(self._task.cancel)
        self._thread.join(WAIT_SECONDS)
        self._loop.close()


@pytest.fixture
def watcher(tmp_path):
    w = Watcher(tmp_path)
    yield w
    if w.process is not None and w.process.poll() is None:
        w.process.kill()
        w.process.wait()


@pytest.fixture
def follow():
    followers: list[StoreFollower] = []

    def start(run_dir: Path) -> StoreFollower:
        followers.append(StoreFollower(run_dir))
        return followers[-1]

    yield start
    for follower in followers:
        follower.close()


"""A whole table whose POST got no answer is not sent again while nginx is still taking it, and once nginx holds it
the next change goes as a delta from it: at 100,000 hosts a push of 31 MB whose answer timed out was retried whole,
timing out again, while every change waited behind it."""
from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from services.nginxconf.config_api import NginxUnavailableError
from services.nginxconf.tables import TablePusher
from services.syncer.model.types import HostRoutes

from .conftest import eventually, route

HOSTS = 100_000  # a table nginx takes in about a second


def taking_worker(nginx: Any) -> int:
    """The nginx worker taking a table in: the one running, while the other waits for events."""
    def running() -> int | None:
        busy = [pid for pid in nginx.worker_pids() if Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] == "R"]
        return busy[0] if len(busy) == 1 else None
    return eventually(running, timeout=5)


def test_a_whole_table_taken_after_its_post_was_abandoned_is_not_sent_again(nginx_factory, echo, monkeypatch):
    nginx = nginx_factory()
    app, other = echo("app"), echo("other")
    backends = {"app": [app.endpoint], "other": [other.endpoint]}
    nginx.push({}, backends)
    pusher = TablePusher(nginx.paths)  # knows nothing nginx holds: the routes go whole
    posts: list[str] = []
    real_post = TablePusher._post

    async def recorded_post(self: TablePusher, session: Any, name: str, path: str, **kwargs: Any) -> None:
        posts.append(path)
        await real_post(self, session, name, path, **kwargs)

    monkeypatch.setattr(TablePusher, "_post", recorded_post)
    routes = {f"h{i}.timeout.test": HostRoutes(prefix={"/": route("app")}) for i in range(HOSTS)}

    def push() -> list[str]:
        return nginx.run(pusher.push(routes={host: r.to_json() for host, r in routes.items()}, backends=backends,
                                     certificates={}))

    async def push_given_up_once_nginx_takes_it() -> int:
        """What a timeout does once the whole body is sent: the pusher stops waiting for the answer. nginx's worker
        taking the table in is stopped there, so that it cannot finish before the checks below; its pid."""
        task = asyncio.ensure_future(pusher.push(routes={host: r.to_json() for host, r in routes.items()},
                                                 backends=backends, certificates={}))
        while "routes" not in (await pusher.versions())["taking"]:
            assert not task.done(), "nginx took the table before the test could see it taking it"
            await asyncio.sleep(0.002)
        taker = taking_worker(nginx)
        os.kill(taker, signal.SIGSTOP)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return taker

    taker = nginx.run(push_given_up_once_nginx_takes_it())
    try:
        assert posts == ["/configuration/routes"]
        # nginx is still taking it: the next push waits for it rather than sending it again, and the syncer's check
        # for a restarted nginx leaves it be.
        assert not nginx.run(pusher.needs_push())
        with pytest.raises(NginxUnavailableError, match="still taking the routes table"):
            push()
    finally:
        os.kill(taker, signal.SIGCONT)
    assert posts == ["/configuration/routes"]

    eventually(lambda: not nginx.run(pusher.versions())["taking"], timeout=120)
    assert nginx.run(pusher.needs_push())  # the version nginx took is not yet the pusher's
    assert nginx.get("/", host="h7.timeout.test").backend == "app"
    routes["h7.timeout.test"] = HostRoutes(prefix={"/": route("other")})
    assert push() == ["routes"]
    assert posts == ["/configuration/routes", "/configuration/routes/delta"]
    assert nginx.get("/", host="h7.timeout.test").backend == "other"

"""One change costs the passthrough table's publication, and the htpasswd and proxy-ssl files, what it touched:
counted (keys the publisher compared; files compared, written, removed; directory listings), not timed, at two
sizes, what the proxy processes follow and what the directories hold equal to the model after each change. Before,
every sync packed and compared every passthrough host, and every apply compared every file and listed both
directories (issue 37)."""
from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import subprocess
from pathlib import Path
from typing import Any, AsyncIterator, Callable

import pytest

from services.common.clone import ClonePublisher, CloneSubscriber, Snapshot
from services.syncer.main import passthrough_table, publish_passthrough
from services.syncer.model.build import build_model
from services.syncer.model.incremental import IncrementalModel, SideChanges
from services.syncer.model.types import Model
from services.syncer.nginx_apply.worker_files import FileWork, RootOnlyFiles, WorkerFiles
from tests.support.clone import published
from tests.support.htpasswd import basic_auth_secret

PASSTHROUGH = {"ssl-passthrough": "true"}


def changed_keys(cluster, change: Callable[[], Any]) -> set[str]:
    """Make `change` to the store; the keys it changed."""
    objects = dict(cluster.store)
    change()
    return {key for key in objects.keys() | cluster.store.keys() if objects.get(key) is not cluster.store.get(key)}


class ProxyView:
    """What a proxy process holds: the passthrough table as its subscriber follows it."""

    def __init__(self, subscriber: CloneSubscriber) -> None:
        self.table: dict[str, Any] = {}
        self._task = asyncio.create_task(self._follow(subscriber))

    async def _follow(self, subscriber: CloneSubscriber) -> None:
        async for event in subscriber.batches():
            if isinstance(event, Snapshot):
                self.table = dict(event.state)
            else:
                for key, value in event.items:
                    if value is None:
                        self.table.pop(key, None)
                    else:
                        self.table[key] = value

    async def holds(self, table: dict[str, Any]) -> bool:
        """Whether it comes to hold `table` (msgpack gives lists for tuples) within 10 s."""
        for _ in range(1000):
            if self.table == table:
                return True
            await asyncio.sleep(0.01)
        return False

    def close(self) -> None:
        self._task.cancel()


@contextlib.asynccontextmanager
async def proxy_following(run_dir: Path) -> AsyncIterator[tuple[ClonePublisher, ProxyView]]:
    async with published(run_dir) as (publisher, subscribe):
        view = ProxyView(subscribe())
        try:
            yield publisher, view
        finally:
            view.close()


@pytest.mark.parametrize("n", [100, 1000])
def test_a_change_publishes_the_passthrough_hosts_it_touched(cluster, tmp_path, n):
    cluster.settings = cluster.settings.replace_flags(enable_ssl_passthrough=True)
    for i in range(n):
        cluster.app(f"pt{i}", host=f"pt{i}.example", annotations=PASSTHROUGH, addresses=(f"10.0.{i // 250}.{i % 250}",))
    cluster.app("web", host="web.example")
    incremental = IncrementalModel(cluster.settings)

    async def scenario() -> None:
        async with proxy_following(tmp_path) as (publisher, view):
            async def sync(keys: set[str] | None) -> int:
                """The keys compared to publish the model after the store's `keys` changed."""
                before = publisher.keys_compared
                model = incremental.update(cluster.store, keys)
                assert model == build_model(cluster.store, settings=cluster.settings)
                await publish_passthrough(publisher, model, incremental.take_side_changes().passthrough)
                assert await view.holds(passthrough_table(model))
                return publisher.keys_compared - before

            assert await sync(None) == n + 1  # the first: every host and the config
            # A passthrough backend's endpoints moved: its host, and the config (always compared).
            assert await sync(changed_keys(cluster, lambda: cluster.endpoint_slice("pt7", addresses=("10.9.0.7",)))) == 2
            # A new passthrough Ingress, one deleted.
            assert await sync(changed_keys(cluster, lambda: cluster.app("new", host="new.example",
                                                                        annotations=PASSTHROUGH))) == 2
            assert await sync(changed_keys(cluster, lambda: cluster.store.pop("Ingress/default/pt3"))) == 2
            # An HTTP Ingress changed (its host might have been passed through by a TLSRoute's wildcard): 2.
            assert await sync(changed_keys(cluster, lambda: cluster.app("web", host="web.example",
                                                                        annotations={"proxy-body-size": "1m"}))) == 2
            # A Secret no Ingress reads: the config alone.
            assert await sync(changed_keys(cluster, lambda: cluster.tls_secret("unused"))) == 1

    asyncio.run(scenario())


def files_of(directory: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in directory.iterdir()} if directory.is_dir() else {}


def ca_secret(cluster, name: str, ca: bytes, version: int) -> None:
    """A proxy-ssl-secret with a CA of its own content (the same certificate, its own trailing lines)."""
    cluster.add({"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": {"name": name, "namespace": "default"},
                 "data": {"ca.crt": base64.b64encode(ca + b"\n" * version).decode()}})


class Applied:
    """The files of the applied models, written and removed as NginxApplier.apply does: the new ones before a
    reload, the unused ones after it (not while a reload waits, as nginx still runs the configuration naming them)."""

    def __init__(self, base: Path) -> None:
        base.mkdir()
        self.auth = WorkerFiles(base / "auth")
        self.ssl = RootOnlyFiles(base / "ssl")

    def apply(self, model: Model, side: SideChanges, *, reload_waits: bool = False) -> None:
        self.auth.write(model.auth_files, side.auth_files)
        self.ssl.write(model.ssl_files, side.ssl_files)
        if not reload_waits:
            self.auth.remove_others(model.auth_files)
            self.ssl.remove_unused(model.ssl_files)

    def work(self) -> tuple[FileWork, FileWork]:
        work = self.auth.work, self.ssl.work
        self.auth.work, self.ssl.work = FileWork(), FileWork()
        return work


@pytest.mark.skipif(os.geteuid() != 0, reason="the htpasswd files are given the workers' group: needs root")
@pytest.mark.parametrize("n", [100, 1000])
def test_a_change_compares_writes_and_removes_the_files_it_touched(cluster, tmp_path, n):
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", "ca.key", "-out", "ca.crt", "-days", "2", "-subj", "/CN=ca"],
                   cwd=tmp_path, check=True, capture_output=True)
    ca = (tmp_path / "ca.crt").read_bytes()
    for i in range(n):
        if i % 2:
            cluster.add(basic_auth_secret(f"auth{i}", {f"user{i}": "pw"}, scheme="sha"))
            cluster.app(f"app{i}", host=f"app{i}.example", annotations={"auth-type": "basic", "auth-secret": f"auth{i}"})
        else:
            ca_secret(cluster, f"ca{i}", ca, i)
            cluster.app(f"app{i}", host=f"app{i}.example",
                        annotations={"backend-protocol": "HTTPS", "proxy-ssl-secret": f"ca{i}"})
    incremental = IncrementalModel(cluster.settings)
    applied = Applied(tmp_path / "state")

    def apply(change: Callable[[], Any] | None, **options: bool) -> tuple[FileWork, FileWork]:
        model = incremental.update(cluster.store, None if change is None else changed_keys(cluster, change))
        assert model == build_model(cluster.store, settings=cluster.settings)
        applied.apply(model, incremental.take_side_changes(), **options)
        if not options.get("reload_waits"):
            assert files_of(tmp_path / "state" / "auth") == model.auth_files
            assert files_of(tmp_path / "state" / "ssl") == model.ssl_files
        return applied.work()

    auth, ssl = apply(None)  # the first: every file written, both directories listed
    assert (auth.written, ssl.written, auth.listings, ssl.listings) == (n // 2, n // 2, 1, 1)

    # An Ingress without files.
    auth, ssl = apply(lambda: cluster.app("plain", host="plain.example"))
    assert (auth, ssl) == (FileWork(), FileWork())
    # A user added to one Secret: its file compared (written, then looked at for removal), nothing else. (The model
    # names the files of both directories together: each looks the names up.)
    auth, ssl = apply(lambda: cluster.add(basic_auth_secret("auth1", {"user1": "pw", "more": "pw"}, scheme="sha")))
    assert (auth, ssl) == (FileWork(compared=2, written=1), FileWork(compared=2))
    # A CA renewed: a new file (named by its content) written, the old one removed.
    auth, ssl = apply(lambda: ca_secret(cluster, "ca0", ca, 7777))
    assert (auth, ssl) == (FileWork(compared=4), FileWork(compared=4, written=1, removed=1))
    # An Ingress with basic auth deleted, while a reload waits: its file stays for the configuration nginx runs...
    running = files_of(tmp_path / "state" / "auth")
    auth, ssl = apply(lambda: cluster.store.pop("Ingress/default/app3"), reload_waits=True)
    assert (auth, ssl) == (FileWork(compared=1), FileWork(compared=1))
    assert files_of(tmp_path / "state" / "auth") == running
    # ... and goes at the next apply that reloads, though nothing changed since.
    auth, ssl = apply(lambda: None)
    assert (auth, ssl) == (FileWork(compared=1, removed=1), FileWork(compared=1))
    # Nothing changed: nothing looked at.
    auth, ssl = apply(lambda: None)
    assert (auth, ssl) == (FileWork(), FileWork())

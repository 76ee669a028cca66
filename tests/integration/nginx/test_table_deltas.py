"""Keyed tables (routes by host, backends by name) change by deltas: only the entries that changed go to nginx,
every worker catches up (by the logged keys, or the whole table when far behind), a delta to a version nginx no
longer holds is refused and the whole table goes instead, and the state files follow for a fresh master."""
from __future__ import annotations

import asyncio
import json

from services.nginxconf.tables import TablePusher
from services.syncer.model.types import HostRoutes
from services.nginxconf.table_schema import SCHEMA_VERSION

from .conftest import eventually, route


def routes_for(count: int, backend: str = "app") -> dict[str, HostRoutes]:
    return {f"h{i}.delta.test": HostRoutes(prefix={"/": route(backend)}) for i in range(count)}


def served_by(nginx, host: str, times: int = 6) -> set[str | None]:
    """The backends that answered `host` over several new connections (so both workers answer)."""
    return {nginx.get("/", host=host).backend for _ in range(times)}


def test_a_change_moves_only_its_entries_and_every_worker_catches_up(nginx_factory, echo):
    nginx = nginx_factory()
    app, other = echo("app"), echo("other")
    backends = {"app": [app.endpoint], "other": [other.endpoint]}
    routes = routes_for(50)
    assert nginx.push(routes, backends) == ["backends", "certificates", "routes"]
    assert served_by(nginx, "h7.delta.test") == {"app"}
    whole_version = nginx.run(nginx.pusher.versions())["routes"]
    # Each change is a delta (its version chains on the one before, not the whole table's hash); between
    # some of them the workers serve, so they replay the logged keys, and at the end they are far behind.
    for i in range(300):
        routes[f"h{i % 50}.delta.test"] = HostRoutes(prefix={"/": route("other" if i % 2 == 0 else "app")})
        routes[f"new{i}.delta.test"] = HostRoutes(prefix={"/": route("other")})
        assert nginx.push(routes, backends) == ["routes"]
        if i < 40 and i % 10 == 0:
            assert served_by(nginx, f"new{i}.delta.test") == {"other"}
    held = nginx.run(nginx.pusher.versions())["routes"]
    assert held != whole_version
    for host, want in (("h0.delta.test", "other"), ("h49.delta.test", "app"), ("new299.delta.test", "other"),
                       ("new0.delta.test", "other")):
        assert served_by(nginx, host) == {want}, host
    del routes["new299.delta.test"]
    nginx.push(routes, backends)
    assert served_by(nginx, "new299.delta.test") == {None}  # the built-in 404


def test_a_delta_to_another_version_is_refused_and_the_whole_table_goes(nginx_factory, echo):
    nginx = nginx_factory()
    app = echo("app")
    nginx.push(routes_for(3), {"app": [app.endpoint]})
    stale = nginx.api("POST", "/configuration/routes/delta",
                      json.dumps({"base": "not-held", "version": "v2", "schema": SCHEMA_VERSION, "set": {},
                                  "delete": ["h0.delta.test"]}).encode())
    assert stale.status == 409 and "send the whole table" in json.loads(stale.body)["error"]
    assert served_by(nginx, "h0.delta.test") == {"app"}
    bad = nginx.api("POST", "/configuration/routes/delta", json.dumps(
        {"base": nginx.run(nginx.pusher.versions())["routes"], "version": "v2", "schema": SCHEMA_VERSION,
         "set": {"h1.delta.test": {"prefix": [["no-slash", {"backend": "app"}]]}}, "delete": ["h0.delta.test"]}).encode())
    # The entry nginx refuses keeps its last good routes; the rest of the delta applies.
    assert bad.status == 201
    assert "a path must be a string starting with /" in json.loads(bad.body)["refused"]["h1.delta.test"]
    assert served_by(nginx, "h1.delta.test") == {"app"} and served_by(nginx, "h0.delta.test") == {None}
    # A second syncer (a restart) holds nothing nginx knows: its first push is the whole table.
    restarted = TablePusher(nginx.paths)
    routes = routes_for(4)
    assert "routes" in nginx.run(restarted.push(routes={h: r.to_json() for h, r in routes.items()},
                                                 backends={"app": [app.endpoint]}, certificates={}))
    assert served_by(nginx, "h3.delta.test") == {"app"}
    # ...and the first pusher, whose base nginx no longer holds, sends the whole table too.
    assert nginx.push(routes_for(2), {"app": [app.endpoint]}) == ["routes"]
    assert served_by(nginx, "h3.delta.test") == {None} and served_by(nginx, "h1.delta.test") == {"app"}


def test_a_master_killed_right_after_a_delta_starts_again_with_it(nginx_factory, echo):
    nginx = nginx_factory()
    app = echo("app")
    routes = routes_for(5)
    nginx.push(routes, {"app": [app.endpoint]})
    whole = nginx.paths.table_file("routes").read_bytes()
    routes["late.delta.test"] = HostRoutes(prefix={"/": route("app")})
    assert nginx.push(routes, {"app": [app.endpoint]}) == ["routes"]
    # The delta is journaled before the push returns (the whole file stays as it was): a master started from the
    # state files serves the new host.
    assert nginx.paths.table_file("routes").read_bytes() == whole
    journal = nginx.paths.table_journal("routes").read_bytes().splitlines()
    assert len(journal) == 1 and json.loads(journal[0])["version"] == nginx.run(nginx.pusher.versions())["routes"]

    nginx.kill_master()
    nginx.start()
    eventually(lambda: served_by(nginx, "late.delta.test") == {"app"})
    assert nginx.run(nginx.pusher.needs_push()) is False  # it holds the version the syncer pushed last
    assert served_by(nginx, "h4.delta.test") == {"app"}


def test_a_journal_cut_short_is_replayed_up_to_its_last_whole_delta(nginx_factory, echo):
    nginx = nginx_factory()
    app = echo("app")
    routes = routes_for(20)  # a journal longer than the whole file is folded into it
    nginx.push(routes, {"app": [app.endpoint]})
    routes["first.delta.test"] = HostRoutes(prefix={"/": route("app")})
    nginx.push(routes, {"app": [app.endpoint]})
    routes["second.delta.test"] = HostRoutes(prefix={"/": route("app")})
    nginx.push(routes, {"app": [app.endpoint]})
    # A write cut short: the second delta's line loses its end.
    path = nginx.paths.table_journal("routes")
    first, second = path.read_bytes().splitlines()
    path.write_bytes(first + b"\n" + second[: len(second) // 2])

    nginx.kill_master()
    nginx.start()
    assert served_by(nginx, "first.delta.test") == {"app"} and served_by(nginx, "second.delta.test") == {None}
    assert "stopped " + str(path) + " after 1 deltas" in nginx.log()
    # nginx holds the first delta's version, not the last pushed: the syncer's repush brings it back.
    assert nginx.run(nginx.pusher.needs_push()) is True
    nginx.run(nginx.pusher.push(routes={h: r.to_json() for h, r in routes.items()}, backends={"app": [app.endpoint]},
                                certificates={}))
    assert served_by(nginx, "second.delta.test") == {"app"}


def test_the_journal_is_folded_into_the_whole_file(nginx_factory, echo, monkeypatch):
    monkeypatch.setattr("services.nginxconf.table_state_files.JOURNAL_MAX_DELTAS", 3)
    nginx = nginx_factory()
    app = echo("app")
    routes = routes_for(20)
    nginx.push(routes, {"app": [app.endpoint]})
    journal = nginx.paths.table_journal("routes")
    for i in range(3):
        routes[f"new{i}.delta.test"] = HostRoutes(prefix={"/": route("app")})
        nginx.push(routes, {"app": [app.endpoint]})
        assert len(journal.read_bytes().splitlines()) == i + 1
    routes["new3.delta.test"] = HostRoutes(prefix={"/": route("app")})
    nginx.push(routes, {"app": [app.endpoint]})
    held = nginx.run(nginx.pusher.versions())["routes"]
    state = json.loads(nginx.paths.table_file("routes").read_bytes())
    assert not journal.exists() and state["version"] == held and "new3.delta.test" in state["data"]
    # A whole table (a second pusher, as after a syncer restart) also starts without a journal.
    routes["new4.delta.test"] = HostRoutes(prefix={"/": route("app")})
    nginx.push(routes, {"app": [app.endpoint]})
    assert journal.exists()
    restarted = TablePusher(nginx.paths)
    nginx.run(restarted.push(routes={h: r.to_json() for h, r in routes_for(1).items()},
                             backends={"app": [app.endpoint]}, certificates={}))
    assert not journal.exists()
    nginx.kill_master()
    nginx.start()
    assert served_by(nginx, "h0.delta.test") == {"app"} and served_by(nginx, "new4.delta.test") == {None}
    assert nginx.run(restarted.needs_push()) is False


def test_hosts_asked_for_before_a_delta_adds_them_are_served_once_it_does(nginx_factory, echo):
    # Each worker decodes an entry when a request first asks for it, and remembers a host it did not find: a delta
    # that adds that host (or a wildcard covering it), or changes a backend a worker already used, must reach
    # every worker.
    nginx = nginx_factory()
    app, other = echo("app"), echo("other")
    routes = routes_for(3)
    nginx.push(routes, {"app": [app.endpoint]})
    for host in ("later.delta.test", "a.wild.delta.test", "h1.delta.test"):
        served_by(nginx, host)
    assert served_by(nginx, "later.delta.test") == {None} and served_by(nginx, "a.wild.delta.test") == {None}

    routes["later.delta.test"] = HostRoutes(prefix={"/": route("app")})
    routes["*.wild.delta.test"] = HostRoutes(prefix={"/": route("app")})
    assert nginx.push(routes, {"app": [app.endpoint]}) == ["routes"]
    assert served_by(nginx, "later.delta.test") == {"app"}
    assert served_by(nginx, "a.wild.delta.test") == {"app"}

    assert nginx.push(routes, {"app": [other.endpoint]}) == ["backends"]
    assert served_by(nginx, "h1.delta.test") == {"other"} and served_by(nginx, "later.delta.test") == {"other"}
    del routes["later.delta.test"]
    nginx.push(routes, {"app": [other.endpoint]})
    assert served_by(nginx, "later.delta.test") == {None}


def test_only_the_keys_marked_changed_are_compared(nginx_factory, echo):
    # The syncer tells the pusher which hosts changed since its last push; an entry nginx refuses does not stop the
    # others, and is sent again once it changes.
    nginx = nginx_factory()
    app, other = echo("app"), echo("other")
    backends = {"app": [app.endpoint], "other": [other.endpoint]}
    routes = {host: r.to_json() for host, r in routes_for(3).items()}
    nginx.run(nginx.pusher.push(routes=routes, backends=backends, certificates={}))
    moved = {**routes, "h1.delta.test": HostRoutes(prefix={"/": route("other")}).to_json(),
             "bad.delta.test": {"prefix": [["no-slash", {"backend": "app"}]]}}
    nginx.run(nginx.pusher.push(routes=moved, backends=backends, certificates={},
                                changed={"routes": frozenset({"h1.delta.test", "bad.delta.test"}),
                                         "backends": frozenset()}))
    assert served_by(nginx, "h1.delta.test") == {"other"}
    assert "a path must be a string starting with /" in nginx.pusher.refused["routes"]["bad.delta.test"]
    moved = {host: routes for host, routes in moved.items() if host != "bad.delta.test"}  # the pusher keeps the last
    nginx.run(nginx.pusher.push(routes=moved, backends=backends, certificates={},
                                changed={"routes": frozenset({"bad.delta.test"}), "backends": frozenset()}))
    assert nginx.pusher.refused["routes"] == {}
    # Marked unchanged, a host is not looked at: the marks are what the model guarantees.
    nginx.run(nginx.pusher.push(routes={**moved, "h2.delta.test": HostRoutes(prefix={"/": route("other")}).to_json()},
                                backends=backends, certificates={},
                                changed={"routes": frozenset(), "backends": frozenset()}))
    assert served_by(nginx, "h2.delta.test") == {"app"}


def test_a_check_for_lost_tables_during_a_push_waits_for_it(nginx_factory, echo):
    """The syncer asks every half second whether nginx still holds what was pushed (it forgets on a restart);
    asked while the first push is under way, the answer must be the push's, not "nothing pushed yet": that pushed
    every table a second time."""
    nginx = nginx_factory()
    app = echo("app")
    routes = {h: r.to_json() for h, r in routes_for(2000).items()}

    async def check_during_push() -> bool:
        push = asyncio.create_task(nginx.pusher.push(routes=routes, backends={"app": [app.endpoint]}, certificates={}))
        await asyncio.sleep(0)  # the push has begun
        needed = await nginx.pusher.needs_push()
        await push
        return needed
    assert nginx.run(check_during_push()) is False
    assert served_by(nginx, "h1999.delta.test") == {"app"}

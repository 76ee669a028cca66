"""The routes table the applier pushes: each host's canonical JSON, rebuilt only when its routes change."""
from __future__ import annotations

import orjson

from services.common.canonical import canonical_json
from services.common.settings import Settings
from services.nginxconf.config import DEFAULT_PROFILE, NginxConfig
from services.syncer.model.types import HostRoutes, Model, Route, TableChanges
from services.syncer.nginx_apply.applier import NginxApplier
from services.syncer.observability.metrics import SyncerMetrics


def model(tmp_path, routes: dict[str, HostRoutes], changed: TableChanges = TableChanges()) -> Model:
    return Model(config=NginxConfig(http_port=18080, https_port=18443, state_dir=str(tmp_path), run_dir=str(tmp_path)),
                 routes=routes, changed=changed)


def routes_table(applier: NginxApplier, model: Model) -> dict:
    """The routes table the applier pushes for `model` (as apply() does, after noting the model's changes)."""
    applier._unseen = applier._unseen.then(model.changed)
    tables, _, _ = applier._tables(model)
    return dict(tables["routes"])  # as it is now: the applier changes its table in place


def test_equal_routes_keep_their_entry_and_changed_ones_get_a_new_one(tmp_path):
    settings = Settings.from_flags(state_dir=str(tmp_path / "state"), run_dir=str(tmp_path / "run"))
    applier = NginxApplier(settings, SyncerMetrics(settings))
    applier.applied_profiles = {DEFAULT_PROFILE}
    web = HostRoutes(prefix={"/": Route("team-web-80", ingress="team/web", service="web")})
    api = HostRoutes(prefix={"/api": Route("team-api-80", ingress="team/api", service="api")})
    first = routes_table(applier, model(tmp_path, {"web.example": web, "api.example": api}))

    # The incremental model merged the web host's group again: new objects, the same routes.
    web_again = HostRoutes(prefix={"/": Route("team-web-80", ingress="team/web", service="web")})
    api_moved = HostRoutes(prefix={"/api": Route("team-api-81", ingress="team/api", service="api")})
    both = TableChanges(frozenset({"web.example", "api.example"}), frozenset())
    second = routes_table(applier, model(tmp_path, {"web.example": web_again, "api.example": api_moved}, both))

    assert second["web.example"] is first["web.example"]  # the pusher sends no delta for it
    assert second["api.example"] is not first["api.example"]
    expected = {"web.example": web_again.to_json(), "api.example": api_moved.to_json()}
    assert orjson.loads(canonical_json(second)) == expected
    assert canonical_json(second) == canonical_json(expected)  # still canonical with the entries embedded
    third = routes_table(applier, model(tmp_path, {"api.example": api_moved}, TableChanges(frozenset({"web.example"}),
                                                                                          frozenset())))
    assert list(third) == ["api.example"]


def test_only_the_hosts_a_model_marks_changed_are_looked_at(tmp_path):
    settings = Settings.from_flags(state_dir=str(tmp_path / "state"), run_dir=str(tmp_path / "run"))
    applier = NginxApplier(settings, SyncerMetrics(settings))
    applier.applied_profiles = {DEFAULT_PROFILE}
    routes = {f"h{i}.example": HostRoutes(prefix={"/": Route(f"b{i}")}) for i in range(3)}
    first = routes_table(applier, model(tmp_path, routes))
    moved = {**routes, "h1.example": HostRoutes(prefix={"/": Route("elsewhere")})}
    # A model that says nothing changed is taken at its word (what it changed is what the incremental model says).
    assert routes_table(applier, model(tmp_path, moved, TableChanges(frozenset(), frozenset()))) == first
    # Changes of models applied before the applier looked (a refused apply) add up until it does.
    applier._unseen = applier._unseen.then(TableChanges(frozenset({"h1.example"}), frozenset()))
    second = routes_table(applier, model(tmp_path, moved, TableChanges(frozenset(), frozenset())))
    assert orjson.loads(canonical_json(second))["h1.example"]["prefix"][0][1]["backend"] == "elsewhere"
    # A model built afresh (changed None) is compared whole.
    gone = {host: r for host, r in moved.items() if host != "h0.example"}
    assert list(routes_table(applier, model(tmp_path, gone))) == ["h1.example", "h2.example"]


def test_a_profile_loaded_by_a_reload_remakes_only_the_hosts_that_use_it(tmp_path, monkeypatch):
    settings = Settings.from_flags(state_dir=str(tmp_path / "state"), run_dir=str(tmp_path / "run"))
    applier = NginxApplier(settings, SyncerMetrics(settings))
    applier.applied_profiles = {DEFAULT_PROFILE}
    routes = {f"h{i}.example": HostRoutes(prefix={"/": Route(f"b{i}")}) for i in range(50)}
    routes["late.example"] = HostRoutes(prefix={"/": Route("b0", profile="slow-reads")})
    first = routes_table(applier, model(tmp_path, routes))
    # Its profile is not loaded yet: no route is served with other settings.
    assert orjson.loads(canonical_json(first["late.example"]))["prefix"] == []

    made = []
    real_to_json = HostRoutes.to_json
    monkeypatch.setattr(HostRoutes, "to_json", lambda self: made.append(self) or real_to_json(self))
    applier.applied_profiles = {DEFAULT_PROFILE, "slow-reads"}  # the reload that loads it is done
    second = routes_table(applier, model(tmp_path, routes, TableChanges(frozenset(), frozenset())))
    assert made == [routes["late.example"]]  # one host made again, not 51
    assert orjson.loads(canonical_json(second["late.example"]))["prefix"][0][1]["profile"] == "slow-reads"
    assert all(second[host] is first[host] for host in routes if host != "late.example")

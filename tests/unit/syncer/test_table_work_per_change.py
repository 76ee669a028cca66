"""One change's work on the pushed tables is that change's: the routes table is not copied per change, and a
certificate changed among thousands moves that certificate alone."""
from __future__ import annotations

from services.common.settings import Settings
from services.nginxconf.config import DEFAULT_PROFILE, NginxConfig
from services.nginxconf.tables import certificates_delta
from services.syncer.model.types import HostRoutes, Model, Route, TableChanges
from services.syncer.nginx_apply.applier import NginxApplier
from services.syncer.observability.metrics import SyncerMetrics

HOSTS = 1000


def model(tmp_path, routes: dict[str, HostRoutes], changed: TableChanges) -> Model:
    return Model(config=NginxConfig(http_port=18080, https_port=18443, state_dir=str(tmp_path), run_dir=str(tmp_path)),
                 routes=routes, changed=changed)


def tables_of(applier: NginxApplier, model: Model):
    applier._unseen = applier._unseen.then(model.changed)
    return applier._tables(model)


def test_the_routes_table_is_changed_in_place_not_copied(tmp_path):
    settings = Settings.from_flags(state_dir=str(tmp_path / "state"), run_dir=str(tmp_path / "run"))
    applier = NginxApplier(settings, SyncerMetrics(settings))
    applier.applied_profiles = {DEFAULT_PROFILE}
    routes = {f"h{i}.example": HostRoutes(prefix={"/": Route(f"b{i}")}) for i in range(HOSTS)}
    first, _, moved = tables_of(applier, model(tmp_path, routes, TableChanges()))
    assert moved and len(first["routes"]) == HOSTS

    unchanged, _, moved = tables_of(applier, model(tmp_path, routes, TableChanges(frozenset(), frozenset())))
    assert unchanged["routes"] is first["routes"] and not moved

    one = {**routes, "h7.example": HostRoutes(prefix={"/": Route("elsewhere")})}
    entry_before = first["routes"]["h8.example"]
    second, changed, moved = tables_of(applier, model(tmp_path, one, TableChanges(frozenset({"h7.example"}),
                                                                                  frozenset())))
    assert moved and second["routes"] is first["routes"] and changed["routes"] == {"h7.example"}
    assert second["routes"]["h8.example"] is entry_before


def test_one_certificate_of_thousands_is_the_whole_delta():
    pairs = {f"ns/c{i}": {"cert": f"cert {i}", "key": f"key {i}"} for i in range(HOSTS)}
    hosts = {f"h{i}.example": f"ns/c{i}" for i in range(HOSTS)}
    last = {"certs": pairs, "hosts": hosts, "default": None}
    # The model makes the table anew at each change, its unchanged entries the same objects.
    rotated = {"cert": "cert 7 renewed", "key": "key 7"}
    new = {"certs": {**pairs, "ns/c7": rotated, "ns/added": rotated}, "hosts": {**hosts, "added.example": "ns/added"},
           "default": None}
    del new["certs"]["ns/c3"], new["hosts"]["h3.example"]
    assert certificates_delta(last, new) == {
        "set": {"certs/ns/c7": rotated, "certs/ns/added": rotated, "hosts/added.example": "ns/added"},
        "delete": ["certs/ns/c3", "hosts/h3.example"]}
    assert certificates_delta(last, {**last, "default": "ns/c1"}) == {"set": {"default": "ns/c1"}, "delete": []}
    assert certificates_delta(last, {"certs": dict(pairs), "hosts": dict(hosts), "default": None}) is None

"""The routes table the applier pushes: each host's canonical JSON, rebuilt only when its routes change."""
from __future__ import annotations

import orjson

from services.common.canonical import canonical_json
from services.common.settings import Settings
from services.nginxconf.config import DEFAULT_PROFILE, NginxConfig
from services.syncer.apply import NginxApplier
from services.syncer.metrics import SyncerMetrics
from services.syncer.model_types import HostRoutes, Model, Route


def model(tmp_path, routes: dict[str, HostRoutes]) -> Model:
    return Model(config=NginxConfig(http_port=18080, https_port=18443, state_dir=str(tmp_path), run_dir=str(tmp_path)),
                 routes=routes)


def test_equal_routes_keep_their_entry_and_changed_ones_get_a_new_one(tmp_path):
    settings = Settings.from_flags(state_dir=str(tmp_path / "state"), run_dir=str(tmp_path / "run"))
    applier = NginxApplier(settings, SyncerMetrics(settings))
    applier.applied_profiles = {DEFAULT_PROFILE}
    web = HostRoutes(prefix={"/": Route("team-web-80", ingress="team/web", service="web")})
    api = HostRoutes(prefix={"/api": Route("team-api-80", ingress="team/api", service="api")})
    first = applier._tables(model(tmp_path, {"web.example": web, "api.example": api}))["routes"]

    # The incremental model merged the web host's group again: new objects, the same routes.
    web_again = HostRoutes(prefix={"/": Route("team-web-80", ingress="team/web", service="web")})
    api_moved = HostRoutes(prefix={"/api": Route("team-api-81", ingress="team/api", service="api")})
    second = applier._tables(model(tmp_path, {"web.example": web_again, "api.example": api_moved}))["routes"]

    assert second["web.example"] is first["web.example"]  # the pusher sends no delta for it
    assert second["api.example"] is not first["api.example"]
    expected = {"web.example": web_again.to_json(), "api.example": api_moved.to_json()}
    assert orjson.loads(canonical_json(second)) == expected
    assert canonical_json(second) == canonical_json(expected)  # still canonical with the entries embedded
    third = applier._tables(model(tmp_path, {"api.example": api_moved}))["routes"]
    assert list(third) == ["api.example"]

"""A reload that waits for --sync-rate-limit (real nginx -t, no master): the routes it does not need are pushed at
once, each changed path keeps the entry nginx can serve until the reload, and the reload applies the model of then."""
import asyncio
import orjson

from services.common.canonical import canonical_json
from services.common.settings import Settings
from services.nginxconf.config import LocationProfile, NginxConfig
from services.syncer.model.types import HostRoutes, Model, Route
from services.syncer.nginx_apply.applier import NginxApplier
from services.syncer.nginx_apply.reload_rate import ReloadRateLimiter
from services.syncer.observability.metrics import SyncerMetrics

SLOW = LocationProfile("slow", (("proxy_read_timeout", "30s"),))
FAST = LocationProfile("fast", (("proxy_read_timeout", "5s"),))


class Clock:
    now = 50.0

    def __call__(self) -> float:
        return self.now


def model(settings: Settings, routes: dict[str, HostRoutes], *profiles: LocationProfile) -> Model:
    return Model(config=NginxConfig(http_port=18080, https_port=18443, state_dir=settings.paths.state_dir,
                                    run_dir=settings.paths.run_dir, profiles=list(profiles)), routes=routes)


def pushed(applier: NginxApplier) -> dict:
    return orjson.loads(canonical_json(applier.tables["routes"]))


def test_a_deferred_reload_leaves_routes_servable_and_applies_the_last_model(tmp_path):
    settings = Settings.from_flags(state_dir=str(tmp_path / "state"), run_dir=str(tmp_path / "run"))
    applier = NginxApplier(settings, SyncerMetrics(settings))
    clock = Clock()
    applier.reload_rate = ReloadRateLimiter(0.3, clock=clock)

    async def scenario():
        first = model(settings, {"app.example": HostRoutes(prefix={"/": Route("team-app-80", profile="slow")})}, SLOW)
        assert await applier.apply(first) == {}
        assert "location @profile_slow" in applier.conf_path.read_text()
        applier.reload_rate.take()  # nginx reloaded it (no master runs here to count it)

        # The app's timeout changes (a new profile), a new path asks for it too, and another team adds a host.
        changed = model(settings, {
            "app.example": HostRoutes(prefix={"/": Route("team-app-80", profile="fast"),
                                              "/new": Route("team-app-80", profile="fast")}),
            "other.example": HostRoutes(prefix={"/": Route("team-app-80", ingress="team/app")})}, FAST)
        assert await applier.apply(changed) == {}
        assert applier.reload_due == clock.now + 1 / 0.3
        assert "location @profile_fast" not in applier.conf_path.read_text()  # no reload yet
        routes = pushed(applier)
        assert routes["other.example"]["prefix"] == [["/", Route("team-app-80", ingress="team/app").to_json()]]
        # The changed path keeps the settings nginx runs; the new path waits for its profile.
        assert routes["app.example"]["prefix"] == [["/", Route("team-app-80", profile="slow").to_json()]]

        clock.now = applier.reload_due
        assert await applier.apply(changed) == {}
        assert applier.reload_due is None
        assert "location @profile_fast" in applier.conf_path.read_text()
        assert pushed(applier)["app.example"]["prefix"] == [["/new", Route("team-app-80", profile="fast").to_json()],
                                                            ["/", Route("team-app-80", profile="fast").to_json()]]

    asyncio.run(scenario())


def test_a_change_back_to_the_running_configuration_needs_no_reload(tmp_path):
    settings = Settings.from_flags(state_dir=str(tmp_path / "state"), run_dir=str(tmp_path / "run"))
    applier = NginxApplier(settings, SyncerMetrics(settings))
    applier.reload_rate = ReloadRateLimiter(0.3, clock=Clock())
    slow = model(settings, {"app.example": HostRoutes(prefix={"/": Route("b", profile="slow")})}, SLOW)
    fast = model(settings, {"app.example": HostRoutes(prefix={"/": Route("b", profile="fast")})}, FAST)

    async def scenario():
        await applier.apply(slow)
        applier.reload_rate.take()
        await applier.apply(fast)
        assert applier.reload_due is not None
        await applier.apply(slow)
        assert applier.reload_due is None  # nothing left to reload
        assert pushed(applier)["app.example"]["prefix"] == [["/", Route("b", profile="slow").to_json()]]

    asyncio.run(scenario())

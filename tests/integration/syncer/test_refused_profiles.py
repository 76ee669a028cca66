"""A location profile that `nginx -t` refuses rejects only the Ingresses using it (real nginx -t)."""
import asyncio

from services.common.settings import Settings
from services.nginxconf.config import LocationProfile, NginxConfig
from services.syncer.model.types import Model
from services.syncer.nginx_apply.applier import NginxApplier
from services.syncer.observability.metrics import SyncerMetrics

GOOD = LocationProfile("good", (("proxy_read_timeout", "5s"),))
# Passes the template's quoting (no '$', no control characters), yet nginx refuses the address.
BAD = LocationProfile("bad", (("allow", "fe80::1%x;y"), ("deny", "all")))
ALSO_BAD = LocationProfile("alsobad", (("proxy_buffer_size", "64k"), ("proxy_buffers", "2 1k")))


def model(settings: Settings, *profiles: LocationProfile) -> Model:
    return Model(config=NginxConfig(
        http_port=18080, https_port=18443, state_dir=settings.paths.state_dir, run_dir=settings.paths.run_dir, profiles=list(profiles)))


def settings_in(tmp_path) -> Settings:
    return Settings.from_flags(state_dir=str(tmp_path / "state"), run_dir=str(tmp_path / "run"))


def test_only_the_new_profiles_that_fail_alone_are_refused(tmp_path):
    settings = settings_in(tmp_path)
    applier = NginxApplier(settings, SyncerMetrics(settings))

    async def scenario():
        refused = await applier.apply(model(settings, GOOD, BAD, ALSO_BAD))
        assert set(refused) == {"bad", "alsobad"}
        assert "fe80::1%x;y" in refused["bad"] or "invalid" in refused["bad"]
        assert not applier.conf_path.exists()  # nothing of the candidate was installed
        assert await applier.apply(model(settings, GOOD)) == {}
        assert "location @profile_good" in applier.conf_path.read_text()
        assert applier.metrics.stats.reload_errors == 0  # a tenant's refused settings are not a failed reload

    asyncio.run(scenario())


def test_a_configuration_failing_without_any_new_profile_is_a_reload_error(tmp_path):
    settings = settings_in(tmp_path)
    applier = NginxApplier(settings, SyncerMetrics(settings))
    broken = model(settings, GOOD)
    broken.config.globals["proxy_buffers"] = "2 1k"  # with proxy_buffer_size 4k: fails whatever the profiles

    async def scenario():
        assert await applier.apply(broken) == {}
        assert applier.metrics.stats.reload_errors == 1
        assert not applier.conf_path.exists()

    asyncio.run(scenario())

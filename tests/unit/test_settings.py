"""The grouped settings: every flag, its PYNGRESS_* variable, and errors that name the variable."""
import argparse

import pytest

from services.common import settings as settings_mod
from services.common.settings import EnvironmentSettingError, ProxySettings, Settings


def test_flags_land_in_their_groups():
    parsed = settings_mod.parse(["--http-port=8080", "--manifests=/m", "--enable-ssl-passthrough",
                                 "--proxy-hello-timeout=0.5", "--election-lease-seconds=3", "--node-name=n1"])
    assert (parsed.ports.http, parsed.source.manifests, parsed.ingress.enable_ssl_passthrough) == (8080, "/m", True)
    assert (parsed.proxy.hello_timeout, parsed.leader.lease_seconds, parsed.cni.node_name) == (0.5, 3, "n1")
    assert parsed.ports.https == 443 and parsed.proxy == ProxySettings(hello_timeout=0.5)


def test_the_proxy_limits_and_the_lease_come_from_their_variables(monkeypatch):
    monkeypatch.setenv("PYNGRESS_PROXY_HELLO_TIMEOUT", "0.5")
    monkeypatch.setenv("PYNGRESS_PROXY_MAX_PENDING_HELLOS", "10")
    monkeypatch.setenv("PYNGRESS_ELECTION_LEASE_SECONDS", "4")
    parsed = settings_mod.parse([])
    assert (parsed.proxy.hello_timeout, parsed.proxy.max_pending_hellos, parsed.proxy.idle_timeout) == (0.5, 10, 600)
    assert parsed.leader.lease_seconds == 4
    assert settings_mod.parse(["--proxy-hello-timeout=2"]).proxy.hello_timeout == 2  # the flag wins


@pytest.mark.parametrize("env", [
    {"PYNGRESS_PROXY_HELLO_TIMEOUT": "soon"}, {"PYNGRESS_PROXY_IDLE_TIMEOUT": "0"},
    {"PYNGRESS_PROXY_MAX_PENDING_HELLOS": "1.5"}, {"PYNGRESS_PROXY_CONNECT_TIMEOUT": "nan"},
    {"PYNGRESS_ELECTION_LEASE_SECONDS": "0"}, {"PYNGRESS_HTTP_PORT": "70000"},
    {"PYNGRESS_ENABLE_CNI": "maybe"}, {"PYNGRESS_SYNC_RATE_LIMIT": "0"}, {"PYNGRESS_SYNC_RATE_LIMIT": "inf"},
    {"PYNGRESS_MAX_DRAINING_WORKER_GENERATIONS": "0"},
])
def test_bad_values_name_the_variable(monkeypatch, env):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(EnvironmentSettingError, match=next(iter(env))):
        settings_mod.add_arguments(argparse.ArgumentParser())


def test_as_args_and_environment_round_trip():
    settings = Settings.from_flags(http_port=8080, run_dir="/r", enable_cni=True, proxy_drain_timeout=2.5)
    assert settings_mod.parse(settings.as_args()) == settings
    env = settings.environment()
    assert (env["PYNGRESS_HTTP_PORT"], env["PYNGRESS_ENABLE_CNI"], env["PYNGRESS_PROXY_DRAIN_TIMEOUT"]) == \
        ("8080", "true", "2.5")
    assert "PYNGRESS_MANIFESTS" not in env  # unset flags are left out
    # What `pyngress up` hands the syncer under supervisord.
    limited = Settings.from_flags(sync_rate_limit=0.1, max_draining_worker_generations=3)
    assert (limited.environment()["PYNGRESS_SYNC_RATE_LIMIT"], limited.reload.max_draining_worker_generations) == \
        ("0.1", 3)
    assert settings_mod.parse(limited.as_args()) == limited


def test_settings_are_frozen_and_unknown_flags_refused():
    settings = Settings()
    with pytest.raises(AttributeError):
        settings.ports.http = 1  # type: ignore[misc]
    with pytest.raises(TypeError, match="unknown setting"):
        Settings.from_flags(no_such_flag=1)


@pytest.mark.parametrize("text", [":8443", "127.0.0.1:8443", "[::1]:8443", "0.0.0.0:1"])
def test_the_webhook_address_takes_ingress_nginx_spellings(text):
    assert settings_mod.parse([f"--validating-webhook={text}"]).webhook.address == text


@pytest.mark.parametrize("text", ["8443", ":0", ":http", "[::1:8443", "host:70000"])
def test_a_webhook_address_without_a_port_is_refused(text):
    with pytest.raises(SystemExit):
        settings_mod.parse([f"--validating-webhook={text}"])

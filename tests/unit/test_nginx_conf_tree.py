"""The nginx.conf reader and the injection assertion that the fuzz and CVE tests rely on: each must fail when
a value escapes its arguments, or those tests could not fail."""
from __future__ import annotations

import pytest

from services.nginxconf.config import BlockLists, LocationProfile, NginxConfig, RateLimit
from services.nginxconf.render import render
from tests.support.injection_check import assert_values_stay_arguments
from tests.support.nginx_conf_tree import ConfSyntaxError, parse, walk


def test_reads_words_quotes_escapes_and_blocks():
    [http] = parse('http { a "b c" \'d;e\' "q\\"x\\\\" f\\;g; # comment }\n server { listen 80; } }')
    [a, server] = http.block
    assert (a.name, a.args) == ("a", ["b c", "d;e", 'q"x\\', "f\\;g"])
    assert [d.name for _, d in walk([http])] == ["http", "a", "server", "listen"]
    assert server.find("listen")[0].args == ["80"]


def test_a_lua_block_is_code_up_to_its_own_closing_brace():
    text = 'x_by_lua_block { local t = { "}", [[ } ]], \'{\' } -- }\n --[==[ } ]==] f{} }\n after 1;'
    lua, after = parse(text)
    assert lua.lua is not None and "f{}" in lua.lua and after.args == ["1"]


@pytest.mark.parametrize("text", ['a "b', "a {", "a }", "a; }", '"x"y;', "b_by_lua_block { ' }"])
def test_refuses_what_nginx_refuses(text):
    with pytest.raises(ConfSyntaxError):
        parse(text)


def _config() -> NginxConfig:
    profile = LocationProfile.of((("proxy_buffer_size", "8k"), ("allow", "10.0.0.0/8"), ("deny", "all")))
    return NginxConfig(http_port=80, https_port=443, state_dir="/s", run_dir="/r", profiles=[profile],
                       globals={"proxy_read_timeout": "30s"})


def test_a_clean_render_passes():
    config = _config()
    assert_values_stay_arguments(config, render(config))


@pytest.mark.parametrize("tamper", [
    ('"8k";', '"8k"; return 200 "x";'),  # a directive added in the profile's location
    ('"8k";', '8k; root /;'),  # a value that left its quotes
    ('"30s";', '"30s"; include /etc/passwd;'),  # in http
    ('"10.0.0.0/8";', '"10.0.0.0/8" "10.1.0.0/16";'),  # an argument added
    ('"8k";', '"4k";'),  # a value changed
    ("location @pyngress_default_backend {", "location /x { return 200; }\n        location @pyngress_default_backend {"),
])
def test_a_value_that_escaped_its_arguments_fails(tamper):
    assert_tampering_fails(_config(), tamper)


def assert_tampering_fails(config: NginxConfig, tamper: tuple[str, str]) -> None:
    old, new = tamper
    text = render(config)
    assert old in text
    with pytest.raises(AssertionError):
        assert_values_stay_arguments(config, text.replace(old, new, 1))


def _typed_config() -> NginxConfig:
    limited = LocationProfile.of((("allow", "10.0.0.0/8"), ("deny", "all")), denied=("10.2.0.0/16",),
                                 rate_limit=RateLimit(zone="ns_a_uid", rps=5, connections=2, allowlist=("10.1.0.0/16",)))
    return NginxConfig(http_port=80, https_port=443, state_dir="/s", run_dir="/r", profiles=[limited],
                       blocked=BlockLists(networks=("10.9.0.0/16",), user_agents=("default", "~*bot"), referers=("x",)))


def test_a_clean_render_with_rate_limits_denied_networks_and_block_lists_passes():
    config = _typed_config()
    assert_values_stay_arguments(config, render(config))


@pytest.mark.parametrize("tamper", [
    ('"10.1.0.0/16" 1;', '"10.1.0.0/16" 1; "0.0.0.0/0" 1;'),  # an allowlist entry added to a rate limit
    ('"rate=5r/s";', '"rate=50r/s";'),  # a zone's rate changed
    ('"burst=25"', '"burst=26"'),  # a location's limit changed
    ('deny "10.2.0.0/16";', 'deny "10.3.0.0/16";'),  # a denied network changed
    ('"\\\\default" 1;', '"\\\\default" 1; default 1;'),  # a block list entry became a map parameter
    ("return 403;", "return 200;"),  # a block list's answer changed
])
def test_a_typed_field_that_escaped_its_values_fails(tamper):
    assert_tampering_fails(_typed_config(), tamper)

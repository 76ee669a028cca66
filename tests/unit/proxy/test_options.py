"""PYNGRESS_PROXY_* limits: defaults, overrides, and errors that name the variable."""
import pytest

from services.proxy.options import OptionError, ProxyOptions


def test_defaults_and_overrides():
    assert ProxyOptions.from_environ({}) == ProxyOptions()
    opts = ProxyOptions.from_environ({"PYNGRESS_PROXY_HELLO_TIMEOUT": "0.5",
                                      "PYNGRESS_PROXY_MAX_PENDING_HELLOS": "10"})
    assert opts.hello_timeout == 0.5 and opts.max_pending_hellos == 10 and opts.idle_timeout == 600


@pytest.mark.parametrize("env", [
    {"PYNGRESS_PROXY_HELLO_TIMEOUT": "soon"}, {"PYNGRESS_PROXY_IDLE_TIMEOUT": "0"},
    {"PYNGRESS_PROXY_MAX_PENDING_HELLOS": "1.5"}, {"PYNGRESS_PROXY_CONNECT_TIMEOUT": "nan"},
])
def test_bad_values_name_the_variable(env):
    with pytest.raises(OptionError, match=next(iter(env))):
        ProxyOptions.from_environ(env)

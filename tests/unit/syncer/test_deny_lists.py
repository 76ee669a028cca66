"""denylist-source-range and the ConfigMap's block-cidrs, block-user-agents, block-referers."""
import pytest

from services.nginxconf.config import BlockLists
from services.nginxconf.render import render

from .test_annotations import PREFIX, route_profile


def test_denied_networks_come_before_the_allowlist_as_in_ingress_nginx(cluster):
    cluster.app(annotations={"denylist-source-range": "10.1.0.0/16, 192.168.0.1",
                             "allowlist-source-range": "10.0.0.0/8"})
    profile = route_profile(cluster.build())
    assert profile.denied == ("10.1.0.0/16", "192.168.0.1/32")
    location = render(cluster.build().config).split(f"location @profile_{profile.name} {{")[1]
    assert location.index('deny "10.1.0.0/16";') < location.index('allow "10.0.0.0/8";') < location.index('deny "all";')


@pytest.mark.parametrize("value, reason", [
    ("10.0.0.0/8; allow all", "is not an IP address or CIDR"),
    ("", "is not an IP address or CIDR"),
    ("fe80::1%eth0", "has an IPv6 zone id"),
])
def test_a_bad_denylist_rejects_the_ingress(cluster, value, reason):
    cluster.app(annotations={"denylist-source-range": value})
    [problem] = cluster.rejections(cluster.build())
    assert problem.startswith(f"Ingress default/web: annotation {PREFIX}/denylist-source-range value {value!r}: ")
    assert reason in problem


@pytest.mark.parametrize("data, blocked", [
    ({"block-cidrs": "10.0.0.0/8, 192.168.1.1,, 10.0.0.0/8"}, BlockLists(networks=("10.0.0.0/8", "192.168.1.1/32"))),
    ({"block-user-agents": "curl/7.88.1, ~*bot, default, ~^Mozilla/4\\.0 \\(compatible"},
     BlockLists(user_agents=("curl/7.88.1", "~*bot", "default", "~^Mozilla/4\\.0 \\(compatible"))),
    ({"block-referers": "~*spam$, https://evil.example/"},
     BlockLists(referers=("~*spam\\z", "https://evil.example/"))),
])
def test_block_lists_are_read_from_the_configmap(cluster, data, blocked):
    cluster.configmap(data)
    model = cluster.build()
    assert model.problem_lines() == [] and model.config.blocked == blocked


@pytest.mark.parametrize("key, value, reason", [
    ("block-cidrs", "10.0.0.0/33", "is not an IP address or CIDR"),
    ("block-cidrs", "10.0.0.0/8 deny all", "is not an IP address or CIDR"),
    ("block-user-agents", "~*(bot", "is not a valid regular expression"),
    ("block-user-agents", "curl/$version", "'$' cannot be written into nginx.conf"),
    ("block-referers", "~^a$b", "'$' cannot be written into nginx.conf"),
    ("block-referers", "évil", "holds characters other than printable ASCII"),
    ("block-referers", "a\nreturn 200", "holds characters other than printable ASCII"),
    ("block-user-agents", "~*", "has an empty regular expression"),
    ("block-user-agents", "~(?a)bot", "unrecognized character after (? or (?-"),
    ("block-user-agents", "~\\u0041", "PCRE2 does not support \\F, \\L, \\l, \\N{name}, \\U, or \\u"),
    ("block-cidrs", ",".join(f"10.0.{i // 250}.{i % 250}" for i in range(1001)), "more than 1000"),
])
def test_a_bad_block_list_is_reported_and_the_rest_of_the_configmap_applies(cluster, key, value, reason):
    cluster.configmap({key: value, "block-cidrs" if key != "block-cidrs" else "block-referers": "192.0.2.1"})
    model = cluster.build()
    [problem] = model.problem_lines()
    assert problem.startswith(f"ConfigMap ingress/ingress-nginx-controller: key {key} value {value!r}: ")
    assert reason in problem and problem.endswith("; the default applies")
    assert model.config.blocked != BlockLists()


def test_exact_values_cannot_become_map_parameters_or_patterns_in_nginx_conf(cluster):
    cluster.configmap({"block-user-agents": "default, hostnames, \\x, ~re"})
    conf = render(cluster.build().config)
    entries = conf.split("map $http_user_agent $pyngress_blocked_user_agent {")[1].split("}")[0]
    assert entries.split() == ["default", "0;", '"\\\\default"', "1;", '"\\\\hostnames"', "1;", '"\\\\\\\\x"', "1;",
                               '"~re"', "1;"]

"""limit-* annotations: what each value means in the Ingress's location profile, and what is refused."""
import pytest

from services.nginxconf.config import RateLimit
from services.nginxconf.render import render

from .test_annotations import PREFIX, route_profile


@pytest.mark.parametrize("annotations, rate_limit", [
    ({"limit-rps": "10"}, RateLimit(zone="default_web", rps=10)),
    ({"limit-rpm": "300", "limit-burst-multiplier": "2"}, RateLimit(zone="default_web", rpm=300, burst_multiplier=2)),
    ({"limit-connections": "3"}, RateLimit(zone="default_web", connections=3)),
    ({"limit-rps": "5", "limit-rpm": "100", "limit-connections": "65535"},
     RateLimit(zone="default_web", rps=5, rpm=100, connections=65535)),
    ({"limit-rps": "0010", "limit-burst-multiplier": "0"}, RateLimit(zone="default_web", rps=10, burst_multiplier=0)),
    ({"limit-rps": "1", "limit-allowlist": "10.0.0.0/8, 192.168.1.1"},
     RateLimit(zone="default_web", rps=1, allowlist=("10.0.0.0/8", "192.168.1.1/32"))),
    ({"limit-rps": "1", "limit-whitelist": "2001:db8::/32"},
     RateLimit(zone="default_web", rps=1, allowlist=("2001:db8::/32",))),
])
def test_request_limits_name_their_zones_after_the_ingress(cluster, annotations, rate_limit):
    cluster.app(annotations=annotations)
    model = cluster.build()
    assert cluster.rejections(model) == []
    assert route_profile(model).rate_limit == rate_limit


@pytest.mark.parametrize("annotations, directives", [
    ({"limit-rate": "100"}, (("limit_rate", "100k"),)),
    ({"limit-rate": "100", "limit-rate-after": "1024"}, (("limit_rate", "100k"), ("limit_rate_after", "1024k"))),
    ({"limit-rate": "0"}, ()),
])
def test_limit_rate_is_kilobytes_per_second_as_in_ingress_nginx(cluster, annotations, directives):
    cluster.app(annotations=annotations)
    profile = route_profile(cluster.build())
    assert profile.directives == directives and profile.rate_limit is None


@pytest.mark.parametrize("name, value, reason", [
    ("limit-rps", "-1", "must be a whole number from 0 to 1000000"),
    ("limit-rps", "1r/s", "must be a whole number from 0 to 1000000"),
    ("limit-rpm", "1000001", "must be a whole number from 0 to 1000000"),
    ("limit-connections", "65536", "must be a whole number from 0 to 65535"),
    ("limit-burst-multiplier", "1001", "must be a whole number from 0 to 1000"),
    ("limit-rate", "10k", "must be a whole number from 0 to 1000000000"),
    ("limit-rate-after", "1 ; return 200", "must be a whole number from 0 to 1000000000"),
    ("limit-allowlist", "10.0.0.0/8; deny all", "is not an IP address or CIDR"),
    ("limit-whitelist", "fe80::1%eth0", "has an IPv6 zone id"),
    ("limit-rph", "600", "ingress-nginx has no limit-rph, and nginx counts requests per second or per minute only; "
                         "use limit-rpm (a limit-rph of 600 is a limit-rpm of 10)"),
])
def test_bad_values_deny_the_ingress_s_paths_or_reject_it(cluster, name, value, reason):
    cluster.app(annotations={name: value, "limit-rps": "5"} if name != "limit-rps" else {name: value})
    cluster.app("other", host="other.example.com")
    model = cluster.build()
    if name == "limit-rph":  # not implemented: the Ingress is refused
        assert list(model.routes) == ["other.example.com"]
        [problem] = cluster.rejections(model)
        assert problem.startswith(f"Ingress default/web: annotation {PREFIX}/{name} value {value!r}: ")
        assert reason in problem
    else:  # invalid: its paths answer 503, never served without the limit
        assert reason in cluster.set_aside(model, name, value)


def test_each_ingress_counts_alone_and_its_paths_count_together(cluster):
    limits = {"limit-rps": "5"}
    cluster.app("one", host="one.example.com", annotations=limits)
    cluster.app("two", host="two.example.com", annotations=limits)
    cluster.ingress("two-more", host="one.example.com", paths=(("/api", "Prefix", "two", 80),), annotations=limits)
    model = cluster.build()
    one, two, more = (model.routes[h].prefix[p].profile for h, p in
                      (("one.example.com", "/"), ("two.example.com", "/"), ("one.example.com", "/api")))
    assert len({one, two, more}) == 3
    zones = {p.name: p.rate_limit.zone for p in model.config.profiles if p.rate_limit}
    assert (zones[one], zones[two], zones[more]) == ("default_one", "default_two", "default_two-more")
    conf = render(model.config)
    assert conf.count('"zone=default_one_rps:5m" "rate=5r/s"') == 1


def test_the_uid_is_part_of_the_zone_name_so_a_recreated_ingress_starts_afresh(cluster):
    ingress = cluster.app(annotations={"limit-rpm": "5"})
    ingress["metadata"]["uid"] = "0b6c8f0e-6f5e-4a4e-9d1c-3c2a1f0e9b7d"
    assert route_profile(cluster.build()).rate_limit.zone == "default_web_0b6c8f0e-6f5e-4a4e-9d1c-3c2a1f0e9b7d"


@pytest.mark.parametrize("name", ["limit-burst-multiplier", "limit-allowlist"])
def test_options_without_a_limit_are_ignored_with_a_warning(cluster, name):
    cluster.app(annotations={name: "10.0.0.0/8" if name == "limit-allowlist" else "3"})
    model = cluster.build()
    assert route_profile(model).rate_limit is None
    assert model.problem_lines() == [f"warning: Ingress default/web: annotation {PREFIX}/{name} has no effect "
                                     "without limit-rps, limit-rpm or limit-connections; ignored"]


def test_the_zone_key_is_the_same_variable_with_or_without_an_allowlist(cluster):
    # nginx refuses to reload a zone whose key variable changed: adding an allowlist must not change it.
    cluster.app(annotations={"limit-rps": "5"})
    before = render(cluster.build().config)
    cluster.app(annotations={"limit-rps": "5", "limit-allowlist": "10.0.0.1"})
    after = render(cluster.build().config)
    zone_line = next(line for line in before.splitlines() if "limit_req_zone" in line)
    assert zone_line in after

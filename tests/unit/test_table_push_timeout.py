"""A whole table's POST to nginx's configuration API may take time in proportion to its size: nginx's Lua takes
the table in entry by entry before it answers."""
from services.nginxconf.config_api import HTTP_TIMEOUT_SECONDS
from services.nginxconf.tables import post_timeout


def test_the_routes_of_100000_hosts_get_more_than_the_fixed_timeout():
    assert post_timeout(0) == HTTP_TIMEOUT_SECONDS
    # About 31 MB of routes (311 bytes a host): the first push took 13 s on a shared machine (bench/bench_scale.py),
    # past 30 s under heavier load, where a fixed 30 s failed every retry and nothing was ever served.
    assert post_timeout(31_000_000) >= 3 * 30

"""A changed route costs work for the routes sharing its host names only: counted (routes attached, routes and hosts
given to the tables; gateway/kept_routes.py Work), not timed, at two numbers of routes, the model equal to a whole
build after each change. At 10,000 HTTPRoutes the pass over every route took 0.4-0.6 s of each new route
(BENCHMARKS.md)."""
import pytest

from services.common.objects import object_key
from services.syncer.model.build import build_model
from services.syncer.model.incremental import IncrementalModel


def counted(gw, incremental: IncrementalModel, change) -> tuple[int, int, int]:
    """(routes attached, routes tabled, hosts tabled) by the update after `change` (which returns the changed object
    or its key), the model checked against a whole build."""
    work = incremental.gateway_work
    before = (work.attached, work.routes_tabled, work.hosts_tabled)
    changed = change()
    key = changed if isinstance(changed, str) else object_key(changed)
    model = incremental.update(gw.store, {key})
    assert model == build_model(gw.store, settings=gw.settings)
    return work.attached - before[0], work.routes_tabled - before[1], work.hosts_tabled - before[2]


@pytest.mark.parametrize("n", [20, 80])
def test_a_route_change_costs_its_neighbours_whatever_the_number_of_routes(gw, n):
    o = gw.objects
    gw.gateway(o.listener(namespaces={"from": "All"}))
    for i in range(n):
        gw.route(f"r{i}", hostnames=[f"h{i}.bench.test"], rules=[o.rule(o.backend_ref("web"))])
    for name in ("shop-a", "shop-b"):  # two routes sharing one host
        gw.route(name, hostnames=["shop.example.com"], rules=[o.rule(o.backend_ref("web"),
                                                                     matches=[o.path_match(f"/{name}")])])
    gw.route("api", hostnames=["api.example.com"], rules=[o.rule(o.backend_ref("web"))])
    incremental = IncrementalModel(gw.settings)
    incremental.update(gw.store, None)

    def route(name: str, host: str, path: str = "/"):
        return lambda: gw.route(name, hostnames=[host], rules=[o.rule(o.backend_ref("web"),
                                                                      matches=[o.path_match(path)])])
    # A new route on a new host: itself.
    assert counted(gw, incremental, route("new", "new.bench.test")) == (1, 1, 1)
    # A route on a host two others share: the three of them, one host.
    assert counted(gw, incremental, route("shop-c", "shop.example.com", "/c")) == (1, 3, 1)
    # A route moved from one host to another: both hosts, the routes of both.
    assert counted(gw, incremental, route("api", "shop.example.com", "/api")) == (1, 4, 2)
    # Deleted: its host made again from the others.
    assert counted(gw, incremental, lambda: gw.store.pop("HTTPRoute/default/shop-c") and
                   "HTTPRoute/default/shop-c") == (0, 3, 1)
    # A wildcard: the hosts it covers (shop.example.com, api's is gone) and their routes, the *.bench.test ones not.
    assert counted(gw, incremental, route("wild", "*.example.com")) == (1, 4, 2)
    # A route on a covered host now also makes its entry from the wildcard's layer.
    assert counted(gw, incremental, route("docs", "docs.example.com")) == (1, 2, 2)
    # A route that attaches nowhere (its listener does not take the host): no table is made.
    assert counted(gw, incremental, lambda: gw.route(
        "elsewhere", parents=[{"name": "gw", "sectionName": "missing"}], hostnames=["x.bench.test"],
        rules=[o.rule(o.backend_ref("web"))])) == (1, 0, 0)


def test_what_is_not_a_route_change_builds_the_part_whole(gw):
    """A Gateway, or a Service the rules resolve: every route again (whole builds keep plans and entries)."""
    o = gw.objects
    gw.gateway(o.listener())
    for i in range(10):
        gw.route(f"r{i}", hostnames=[f"h{i}.bench.test"], rules=[o.rule(o.backend_ref("web"))])
    incremental = IncrementalModel(gw.settings)
    incremental.update(gw.store, None)
    assert counted(gw, incremental, lambda: gw.service("web", ports=(("http", 80), ("admin", 81))))[:2] == (10, 10)
    assert counted(gw, incremental, lambda: gw.gateway(o.listener(), o.listener("other", port=8080)))[0] == 10
    # A route for any host is part of every host's entry: every host is made again, each route attached once.
    assert counted(gw, incremental, lambda: gw.route("any", rules=[o.rule(o.backend_ref("web"))])) == (1, 11, 11)
    # And when it leaves "_" for a host of its own, every host again, "_" gone.
    assert counted(gw, incremental, lambda: gw.route("any", hostnames=["named.bench.test"],
                                                     rules=[o.rule(o.backend_ref("web"))])) == (1, 11, 12)


def test_endpoints_moved_before_a_route_change_are_served_by_the_routes_kept(gw):
    """The kept routes' backends take the endpoints the caller resolved again since (not those of their last
    tabling)."""
    o = gw.objects
    gw.gateway(o.listener())
    gw.app_service("api")
    gw.route("kept", hostnames=["kept.bench.test"], rules=[o.rule(o.backend_ref("api"))])
    incremental = IncrementalModel(gw.settings)
    incremental.update(gw.store, None)
    counted(gw, incremental, lambda: gw.endpoint_slice("api", name="api-more", addresses=("10.0.0.9",)))
    assert counted(gw, incremental, lambda: gw.route("new", hostnames=["new.bench.test"],
                                                     rules=[o.rule(o.backend_ref("web"))])) == (1, 1, 1)
    model = incremental.update(gw.store, set())
    assert sorted(model.backends["default-api-80"]) == ["10.0.0.1:8080", "10.0.0.9:8080"]


def test_a_tls_route_deleted_leaves_the_passthrough_table(gw):
    o = gw.objects
    gw.settings = gw.settings.replace_flags(enable_ssl_passthrough=True)
    gw.gateway(o.listener("tls", passthrough=True))
    gw.add(o.tls_route("secure", o.backend_ref("web", port=443), hostnames=["secure.example.com"],
                       created=gw.timestamp()))
    incremental = IncrementalModel(gw.settings)
    assert "secure.example.com" in incremental.update(gw.store, None).passthrough
    assert counted(gw, incremental, lambda: gw.store.pop("TLSRoute/default/secure") and
                   "TLSRoute/default/secure") == (0, 0, 0)
    assert "secure.example.com" not in incremental.update(gw.store, set()).passthrough

"""One change (an Ingress, a route, an EndpointSlice) costs the model the hosts it touches, with Ingresses and
HTTPRoutes side by side: counted (hosts whose joined entry, Ingress routes with Gateway rules laid over, is made
again; hosts whose Gateway rules are compared with the last model's), not timed, at two sizes, the model equal to a
whole build after each change. Before, every change laid the Gateway rules over every host again and compared every
host's rules (40 ms a change at 10,000 HTTPRoutes, BENCHMARKS.md)."""
import pytest

from services.syncer.model.build import build_model
from services.syncer.model.incremental import IncrementalModel


def counted(gw, incremental: IncrementalModel, change) -> tuple[int, int]:
    """(hosts joined, Gateway hosts compared) by the update after `change` (which changes the store), the model
    checked against a whole build."""
    before = incremental.hosts_joined, incremental.gateway_hosts_compared
    objects = dict(gw.store)
    change()
    keys = {key for key in objects.keys() | gw.store.keys() if objects.get(key) is not gw.store.get(key)}
    model = incremental.update(gw.store, keys)
    assert model == build_model(gw.store, settings=gw.settings)
    return incremental.hosts_joined - before[0], incremental.gateway_hosts_compared - before[1]


@pytest.mark.parametrize("n", [20, 80])
def test_a_change_costs_the_hosts_it_touches_whatever_the_number_of_hosts(gw, n):
    o = gw.objects
    gw.ingress_class()
    gw.gateway(o.listener(namespaces={"from": "All"}))
    gw.app_service("api")
    for i in range(n):
        gw.route(f"r{i}", hostnames=[f"r{i}.bench.test"], rules=[o.rule(o.backend_ref("web"))])
        gw.app(f"i{i}", host=f"i{i}.bench.test")
    gw.route("api", hostnames=["api.bench.test"], rules=[o.rule(o.backend_ref("api"))])
    # A host served by both an Ingress and a route.
    gw.app("both", host="both.bench.test")
    gw.route("both", hostnames=["both.bench.test"], rules=[o.rule(o.backend_ref("web"),
                                                                   matches=[o.path_match("/gateway")])])
    incremental = IncrementalModel(gw.settings)
    incremental.update(gw.store, None)

    def route(name: str, host: str):
        return lambda: gw.route(name, hostnames=[host], rules=[o.rule(o.backend_ref("web"))])

    # A new Ingress on a new host: that host, no Gateway rules compared.
    assert counted(gw, incremental, lambda: gw.app("new", host="new.bench.test")) == (1, 0)
    # An Ingress moved to another host: both.
    assert counted(gw, incremental, lambda: gw.ingress("new", host="moved.bench.test",
                                                      paths=(("/", "Prefix", "new", 80),))) == (2, 0)
    # One more EndpointSlice of its Service: its host's entry made again (its group merged again), nothing else.
    assert counted(gw, incremental, lambda: gw.endpoint_slice("new", addresses=("10.0.0.7",))) == (1, 0)
    # A new route on a new host: that host, compared and joined.
    assert counted(gw, incremental, route("fresh", "fresh.bench.test")) == (1, 1)
    # A route moved to another host: both.
    assert counted(gw, incremental, route("fresh", "elsewhere.bench.test")) == (2, 2)
    # A route on the host an Ingress serves too: that host, its Ingress routes kept under the new rules.
    assert counted(gw, incremental, route("both", "both.bench.test")) == (1, 1)
    # A route deleted.
    assert counted(gw, incremental, lambda: gw.store.pop("HTTPRoute/default/fresh")) == (1, 1)
    # One more EndpointSlice of a route's Service: only endpoints moved, no host entry made again.
    assert counted(gw, incremental, lambda: gw.endpoint_slice("api", addresses=("10.0.0.8",))) == (0, 0)


def test_a_route_for_any_host_compares_every_host_as_before(gw):
    """A route without hostnames is part of every host's entry (kept_routes.py): every host again, as inherent."""
    o = gw.objects
    gw.gateway(o.listener())
    for i in range(10):
        gw.route(f"r{i}", hostnames=[f"r{i}.bench.test"], rules=[o.rule(o.backend_ref("web"))])
    incremental = IncrementalModel(gw.settings)
    incremental.update(gw.store, None)
    assert counted(gw, incremental, lambda: gw.route("any", rules=[o.rule(o.backend_ref("web"))])) == (11, 11)

"""The incremental model with Gateway API objects: equal to the full build after each change, every Gateway host and
backend that changed marked so that endpoint changes reach the pushed tables, and no more route plans made per change
than the change touches."""
from services.common.objects import object_key
from services.syncer.model.build import build_model
from services.syncer.model.incremental import IncrementalModel


def test_gateway_changes_and_endpoint_changes_follow_the_full_build(gw):
    o = gw.objects
    gw.ingress_class()
    gw.ingress("legacy", host="app.example.com", paths=(("/old", "Prefix", "web", 80),))
    gw.gateway(o.listener(hostname="app.example.com"))
    route = gw.route("new", rules=[o.rule(o.backend_ref("web"), matches=[o.path_match("/new")])])
    incremental = IncrementalModel(gw.settings)
    model = incremental.update(gw.store, None)
    assert model == build_model(gw.store, settings=gw.settings)
    steps = [
        lambda: gw.endpoint_slice("web", name="web-more", addresses=("10.0.0.9",)),  # a followed kind
        lambda: gw.route("new", rules=[o.rule(o.backend_ref("web"), matches=[o.path_match("/newer")])],
                         created=route["metadata"]["creationTimestamp"]),  # a Gateway kind: built afresh
        lambda: gw.ingress("legacy", host="app.example.com", paths=(("/older", "Prefix", "web", 80),)),
    ]
    for step in steps:
        previous = model
        model = incremental.update(gw.store, {object_key(step())})
        assert model == build_model(gw.store, settings=gw.settings)
        for table, marked in (("routes", model.changed.routes), ("backends", model.changed.backends)):
            before, after = getattr(previous, table), getattr(model, table)
            if marked is not None:
                assert {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)} <= marked
    assert sorted(model.backends["default-web-80"]) == ["10.0.0.1:8080", "10.0.0.9:8080"]


def test_each_change_plans_only_the_routes_it_touches(gw):
    """Counted, not timed: route plans made per change, and how often the Gateway API part is built again (at 10,000
    HTTPRoutes each re-plan of every route cost 1.1 s; BENCHMARKS.md)."""
    o = gw.objects
    gw.ingress_class()
    gw.app("legacy", host="legacy.example.com")
    gw.app_service("api", ns="other")
    gw.gateway(o.listener(namespaces={"from": "All"}))
    for i in range(20):
        gw.route(f"r{i}", hostnames=[f"h{i}.example.com"], rules=[o.rule(o.backend_ref("web"))])
    gw.add(o.http_route("crossing", hostnames=["cross.example.com"], created=gw.timestamp(),
                                   rules=[o.rule(o.backend_ref("api", ns="other"))]))
    incremental = IncrementalModel(gw.settings)
    model = incremental.update(gw.store, None)
    assert incremental.route_plans_made == 21 and incremental.gateway_builds == 1

    def step(change, *, plans: int, builds: int) -> None:
        nonlocal model
        made, built = incremental.route_plans_made, incremental.gateway_builds
        model = incremental.update(gw.store, {object_key(change())})
        assert model == build_model(gw.store, settings=gw.settings)
        assert (incremental.route_plans_made - made, incremental.gateway_builds - built) == (plans, builds)

    # Nothing a route reads: the Gateway API part is kept whole.
    step(lambda: gw.ingress("legacy", host="legacy.example.com", paths=(("/v2", "Prefix", "legacy", 80),)),
         plans=0, builds=0)
    step(lambda: gw.endpoint_slice("legacy", name="legacy-more", addresses=("10.0.0.7",)), plans=0, builds=0)
    # An endpoint of a route's Service: only the endpoints are resolved again.
    step(lambda: gw.endpoint_slice("web", name="web-more", addresses=("10.0.0.9",)), plans=0, builds=0)
    assert sorted(model.backends["default-web-80"]) == ["10.0.0.1:8080", "10.0.0.9:8080"]
    # One route changed: that route planned again.
    step(lambda: gw.route("r3", hostnames=["h3.example.com"], rules=[o.rule(o.backend_ref("web"),
                                                                            matches=[o.path_match("/three")])]),
         plans=1, builds=1)
    # A ReferenceGrant in the namespace one route's reference crosses into: that route alone.
    step(lambda: gw.add(o.reference_grant("to-api", ns="other", from_namespace="default")), plans=1, builds=1)
    assert model.routes["cross.example.com"].gateway is not None
    # An Ingress taking a host a route names (from another namespace): kept plans, the hosts' owners asked again.
    step(lambda: gw.ingress("owner", ns="other", host="h5.example.com", paths=(("/", "Prefix", "api", 80),)),
         plans=0, builds=1)
    assert model.routes["h5.example.com"].gateway is None
    # The Service of the routes' backends: the tables again, no route planned again.
    step(lambda: gw.service("web", ports=(("http", 80), ("admin", 81))), plans=0, builds=1)

"""The incremental model with Gateway API objects: equal to the full build after each change, and every Gateway
host and backend marked changed so that endpoint changes reach the pushed tables."""
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

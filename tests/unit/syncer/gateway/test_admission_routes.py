"""The admission webhook's decision on Gateway API objects (services/syncer/admission/gateway_review.py): what the
syncer's gateway model refuses is denied with its message, what it serves with a warning is allowed with it, and an
object that is not ours (no parent Gateway of our class) is allowed untouched. Each decision is compared with the
model's own problems for the same store."""
import pytest

from services.common.objects import object_key
from services.syncer.admission.review import Reviewer
from services.syncer.admission.wire import ReviewRequest, decide
from services.syncer.model.build import build_model


def reviewer_of(gw, **settings) -> Reviewer:
    reviewer = Reviewer(gw.settings.replace_flags(**settings))
    reviewer.replace_store(gw.store)
    return reviewer


def review(gw, obj, **settings):
    return reviewer_of(gw, **settings).review(obj)


def model_problems(gw, obj) -> tuple[list[str], list[str]]:
    """The full model's errors and warnings about `obj` once it is stored."""
    gw.add(obj)
    model = build_model(gw.store, settings=gw.settings)
    del gw.store[object_key(obj)]
    ref = f"{obj['kind']} {obj['metadata']['namespace']}/{obj['metadata']['name']}"
    return ([p.message for p in model.problems if p.object == ref and p.is_error],
            [p.message for p in model.problems if p.object == ref and not p.is_error])


@pytest.fixture
def shop(gw):
    """A Gateway of our class for *.example.com, and a route already serving a.example.com."""
    o = gw.objects
    gw.gateway(o.listener(hostname="*.example.com"))
    gw.route("first", hostnames=["a.example.com"], rules=[o.rule(o.backend_ref("web"))])
    return gw


def test_a_route_the_model_serves_is_allowed_without_a_word(shop):
    o = shop.objects
    verdict = review(shop, o.http_route("new", hostnames=["b.example.com"], rules=[o.rule(o.backend_ref("web"))]))
    assert verdict.allowed and not verdict.warnings and not verdict.message


@pytest.mark.parametrize("rule_of", [
    lambda o: o.rule(o.backend_ref("web"), matches=[o.path_match("(unclosed", kind="RegularExpression")]),
    lambda o: o.rule(o.backend_ref("web"), matches=[o.path_match("/a", headers={"X-Bad\nName": "1"})]),
    lambda o: o.rule(o.backend_ref("web"), filters=[{"type": "RequestHeaderModifier", "requestHeaderModifier": {
        "set": [{"name": "Content-Length", "value": "0"}]}}]),
    lambda o: o.rule(o.backend_ref("web", weight=-1)),
], ids=["regex", "header-name", "framing-header", "weight"])
def test_a_field_the_model_refuses_denies_the_route_with_the_models_message(shop, rule_of):
    o = shop.objects
    route = o.http_route("bad", hostnames=["b.example.com"], rules=[rule_of(o)])
    verdict = review(shop, route)
    errors, _ = model_problems(shop, route)
    assert not verdict.allowed and errors and list(verdict.errors) == errors
    assert verdict.message == "\n".join(errors)


def test_a_route_that_cannot_attach_to_our_gateway_is_denied_with_the_spec_reason(shop):
    o = shop.objects
    outside = o.http_route("outside", hostnames=["shop.other.org"], rules=[o.rule(o.backend_ref("web"))])
    verdict = review(shop, outside)
    assert not verdict.allowed and "NoMatchingListenerHostname" in verdict.message
    other_ns = o.http_route("tenant", ns="team-b", parents=[{"name": "gw", "namespace": "default"}],
                            hostnames=["b.example.com"], rules=[o.rule(o.backend_ref("web"))])
    verdict = review(shop, other_ns)
    assert not verdict.allowed and "NotAllowedByListeners" in verdict.message
    assert list(verdict.errors) == model_problems(shop, other_ns)[0]


def test_what_the_model_serves_with_a_warning_is_allowed_with_that_warning(shop):
    o = shop.objects
    route = o.http_route("lenient", hostnames=["b.example.com"], rules=[
        o.rule(o.backend_ref("missing")),
        o.rule(o.backend_ref("web"), matches=[o.path_match("/x")], filters=[{"type": "ExtensionRef"}])])
    verdict = review(shop, route)
    _, warnings = model_problems(shop, route)
    assert verdict.allowed and warnings and sorted(verdict.warnings) == sorted(warnings)
    assert any("missing not found" in w for w in verdict.warnings)
    assert any("ExtensionRef is not supported" in w for w in verdict.warnings)


def test_a_host_an_ingress_of_another_namespace_owns_is_a_warning(shop):
    o = shop.objects
    shop.ingress_class()
    shop.app("owner", ns="team-b", host="b.example.com")
    verdict = review(shop, o.http_route("taker", hostnames=["b.example.com"], rules=[o.rule(o.backend_ref("web"))]))
    assert verdict.allowed and any("belongs to namespace team-b" in w for w in verdict.warnings), verdict


@pytest.mark.parametrize("parents", [[{"name": "elsewhere"}], [{"name": "gw", "namespace": "missing"}]],
                         ids=["no-such-gateway", "other-namespace"])
def test_a_route_without_a_parent_of_ours_is_allowed_untouched(shop, parents):
    o = shop.objects
    route = o.http_route("foreign", parents=parents, rules=[o.rule(o.backend_ref("web"), matches=[
        o.path_match("(unclosed", kind="RegularExpression")])])
    verdict = review(shop, route)
    assert verdict.allowed and not verdict.warnings and not verdict.message


def test_a_route_on_a_gateway_of_another_class_is_allowed_untouched(shop):
    o = shop.objects
    shop.add(o.gateway_class("other", controller="example.com/other"))
    shop.add(o.gateway("theirs", class_name="other"))
    route = o.http_route("foreign", parents=[{"name": "theirs"}], rules=[o.rule(o.backend_ref("web", weight=-1))])
    assert review(shop, route).allowed


def test_a_gateway_with_a_listener_the_model_does_not_serve_is_denied(shop):
    o = shop.objects
    gateway = o.gateway("edge", listeners=[o.listener(), o.listener("udp", protocol="UDP")])
    verdict = review(shop, gateway)
    assert not verdict.allowed and "UnsupportedProtocol" in verdict.message
    assert list(verdict.errors) == model_problems(shop, gateway)[0]
    assert review(shop, o.gateway("edge", class_name="someone-else",
                                  listeners=[o.listener("udp", protocol="UDP")])).allowed


def test_a_grpc_route_is_judged_as_the_model_judges_it(shop):
    o = shop.objects
    bad = o.grpc_route("calls", hostnames=["grpc.example.com"], rules=[
        {"matches": [o.grpc_method("not a service!", "Say")], "backendRefs": [o.backend_ref("web")]}])
    verdict = review(shop, bad)
    assert not verdict.allowed and list(verdict.errors) == model_problems(shop, bad)[0]


def test_a_tls_host_an_older_route_passes_through_is_a_warning(gw):
    o = gw.objects
    gw.gateway(o.listener("tls", passthrough=True))
    gw.add(o.tls_route("older", o.backend_ref("web", port=443), hostnames=["secure.example.com"],
                       created=gw.timestamp()))
    settings = {"enable_ssl_passthrough": True}
    gw.settings = gw.settings.replace_flags(**settings)
    newer = o.tls_route("newer", o.backend_ref("web", port=443), hostnames=["secure.example.com"])
    verdict = review(gw, newer)
    assert verdict.allowed and any("already passed through for TLSRoute default/older" in w
                                   for w in verdict.warnings), verdict


def test_an_update_meets_the_other_routes_not_its_own_stored_version(shop):
    o = shop.objects
    stored = shop.store["HTTPRoute/default/first"]
    changed = {**stored, "spec": {**stored["spec"], "rules": [o.rule(o.backend_ref("web", weight=-1))]}}
    verdict = reviewer_of(shop).review(changed, operation="UPDATE")
    assert not verdict.allowed and "weight -1" in verdict.message


def test_the_wire_sends_routes_and_gateways_to_the_review_and_lets_grants_through(shop):
    o = shop.objects
    reviewer = reviewer_of(shop)
    bad = o.http_route("bad", hostnames=["b.example.com"], rules=[o.rule(o.backend_ref("web", weight=-1))])

    def request(kind: str, obj) -> ReviewRequest:
        return ReviewRequest(api_version="admission.k8s.io/v1", uid="1", operation="CREATE",
                             group="gateway.networking.k8s.io", kind=kind, object=obj)
    assert not decide(request("HTTPRoute", bad), lambda obj, op: reviewer.review(obj, operation=op)).allowed
    grant = o.reference_grant("any", ns="default", from_namespace="team-b")
    assert decide(request("ReferenceGrant", grant), lambda obj, op: reviewer.review(obj, operation=op)).allowed


def test_a_route_review_plans_only_its_neighbours(shop):
    """The routes sharing no host name with the reviewed one are not planned: counted through the index."""
    o = shop.objects
    for i in range(50):
        shop.route(f"far{i}", hostnames=[f"far{i}.example.com"], rules=[o.rule(o.backend_ref("web"))])
    shop.route("wild", hostnames=["*.example.com"], rules=[o.rule(o.backend_ref("web"))])
    shop.route("hostless", rules=[o.rule(o.backend_ref("web"))])
    reviewer = reviewer_of(shop)
    index = reviewer._gateway  # noqa: SLF001 - the neighbours a review plans
    found = index.neighbours(["a.example.com"], [("default", "gw")])
    assert {name for _, _, name in found} == {"first", "wild", "hostless"}
    assert {name for _, _, name in index.neighbours(["*.example.com"], [])} >= {"first", "far7", "wild"}

"""An HTTPRoute rule's retry and timeouts (budgets.py) and its backends' appProtocol (backend_protocols.py), from the
model's side: what is table data, what makes a location profile, what is refused or warned."""
import pytest

from services.syncer.model.gateway.budgets import milliseconds


def retry_route(gw, retry: dict | None = None, timeouts: dict | None = None, service: str = "web") -> None:
    o = gw.objects
    gw.gateway(o.listener(hostname="app.example.com"))
    found = o.rule(o.backend_ref(service), timeouts=timeouts)
    gw.route("r", rules=[{**found, "retry": retry} if retry is not None else found])


@pytest.mark.parametrize("text, ms", [("500ms", 500), ("1h30m", 5_400_000), ("2s250ms", 2_250), ("0s", 0)])
def test_durations_in_milliseconds(text, ms):
    assert milliseconds(text) == ms


def test_codes_nginx_cannot_retry_are_warned_and_backoff_is_not_honoured(gw):
    retry_route(gw, retry={"codes": [500, 501, 500], "backoff": "100ms"})
    model = gw.build()
    [action] = gw.gateway_of(model, "app.example.com")["actions"]
    assert action["budget"] == {"attempts": 2}  # retry without attempts: two, as ingress-nginx's three tries
    [profile] = [p for p in model.config.profiles if p.name == action["profile"]]
    assert ("proxy_next_upstream", "error timeout http_500") in profile.directives
    assert gw.warnings(model) == [
        "warning: HTTPRoute default/r: spec.rules[0].retry.codes: nginx cannot retry an answer 501; it is passed to "
        "the client (retried: 403, 404, 429, 500, 502, 503, 504)",
        "warning: HTTPRoute default/r: spec.rules[0].retry.backoff: not honoured, nginx retries at once (its balancer "
        "cannot wait)"]


@pytest.mark.parametrize("retry, timeouts, problem", [
    ({"attempts": 0}, None, "spec.rules[0].retry: attempts 0 must be 1-20"),
    ({"codes": [200]}, None, "spec.rules[0].retry.codes: 200 must be a status code 400-599"),
    (None, {"request": "1s", "backendRequest": "2s"},
     "spec.rules[0].timeouts: backendRequest must be no longer than request, which covers it"),
    (None, {"request": "soon"}, "spec.rules[0].timeouts.request: duration 'soon' must be like 10s, 500ms or 1h30m"),
])
def test_bad_retry_or_timeouts_refuse_the_route(gw, retry, timeouts, problem):
    retry_route(gw, retry=retry, timeouts=timeouts)
    [rejection] = gw.rejections(gw.build())
    assert problem in rejection


def test_zero_timeouts_leave_nginx_defaults(gw):
    retry_route(gw, timeouts={"request": "0s", "backendRequest": "0s"})
    [action] = gw.gateway_of(gw.build(), "app.example.com")["actions"]
    assert "budget" not in action and action["profile"] == "default"


def app_protocol_service(gw, name: str, app_protocol: str | None) -> None:
    service = gw.service(name)
    if app_protocol is not None:
        service["spec"]["ports"][0]["appProtocol"] = app_protocol
    gw.endpoint_slice(name, addresses=("10.0.0.2",))


@pytest.mark.parametrize("app_protocol, scheme", [("kubernetes.io/h2c", "grpc"), ("kubernetes.io/wss", "https"),
                                                  ("kubernetes.io/ws", "http"), (None, "http")])
def test_app_protocol_picks_how_the_rule_speaks_to_its_backends(gw, app_protocol, scheme):
    app_protocol_service(gw, "named", app_protocol)
    retry_route(gw, service="named")
    model = gw.build()
    [action] = gw.gateway_of(model, "app.example.com")["actions"]
    profiles = {p.name: p for p in model.config.profiles}
    assert profiles[action["profile"]].backend_scheme == scheme


def test_backends_of_one_rule_speaking_differently_get_http_and_a_warning(gw):
    app_protocol_service(gw, "h2c", "kubernetes.io/h2c")
    o = gw.objects
    gw.gateway(o.listener(hostname="app.example.com"))
    gw.route("mixed", rules=[o.rule(o.backend_ref("h2c"), o.backend_ref("web"))])
    model = gw.build()
    [action] = gw.gateway_of(model, "app.example.com")["actions"]
    assert action["profile"] == "default"
    assert gw.warnings(model) == [
        "warning: HTTPRoute default/mixed: spec.rules[0]: its backends' ports name appProtocols spoken differently "
        "(kubernetes.io/h2c, none); a rule speaks one protocol, HTTP/1.1 to all of them: give each protocol a rule of "
        "its own"]

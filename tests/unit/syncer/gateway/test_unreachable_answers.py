"""HTTPRouteRetryConnectionError from the model's and the template's side: a rule with `retry` uses a profile whose
nginx errors (500, 502: no try reached a backend's answer) answer 503; other rules, and Ingresses, keep nginx's 502.
The answers themselves: tests/e2e/gateway/test_backend_protocols_retries_timeouts.py."""
from dataclasses import replace

from services.nginxconf.render import render

ERROR_PAGE = "error_page 500 502 = @pyngress_backend_unreachable;"


def location(conf: str, profile: str) -> str:
    start = conf.index(f"location @profile_{profile} {{")
    return conf[start:conf.index("\n        }\n", start)]


def test_only_a_rule_with_retry_answers_503_for_nginx_own_errors(gw):
    o = gw.objects
    gw.gateway(o.listener(hostname="app.example.com"))
    gw.route("r", rules=[{**o.rule(o.backend_ref("web"), matches=[o.path_match("/retried")]), "retry": {"attempts": 3}},
                         o.rule(o.backend_ref("web"), matches=[o.path_match("/plain")],
                                timeouts={"backendRequest": "1s"})])
    model = gw.build()
    actions = {a["path"]: a for a in gw.gateway_of(model, "app.example.com")["actions"]}
    assert actions["/plain"]["profile"] == "default"
    [retried] = [p for p in model.config.profiles if p.name == actions["/retried"]["profile"]]
    assert retried.unreachable_answers_503
    conf = render(model.config)
    assert ERROR_PAGE in location(conf, retried.name) and ERROR_PAGE not in location(conf, "default")
    assert "location @pyngress_backend_unreachable {" in conf
    # custom-http-errors intercept a backend's answers: there the error pages apply, never a backend's 502 as 503
    intercepting = replace(model.config, server=replace(model.config.server, custom_http_errors=(404,)))
    assert ERROR_PAGE not in location(render(intercepting), retried.name)


def test_an_ingress_keeps_nginx_502(gw):
    gw.ingress_class()
    gw.ingress("legacy", host="app.example.com", paths=(("/", "Prefix", "web", 80),))
    conf = render(gw.build().config)
    assert ERROR_PAGE not in conf and "@pyngress_backend_unreachable" not in conf

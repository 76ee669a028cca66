"""The admission webhook on Gateway API objects through the whole controller, called by the API test server as
kube-apiserver calls it, with the ValidatingWebhookConfiguration of `pyngress manifests --validating-webhook` (which
registers the routes and Gateways): a route or Gateway the syncer's gateway model would refuse is not stored and the
client reads why; one it serves with a warning is stored and kubectl prints the warning; one of another controller's
Gateway is stored untouched."""
from __future__ import annotations

import json
from typing import Any, Iterator

import pytest
from kubernetes import client

from tests.e2e.gateway.conftest import GatewayStage
from tests.e2e.gateway.api_stage import GROUP, PLURALS, VERSION, GatewayApiCluster
from tests.e2e.ingress.test_admission_webhook import DENIED, Webhook
from tests.kube_api import KubeApiServer
from tests.support import gateway_objects as gw
from tests.support.controller import Controller, tcp_ports_listened_by
from tests.support.net import wait_for

HOSTS = "*.routes.example.com"


class RouteWebhook(Webhook):
    def create(self, obj: dict[str, Any]) -> Any:
        """Create a Gateway API object through the API: the raw response (its Warning headers), or ApiException."""
        return client.CustomObjectsApi(self.api_client).create_namespaced_custom_object(
            GROUP, VERSION, obj["metadata"]["namespace"], PLURALS[obj["kind"]], obj, _preload_content=False)


@pytest.fixture(scope="module")
def webhook(tmp_path_factory, echo) -> Iterator[tuple[RouteWebhook, Controller, GatewayStage]]:
    with KubeApiServer() as api:
        setup = RouteWebhook(api, tmp_path_factory.mktemp("webhook-routes"))
        setup.install()
        cluster = GatewayApiCluster(setup.api_client)
        controller = setup.controller().start()
        try:
            wait_for(lambda: setup.port in tcp_ports_listened_by(controller.pids()), 30,
                     what=f"the webhook listening on {setup.port}")
            stage = GatewayStage(controller, cluster, echo)
            cluster.apply(*stage.backend("ROUTED", "routed"), gw.gateway_class(),
                          gw.gateway("gw", listeners=[gw.listener(hostname=HOSTS)]))
            # Served, so the watcher has published the Gateway: the webhook knows it from the same store.
            setup.create(route("probe", "probe.routes.example.com"))
            stage.expect_answer("probe.routes.example.com", "/", "ROUTED")
            yield setup, controller, stage
        finally:
            controller.stop()
            setup.api_client.close()


def route(name: str, host: str, *rules: dict, parent: str = "gw") -> dict[str, Any]:
    return gw.http_route(name, parents=[{"name": parent}], hostnames=[host],
                         rules=list(rules) or [gw.rule(gw.backend_ref("routed"))])


def refusal(setup: RouteWebhook, obj: dict[str, Any]) -> tuple[int, str]:
    with pytest.raises(client.ApiException) as refused:
        setup.create(obj)
    return refused.value.status, json.loads(refused.value.body)["message"]


def stored(setup: RouteWebhook, obj: dict[str, Any]) -> bool:
    try:
        client.CustomObjectsApi(setup.api_client).get_namespaced_custom_object(
            GROUP, VERSION, obj["metadata"]["namespace"], PLURALS[obj["kind"]], obj["metadata"]["name"])
    except client.ApiException as err:
        if err.status == 404:
            return False
        raise
    return True


def test_a_route_the_model_serves_is_stored_and_served(webhook):
    setup, _, stage = webhook
    calls = setup.api.admission_calls
    assert setup.create(route("allowed", "allowed.routes.example.com")).status == 201
    assert setup.api.admission_calls == calls + 1  # the generated configuration names HTTPRoutes
    stage.expect_answer("allowed.routes.example.com", "/", "ROUTED")


def test_a_route_with_a_field_the_model_refuses_is_denied_with_its_message(webhook):
    setup, _, _ = webhook
    bad = route("regex", "regex.routes.example.com",
                gw.rule(gw.backend_ref("routed"), matches=[gw.path_match("(unclosed", kind="RegularExpression")]))
    status, message = refusal(setup, bad)
    assert status == 400 and message.startswith(DENIED), message
    assert "not a valid regular expression" in message and "the route is not served" in message
    assert not stored(setup, bad)


def test_a_route_outside_its_listeners_hostname_is_denied_with_the_spec_reason(webhook):
    setup, _, _ = webhook
    status, message = refusal(setup, route("outside", "shop.elsewhere.org"))
    assert status == 400 and "NoMatchingListenerHostname" in message, message


def test_a_route_served_with_a_warning_is_stored_and_kubectl_prints_the_warning(webhook):
    setup, _, stage = webhook
    lenient = route("lenient", "lenient.routes.example.com",
                    gw.rule(gw.backend_ref("missing"), matches=[gw.path_match("/gone")]),
                    gw.rule(gw.backend_ref("routed")))
    response = setup.create(lenient)
    assert response.status == 201
    warnings = response.headers.getlist("Warning")
    assert any("Service default/missing not found" in w for w in warnings), warnings
    stage.expect_answer("lenient.routes.example.com", "/", "ROUTED")
    stage.expect_answer("lenient.routes.example.com", "/gone", 500)


def test_a_route_of_another_controllers_gateway_is_stored_untouched(webhook):
    setup, _, _ = webhook
    foreign = route("foreign", "foreign.example.org",
                    gw.rule(gw.backend_ref("routed"), matches=[gw.path_match("(unclosed", kind="RegularExpression")]),
                    parent="not-ours")
    response = setup.create(foreign)
    assert response.status == 201 and response.headers.getlist("Warning") == []


def test_a_gateway_with_a_listener_the_model_does_not_serve_is_denied(webhook):
    setup, _, _ = webhook
    edge = gw.gateway("edge", listeners=[gw.listener("udp", protocol="UDP")])
    status, message = refusal(setup, edge)
    assert status == 400 and message.startswith(DENIED) and "UnsupportedProtocol" in message, message
    assert not stored(setup, edge)

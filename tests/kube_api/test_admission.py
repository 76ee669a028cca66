"""The test API server calls validating admission webhooks as kube-apiserver does (tests/kube_api/admission.py):
a small HTTPS webhook here decides by the Ingress's annotations and records what it was sent."""
from __future__ import annotations

import base64
import json
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator

import pytest
from kubernetes import client

from tests.e2e.tls.pki import TestCA
from tests.kube_api import KubeApiServer
from tests.support import k8s as factories

HOOK = "check.example.com"


class FakeWebhook:
    """Denies an Ingress annotated `deny`, warns for one annotated `warn`, answers a wrong uid for `wrong-uid`,
    takes `slow` seconds to answer."""

    def __init__(self, ca: TestCA) -> None:
        pair = ca.issue("hook.default.svc", ("hook.default.svc",))
        (ca.directory / "hook.crt").write_text(pair.cert)
        (ca.directory / "hook.key").write_text(pair.key)
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(ca.directory / "hook.crt", ca.directory / "hook.key")
        self.reviews: list[dict[str, Any]] = []
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                hook.reviews.append({"path": self.path, **review})
                request = review["request"]
                annotations = (request["object"]["metadata"].get("annotations") or {})
                time.sleep(float(annotations.get("slow", 0)))
                response: dict[str, Any] = {"uid": "nope" if "wrong-uid" in annotations else request["uid"],
                                            "allowed": "deny" not in annotations}
                if "deny" in annotations:
                    response["status"] = {"code": 403, "reason": "Forbidden", "message": annotations["deny"]}
                if "warn" in annotations:
                    response["warnings"] = [annotations["warn"], "second"]
                body = json.dumps({"apiVersion": review["apiVersion"], "kind": "AdmissionReview",
                                   "response": response}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def webhook_configuration(ca_pem: str, **overrides: Any) -> dict[str, Any]:
    webhook = {"name": HOOK, "admissionReviewVersions": ["v1"], "sideEffects": "None", "failurePolicy": "Fail",
               "clientConfig": {"service": {"namespace": "default", "name": "hook", "path": "/networking/v1/ingresses"},
                                "caBundle": base64.b64encode(ca_pem.encode()).decode()},
               "rules": [{"apiGroups": ["networking.k8s.io"], "apiVersions": ["v1"],
                          "operations": ["CREATE", "UPDATE"], "resources": ["ingresses"]}], **overrides}
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "check"}, "webhooks": [webhook]}


@pytest.fixture
def hook(tmp_path) -> Iterator[tuple[FakeWebhook, TestCA]]:
    ca = TestCA(tmp_path)
    fake = FakeWebhook(ca)
    yield fake, ca
    fake.server.shutdown()


@pytest.fixture
def cluster(api: KubeApiServer, k8s, hook) -> Any:
    """The official clients, with the webhook's Service and an EndpointSlice pointing it at the fake."""
    fake, _ = hook
    k8s.core.create_namespaced_service("default", {"metadata": {"name": "hook"}, "spec": {
        "ports": [{"name": "https", "port": 443, "targetPort": "webhook"}]}})
    k8s.discovery.create_namespaced_endpoint_slice("default", factories.endpoint_slice(
        "hook", ["127.0.0.1"], fake.port, port_name="https"))
    return k8s


def configure(clients: Any, ca: TestCA, **overrides: Any) -> None:
    client.AdmissionregistrationV1Api(clients.api_client).create_validating_webhook_configuration(
        webhook_configuration(ca.cert_path.read_text(), **overrides))


def create_ingress(clients: Any, annotations: dict[str, str] | None = None, name: str = "web") -> Any:
    body = factories.ingress(name, [factories.rule("a.example.com", ("/", "Prefix", "web", 80))], annotations=annotations)
    return clients.networking.create_namespaced_ingress("default", body, _preload_content=False)


def test_a_denied_ingress_is_not_stored_and_the_client_gets_the_webhooks_message(api, cluster, hook):
    fake, ca = hook
    configure(cluster, ca)
    with pytest.raises(client.ApiException) as refused:
        create_ingress(cluster, {"deny": "the host is taken"})
    assert refused.value.status == 403
    status = json.loads(refused.value.body)
    assert status["message"] == f'admission webhook "{HOOK}" denied the request: the host is taken'
    assert api.objects("Ingress") == []
    [review] = fake.reviews
    assert review["path"] == "/networking/v1/ingresses" and review["apiVersion"] == "admission.k8s.io/v1"
    request = review["request"]
    assert request["operation"] == "CREATE" and request["kind"]["kind"] == "Ingress"
    assert request["object"]["metadata"]["name"] == "web" and request["dryRun"] is False


def test_an_allowed_ingress_is_stored_and_its_warnings_reach_the_client_as_headers(api, cluster, hook):
    _, ca = hook
    configure(cluster, ca)
    response = create_ingress(cluster, {"warn": 'annotation "x" ignored'})
    assert response.status == 201
    assert response.headers.getlist("Warning") == ['299 - "annotation \\"x\\" ignored"', '299 - "second"']
    assert [o["metadata"]["name"] for o in api.objects("Ingress")] == ["web"]


def test_updates_are_reviewed_with_the_old_object_and_status_writes_are_not(api, cluster, hook):
    fake, ca = hook
    configure(cluster, ca)
    create_ingress(cluster)
    networking = cluster.networking
    with pytest.raises(client.ApiException) as refused:
        networking.patch_namespaced_ingress("web", "default", {"metadata": {"annotations": {"deny": "no"}}})
    assert refused.value.status == 403
    assert fake.reviews[-1]["request"]["operation"] == "UPDATE"
    assert fake.reviews[-1]["request"]["oldObject"]["metadata"]["name"] == "web"
    calls = api.admission_calls
    networking.patch_namespaced_ingress_status("web", "default", {"status": {"loadBalancer": {}}})
    assert api.admission_calls == calls


def test_a_dry_run_is_reviewed_and_not_stored(api, cluster, hook):
    fake, ca = hook
    configure(cluster, ca)
    body = factories.ingress("web", [factories.rule("a.example.com", ("/", "Prefix", "web", 80))])
    cluster.networking.create_namespaced_ingress("default", body, dry_run="All")
    assert fake.reviews[-1]["request"]["dryRun"] is True and api.objects("Ingress") == []


def test_other_kinds_and_unselected_objects_are_not_sent(api, cluster, hook):
    fake, ca = hook
    configure(cluster, ca, objectSelector={"matchLabels": {"checked": "yes"}})
    create_ingress(cluster, {"deny": "unseen"})
    cluster.core.create_namespaced_config_map("default", {"metadata": {"name": "c"}})
    assert fake.reviews == [] and len(api.objects("Ingress")) == 1


@pytest.mark.parametrize("policy,created", [("Fail", False), ("Ignore", True)])
def test_an_unreachable_webhook_follows_the_failure_policy(api, cluster, hook, policy, created):
    _, ca = hook
    configure(cluster, ca, failurePolicy=policy, clientConfig={"service": {"namespace": "default", "name": "gone"},
                                                              "caBundle": ""})
    if created:
        create_ingress(cluster)
    else:
        with pytest.raises(client.ApiException) as failed:
            create_ingress(cluster)
        assert failed.value.status == 500
        assert f'failed calling webhook "{HOOK}": service "gone" not found' in json.loads(failed.value.body)["message"]
    assert len(api.objects("Ingress")) == int(created)


def test_a_certificate_the_ca_bundle_does_not_vouch_for_fails_the_call(api, cluster, tmp_path):
    (tmp_path / "other").mkdir()
    other = TestCA(tmp_path / "other")
    client.AdmissionregistrationV1Api(cluster.api_client).create_validating_webhook_configuration(
        webhook_configuration(other.cert_path.read_text()))
    with pytest.raises(client.ApiException) as failed:
        create_ingress(cluster)
    assert failed.value.status == 500 and "CERTIFICATE_VERIFY_FAILED" in json.loads(failed.value.body)["message"]


def test_an_answer_for_another_uid_is_a_failed_call(api, cluster, hook):
    _, ca = hook
    configure(cluster, ca)
    with pytest.raises(client.ApiException) as failed:
        create_ingress(cluster, {"wrong-uid": ""})
    assert failed.value.status == 500 and "expected response.uid=" in json.loads(failed.value.body)["message"]


def test_a_webhook_slower_than_its_timeout_is_a_failed_call(api, cluster, hook):
    _, ca = hook
    configure(cluster, ca, timeoutSeconds=1)
    with pytest.raises(client.ApiException) as failed:
        create_ingress(cluster, {"slow": "3"})
    assert failed.value.status == 500 and "context deadline exceeded (1s)" in json.loads(failed.value.body)["message"]
    assert api.objects("Ingress") == []

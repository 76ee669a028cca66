"""The validating admission webhook through the whole controller, called by the API test server as kube-apiserver
calls it: the ValidatingWebhookConfiguration and Service of `pyngress manifests --validating-webhook` applied,
the certificate and caBundle made by `pyngress webhook-certificate` (what the manifests' Job runs), the Secret's
files handed to `pyngress up --validating-webhook` as the kubelet would mount them."""
from __future__ import annotations

import base64
import http.client
import json
import os
import socket
import ssl
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest
from kubernetes import client

from services.tools import install_manifests as manifests
from tests.e2e.ingress.scenarios import Stage
from tests.e2e.tls.pki import TestCA
from tests.kube_api import KubeApiServer
from tests.support import k8s
from tests.support.controller import VENV_BIN, Controller, tcp_ports_listened_by
from tests.support.cve_corpus import LEAK_DIR, PAYLOADS, Payload
from tests.support.kube_cluster import ApiCluster
from tests.support.net import free_port, wait_for

NAMESPACE = "pyngress"
OPTIONS = manifests.Options(namespace=NAMESPACE, validating_webhook=True)
SERVER_NAME = f"{manifests.ADMISSION_SERVICE}.{NAMESPACE}.svc"
DENIED = f'admission webhook "{manifests.WEBHOOK_NAME}" denied the request: '
PREFIX = "nginx.ingress.kubernetes.io"
# IngressNightmare: the annotation injections of CVE-2025-1097 (auth-tls-match-cn), CVE-2025-1098 (mirror-target)
# and CVE-2025-24514 (auth-url), and the ssl_engine load of CVE-2025-1974.
NIGHTMARE = [p for p in PAYLOADS if p.advisory in ("CVE-2025-1097", "CVE-2025-24514", "CVE-2025-1974")
             or p.advisory == "CVE-2025-1098" and p.what.startswith("mirror-target")]


def generated(kind: str, name: str | None = None) -> dict[str, Any]:
    [found] = [d for d in manifests.manifests(OPTIONS)
               if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    return found


class Webhook:
    """The controller with its webhook, and the API server that calls it."""

    def __init__(self, api: KubeApiServer, workdir: Path) -> None:
        self.api, self.workdir = api, workdir
        self.api_client = client.ApiClient(api.configuration())
        self.cluster = ApiCluster(self.api_client)
        self.kubeconfig = api.write_kubeconfig(workdir / "kubeconfig")
        self.port = free_port()
        self.cert_dir = workdir / "certificates"
        self.cert_dir.mkdir()

    def install(self) -> None:
        """The generated configuration and Service, an EndpointSlice for the Service pointing at this host (the
        endpoints controller's work), then the certificate Job's command."""
        self.cluster.apply(k8s.ingress_class("nginx"), generated("Service", manifests.ADMISSION_SERVICE))
        [port] = generated("Service", manifests.ADMISSION_SERVICE)["spec"]["ports"]
        self.cluster.apply(k8s.endpoint_slice(manifests.ADMISSION_SERVICE, ["127.0.0.1"], self.port,
                                              namespace=NAMESPACE, port_name=port["name"]))
        self.admission_api.create_validating_webhook_configuration(generated("ValidatingWebhookConfiguration"))
        job = generated("Job")["spec"]["template"]["spec"]["containers"][0]
        args = [arg.replace("$(POD_NAMESPACE)", NAMESPACE) for arg in job["args"]]
        subprocess.run([str(VENV_BIN / "pyngress"), "webhook-certificate", *args, f"--kubeconfig={self.kubeconfig}"],
                       check=True, capture_output=True, timeout=60)
        secret = self.cluster.get({"kind": "Secret", "metadata": {"name": manifests.ADMISSION,
                                                                  "namespace": NAMESPACE}})
        assert secret is not None
        for key in ("cert", "key"):
            self.write(key, base64.b64decode(secret["data"][key]).decode())
        (self.cert_dir / "ca.crt").write_text(base64.b64decode(secret["data"]["ca"]).decode())

    @property
    def admission_api(self) -> client.AdmissionregistrationV1Api:
        return client.AdmissionregistrationV1Api(self.api_client)

    def write(self, key: str, text: str) -> None:
        """As the kubelet updates a Secret volume: the new file in place at once."""
        tmp = self.cert_dir / f".{key}.new"
        tmp.write_text(text)
        os.replace(tmp, self.cert_dir / key)

    def controller(self) -> Controller:
        return Controller(self.workdir, [f"--kubeconfig={self.kubeconfig}"], [
            f"--validating-webhook=127.0.0.1:{self.port}", f"--validating-webhook-certificate={self.cert_dir}/cert",
            f"--validating-webhook-key={self.cert_dir}/key", "--validating-webhook-processes=2"])

    def create(self, obj: dict[str, Any]) -> Any:
        """Create through the API: the raw response (its Warning headers), or ApiException when refused."""
        return client.NetworkingV1Api(self.api_client).create_namespaced_ingress(
            obj["metadata"]["namespace"], obj, _preload_content=False)


@pytest.fixture(scope="module")
def webhook(tmp_path_factory, echo) -> Iterator[tuple[Webhook, Controller, Stage]]:
    with KubeApiServer() as api:
        setup = Webhook(api, tmp_path_factory.mktemp("webhook"))
        setup.install()
        controller = setup.controller().start()
        try:
            wait_for(lambda: setup.port in tcp_ports_listened_by(controller.pids()), 30,
                     what=f"the webhook listening on {setup.port}")
            stage = Stage(controller, setup.cluster, echo)
            setup.cluster.apply(*stage.backend("ADMITTED", "admitted"))
            yield setup, controller, stage
        finally:
            controller.stop()
            setup.api_client.close()


def ingress(name: str, host: str, annotations: dict[str, str] | None = None, path: str = "/") -> dict[str, Any]:
    return k8s.ingress(name, [k8s.rule(host, (path, "Prefix", "admitted", 80))], annotations=annotations)


def refusal(webhook: Webhook, obj: dict[str, Any]) -> tuple[int, str]:
    with pytest.raises(client.ApiException) as refused:
        webhook.create(obj)
    return refused.value.status, json.loads(refused.value.body)["message"]


def test_an_allowed_ingress_is_stored_and_served(webhook):
    setup, _, stage = webhook
    calls = setup.api.admission_calls
    assert setup.create(ingress("allowed", "allowed.example.com")).status == 201
    assert setup.api.admission_calls == calls + 1
    stage.expect("allowed.example.com", "/", "ADMITTED")


def test_a_denied_ingress_is_not_stored_and_the_client_gets_the_message(webhook):
    setup, _, _ = webhook
    status, message = refusal(setup, ingress("snippet", "snippet.example.com",
                                             {f"{PREFIX}/configuration-snippet": "return 200;"}))
    assert status == 400 and message.startswith(DENIED) and "configuration-snippet" in message
    assert setup.cluster.get(ingress("snippet", "snippet.example.com")) is None


def test_a_host_and_path_another_ingress_serves_is_denied_naming_it(webhook):
    setup, _, stage = webhook
    setup.create(ingress("first", "taken.example.com"))
    stage.expect("taken.example.com", "/", "ADMITTED")
    status, message = refusal(setup, ingress("second", "taken.example.com"))
    assert status == 400 and message.startswith(DENIED) and "default/first" in message, message


def test_an_ignored_value_is_allowed_with_a_warning_kubectl_prints(webhook):
    setup, _, stage = webhook
    response = setup.create(ingress("lenient", "lenient.example.com", {f"{PREFIX}/proxy-read-timeout": "50k"}))
    assert response.status == 201
    warnings = response.headers.getlist("Warning")
    assert any("proxy-read-timeout" in w and "50k" in w for w in warnings), warnings
    stage.expect("lenient.example.com", "/", "ADMITTED")


def test_an_ingress_of_another_class_is_allowed_untouched(webhook):
    setup, _, _ = webhook
    other = k8s.ingress("other-class", [k8s.rule("other.example.com", ("/", "Prefix", "admitted", 80))],
                        class_name="other", annotations={f"{PREFIX}/configuration-snippet": "return 200;"})
    response = setup.create(other)
    assert response.status == 201 and response.headers.getlist("Warning") == []


def test_two_webhook_processes_share_the_port(webhook):
    setup, controller, _ = webhook
    for pid in (controller.pid(f"webhook:webhook-{i}") for i in (0, 1)):
        assert setup.port in tcp_ports_listened_by([pid])  # SO_REUSEPORT: each its own socket


def test_the_certificate_job_run_again_changes_nothing(webhook):
    setup, _, _ = webhook
    job = generated("Job")["spec"]["template"]["spec"]["containers"][0]
    args = [arg.replace("$(POD_NAMESPACE)", NAMESPACE) for arg in job["args"]]
    again = subprocess.run([str(VENV_BIN / "pyngress"), "webhook-certificate", *args,
                            f"--kubeconfig={setup.kubeconfig}"], capture_output=True, text=True, timeout=60)
    assert again.returncode == 0 and "already trusts its CA" in again.stdout


def test_an_update_is_reviewed_too(webhook):
    setup, _, _ = webhook
    setup.create(ingress("updated", "updated.example.com"))
    with pytest.raises(client.ApiException) as refused:
        client.NetworkingV1Api(setup.api_client).patch_namespaced_ingress(
            "updated", "default", {"metadata": {"annotations": {f"{PREFIX}/server-snippet": "return 200;"}}})
    assert refused.value.status == 400 and DENIED in json.loads(refused.value.body)["message"]


# Where the shared objects a webhook may map come from: Python's, the venv's and the system's libraries.
LIBRARY_DIRS = tuple({sys.prefix, sys.base_prefix, os.path.realpath(sys.base_prefix), "/usr/lib/", "/lib/"})


def _mapped_files(pid: int) -> set[str]:
    return {line.split(maxsplit=5)[5] for line in Path(f"/proc/{pid}/maps").read_text().splitlines()
            if len(line.split(maxsplit=5)) == 6 and line.split(maxsplit=5)[5].startswith("/")}


def _open_files(pid: int) -> list[str]:
    """The files (not sockets, pipes or devices) the process holds open."""
    targets = [os.readlink(fd) for fd in Path(f"/proc/{pid}/fd").iterdir()]
    return [t for t in targets if t.startswith("/") and not t.startswith("/dev/")]


def _children(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/task/{pid}/children").read_text().split()


@pytest.mark.parametrize("payload", NIGHTMARE, ids=lambda p: p.id)
def test_ingress_nightmare_payloads_are_denied_and_nothing_is_loaded_or_written(webhook, payload: Payload):
    setup, controller, _ = webhook
    pid = controller.pid("webhook:webhook-0")
    obj = ingress("nightmare", "nightmare.example.com", dict(payload.annotations))
    status, message = refusal(setup, obj)
    assert status == 400 and message.startswith(DENIED), message
    assert setup.cluster.get(obj) is None
    # No shared object loaded but the libraries' own (PCRE checks regexes).
    assert [path for path in _mapped_files(pid) if not path.startswith(LIBRARY_DIRS)] == []
    assert _children(pid) == []  # no nginx -t, no process at all
    assert _open_files(pid) == []  # nothing written (nor read) from the review
    assert LEAK_DIR.encode() not in controller.nginx_conf()


def _post(port: int, body: bytes, ca: Path) -> tuple[int, bytes]:
    context = ssl.create_default_context(cafile=str(ca))
    connection = http.client.HTTPSConnection("127.0.0.1", port, timeout=10, context=context)
    connection.sock = context.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10),
                                          server_hostname=SERVER_NAME)
    try:
        connection.request("POST", "/networking/v1/ingresses", body=body,
                           headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


@pytest.mark.parametrize("body", [b"x" * (4 * 1024 * 1024), b"{not json"], ids=["4MiB", "not-json"])
def test_a_body_too_large_or_not_json_gets_400_and_nothing_else(webhook, body):
    setup, _, _ = webhook
    status, answer = _post(setup.port, body, setup.cert_dir / "ca.crt")
    assert status == 400 and b"allowed" not in answer


def _served_issuer(port: int) -> str:
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname=SERVER_NAME) as tls:
            der = tls.getpeercert(binary_form=True)
    assert der is not None
    pem = ssl.DER_cert_to_PEM_cert(der)
    out = subprocess.run(["openssl", "x509", "-noout", "-issuer"], input=pem.encode(), capture_output=True,
                         check=True)
    return out.stdout.decode()


def test_a_rotated_certificate_is_served_without_a_restart(webhook, tmp_path):
    """Last in the module: the certificate changes for every test after it. The CA changes too, so the caBundle
    holds both during the change, as a rotation that changes its CA must publish them."""
    setup, controller, stage = webhook
    pids = [controller.pid(f"webhook:webhook-{i}") for i in (0, 1)]
    rotated = TestCA(tmp_path)
    pair = rotated.issue(SERVER_NAME, (SERVER_NAME,))
    configuration = setup.admission_api.read_validating_webhook_configuration(manifests.ADMISSION)
    both = (setup.cert_dir / "ca.crt").read_bytes() + rotated.cert_path.read_bytes()
    configuration.webhooks[0].client_config.ca_bundle = base64.b64encode(both).decode()
    setup.admission_api.replace_validating_webhook_configuration(manifests.ADMISSION, configuration)
    setup.write("cert", pair.cert)
    setup.write("key", pair.key)
    # Every process serves it (each connection lands on either): ten new connections in a row.
    wait_for(lambda: all("pyngress test CA" in _served_issuer(setup.port) for _ in range(10)), 10,
             what="the rotated certificate served by every webhook process")
    assert setup.create(ingress("rotated", "rotated.example.com")).status == 201
    stage.expect("rotated.example.com", "/", "ADMITTED")
    assert [controller.pid(f"webhook:webhook-{i}") for i in (0, 1)] == pids

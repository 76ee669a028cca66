"""ingress-nginx's configuration-injection advisories against a running controller: every payload of
tests/support/cve_corpus.py applied at once, each in its own Ingress and host in the tenant's namespace
(and the ConfigMap ones in the controller's ConfigMap), beside another tenant's Ingress. The stand-in token
file must never be served, the other tenant keeps serving, and the nginx.conf in use reads nothing from the
payloads' directory."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import requests

from tests.e2e.ingress.scenarios import Stage
from tests.support import k8s
from tests.support.controller import start_manifests_controller
from tests.support.cve_corpus import FILE_DIRECTIVES, LEAK_CONTENT, LEAK_DIR, LEAK_FILE, PAYLOADS, Payload
from tests.support.nginx_conf_tree import parse, walk

TENANT = "tenant"
# Paths the payloads try to open, and the plain ones.
PROBES = ("/", "/leak/token", "/x", "/y", "/z", "/x/", "/leak")


def host_of(index: int) -> str:
    return f"corpus-{index}.tenant.example"


def payload_objects(index: int, payload: Payload) -> list[dict]:
    objects = payload.supporting_objects(TENANT)
    rule = k8s.rule(host_of(index), (payload.path or "/", "Prefix", "corpus", 80))
    objects.append(k8s.ingress(f"corpus-{index}", [rule], namespace=TENANT,
                               annotations=dict(payload.annotations), tls=payload.tls))
    return objects


@pytest.fixture(scope="module")
def leak_file():
    os.makedirs(LEAK_DIR, exist_ok=True)
    Path(LEAK_FILE).write_text(LEAK_CONTENT)
    os.chmod(LEAK_DIR, 0o755)
    os.chmod(LEAK_FILE, 0o644)  # readable by nginx's workers: only the configuration may keep it from them
    yield
    shutil.rmtree(LEAK_DIR, ignore_errors=True)


@pytest.fixture(scope="module")
def stage(tmp_path_factory, echo, leak_file):
    controller, cluster = start_manifests_controller(tmp_path_factory.mktemp("cve-corpus"),
                                                     ["--configmap=ingress/ingress-nginx-controller"])
    yield Stage(controller, cluster, echo)
    controller.stop()


# The payloads' hosts have no certificate (nginx serves its default one): what is checked is the body.
@pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")
def test_no_payload_serves_the_token_or_stops_another_tenant(stage: Stage) -> None:
    cluster = stage.cluster
    cluster.apply(*stage.backend("GOOD"))
    cluster.apply(k8s.ingress("good", [k8s.rule("good.example.com", ("/", "Prefix", "good", 80))]))
    stage.expect("good.example.com", "/", "GOOD")

    configmap: dict[str, str] = {}
    for payload in PAYLOADS:
        configmap.update(payload.configmap)
    cluster.apply({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "ingress-nginx-controller", "namespace": "ingress"}, "data": configmap})
    cluster.apply(*stage.backend("TENANT", service="corpus", namespace=TENANT))
    for index, payload in enumerate(PAYLOADS):
        cluster.apply(*payload_objects(index, payload))
    # Written last: once it serves, the controller has read every payload before it.
    cluster.apply(k8s.ingress("sentinel", [k8s.rule("sentinel.tenant.example", ("/", "Prefix", "corpus", 80))],
                              namespace=TENANT))
    stage.expect("sentinel.tenant.example", "/", "TENANT", timeout=30)

    assert stage.served_by("good.example.com", "/") == "GOOD"
    assert stage.controller.health().status_code == 200
    for index, payload in enumerate(PAYLOADS):
        for path in PROBES:
            for scheme in ("http", "https"):
                response = stage.controller.get(path, host_of(index)) if scheme == "http" else requests.get(
                    f"https://127.0.0.1:{stage.controller.https_port}{path}", headers={"Host": host_of(index)},
                    verify=False, timeout=5)
                assert LEAK_CONTENT not in response.text, f"{payload.id}: {scheme} {path} served the token"

    for _, directive in walk(parse(stage.controller.nginx_conf().decode())):
        if directive.name in FILE_DIRECTIVES:
            assert not any(LEAK_DIR in arg for arg in directive.args), directive
        assert directive.lua is None or LEAK_DIR not in directive.lua, directive.name

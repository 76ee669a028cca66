"""`pyngress lint` and `pyngress convert` read a cluster with --kubeconfig through one reader (services/tools/inputs.py):
lint lists the Gateway API kinds too and judges a route there, convert reads the Ingresses; the API test server
serves the cluster."""
from __future__ import annotations

import subprocess
from pathlib import Path

import yaml
from kubernetes import client

from tests.e2e.gateway.api_stage import GatewayApiCluster
from tests.kube_api import KubeApiServer
from tests.support import gateway_objects as gw
from tests.support import k8s
from tests.support.controller import VENV_BIN

ROOT = Path(__file__).resolve().parents[3]


def pyngress(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(VENV_BIN / "pyngress"), *args], capture_output=True, text=True, timeout=60, cwd=ROOT)


def test_lint_and_convert_read_the_same_cluster(tmp_path):
    with KubeApiServer() as api:
        with client.ApiClient(api.configuration()) as api_client:
            GatewayApiCluster(api_client).apply(
                k8s.ingress_class("nginx"), k8s.service("web"),
                k8s.ingress("shop", [k8s.rule("shop.example.com", ("/", "Prefix", "web", 80))]),
                gw.gateway_class(), gw.gateway("gw"),
                gw.http_route("bad", hostnames=["bad.example.com"], rules=[gw.rule(
                    gw.backend_ref("web"), matches=[gw.path_match("(unclosed", kind="RegularExpression")])]))
        kubeconfig = f"--kubeconfig={api.write_kubeconfig(tmp_path / 'kubeconfig')}"
        linted = pyngress("lint", kubeconfig)
        converted = pyngress("convert", kubeconfig)
    assert linted.returncode == 1, linted.stderr
    [line] = linted.stdout.splitlines()
    assert line.startswith("cluster: ERROR: HTTPRoute default/bad: ") and "regular expression" in line, line
    assert converted.returncode == 0, converted.stderr
    routes = [doc for doc in yaml.safe_load_all(converted.stdout) if doc and doc["kind"] == "HTTPRoute"]
    assert [route["spec"]["hostnames"] for route in routes] == [["shop.example.com"]]


def test_an_unreachable_cluster_stops_both_with_exit_code_2(tmp_path):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("not a kubeconfig: [")
    for command in ("lint", "convert"):
        out = pyngress(command, f"--kubeconfig={kubeconfig}")
        assert out.returncode == 2 and f"pyngress {command}: " in out.stderr, (command, out.stderr)

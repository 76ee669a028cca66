"""ingress-nginx's entrypoint: `/nginx-ingress-controller` (deploy/nginx-ingress-controller) run with the
arguments of ingress-nginx's cloud deploy.yaml, as a Deployment whose image is swapped for pyngress's runs it."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.e2e.ingress.scenarios import Stage
from tests.support import k8s
from tests.support.ingress_nginx_deploy import CLOUD_DEPLOY_ARGS, POD_ENV
from tests.support.controller import REPO, VENV_BIN, Controller, ManifestsCluster, tcp_ports_listened_by

WRAPPER = REPO / "deploy" / "nginx-ingress-controller"


def wrapper_env() -> dict[str, str]:
    # The image has pyngress on its PATH; here it is the venv's.
    return dict(os.environ, PATH=f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}", **POD_ENV)


class IngressNginxEntrypoint(Controller):
    """The controller started through ingress-nginx's entrypoint with `args`; ports in ingress-nginx's spelling
    (`--http-port N`: Go's separate value), the manifests directory and run/state dirs as pyngress's flags.
    --status-port and --ssl-passthrough-proxy-port keep ingress-nginx's defaults: they open no TCP port."""

    def __init__(self, workdir: Path, manifests: Path, args: list[str]) -> None:
        super().__init__(workdir, [])
        self.args = [*args, "--http-port", str(self.http_port), "--https-port", str(self.https_port),
                     f"--healthz-port={self.healthz_port}", f"--manifests={manifests}", f"--run-dir={self.run_dir}",
                     f"--state-dir={self.state_dir}"]

    def start(self, wait: bool = True) -> "IngressNginxEntrypoint":
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen([str(WRAPPER), *self.args], stdout=log, stderr=subprocess.STDOUT,
                                     start_new_session=True, cwd=REPO, env=wrapper_env())
        if wait:
            self.wait_healthy()
        return self


@pytest.fixture
def entrypoint(tmp_path):
    cluster = ManifestsCluster(tmp_path / "manifests")
    cluster.apply(k8s.ingress_class("nginx"))
    controller = IngressNginxEntrypoint(tmp_path, cluster.directory, CLOUD_DEPLOY_ARGS)
    yield controller, cluster
    controller.stop()


def test_cloud_deploy_yaml_arguments_serve_an_ingress(entrypoint, echo):
    controller, cluster = entrypoint
    controller.start()  # waits for /healthz 200 on --healthz-port
    stage = Stage(controller, cluster, echo)
    cluster.apply(*stage.backend("SWAPPED"))
    cluster.apply(k8s.ingress("swapped", [k8s.rule("swapped.example.com", ("/", "Prefix", "swapped", 80))]))
    stage.expect("swapped.example.com", "/", "SWAPPED")
    assert controller.health().status_code == 200

    log = controller.log_path.read_text(errors="replace")
    assert "ingress-nginx flag ignored" not in log
    # The webhook is asked for, and its certificate (the chart's Secret, not mounted here) is missing: it says
    # what to change, and everything else serves.
    assert "webhook cannot start: cannot load --validating-webhook-certificate=/usr/local/certificates/cert" in log
    [started] = [line for line in log.splitlines() if "running pyngress up for ingress-nginx's arguments" in line]
    assert "--publish-service=ingress-nginx/ingress-nginx-controller" in started
    assert "--configmap=ingress-nginx/ingress-nginx-controller" in started
    assert "--validating-webhook=:8443" in started
    # ingress-nginx's internal ports (10246, 442) are Unix sockets here: only the three public ports listen.
    assert tcp_ports_listened_by(controller.pids()) == {controller.http_port, controller.https_port,
                                                         controller.healthz_port}


def test_a_bad_flag_value_stops_the_start_before_anything_runs(tmp_path):
    run_dir = tmp_path / "run"
    result = subprocess.run([str(WRAPPER), *CLOUD_DEPLOY_ARGS, "--watch-namespace-selector=team in (a",
                             f"--run-dir={run_dir}", f"--manifests={tmp_path}"],
                            capture_output=True, text=True, timeout=60, env=wrapper_env())
    assert result.returncode == 2
    assert "--watch-namespace-selector: 'team in (a' is not a label requirement" in result.stderr
    assert not run_dir.exists()  # supervisord never started


def test_an_unknown_flag_is_refused_as_ingress_nginx_refuses_it(tmp_path):
    result = subprocess.run([str(WRAPPER), *CLOUD_DEPLOY_ARGS, "--enable-dynamic-certificates"],
                            capture_output=True, text=True, timeout=60, env=wrapper_env())
    assert result.returncode == 2
    assert "unknown flag: --enable-dynamic-certificates" in result.stderr

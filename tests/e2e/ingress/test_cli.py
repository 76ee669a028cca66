"""`pyngress status` and `pyngress render`, as a user runs them beside a running controller."""
import subprocess

import yaml

from tests.e2e.ingress.scenarios import Stage
from tests.support import k8s
from tests.support.controller import VENV_BIN
from tests.support.net import free_port


def _pyngress(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(VENV_BIN / "pyngress"), *args], capture_output=True, text=True, timeout=60)


def test_status_shows_generation_reloads_and_each_component(manifests_controller, echo):
    controller, cluster = manifests_controller
    stage = Stage(controller, cluster, echo)
    cluster.apply(*stage.backend("CLI"))
    cluster.apply(k8s.ingress("cli", [k8s.rule("cli.example.com", ("/", "Prefix", "cli", 80))]))
    stage.expect("cli.example.com", "/", "CLI")
    out = _pyngress("status", f"--run-dir={controller.run_dir}", f"--healthz-port={controller.healthz_port}")
    assert out.returncode == 0, out.stderr
    reloads = int(controller.metric("nginx_ingress_controller_success"))
    assert f"reloads: {reloads} (failed: 0, last successful: true)" in out.stdout
    assert "config generation: " in out.stdout
    for component in ("watcher", "syncer", "nginx", "crashmon"):
        line = next(line for line in out.stdout.splitlines() if line.startswith(component))
        assert " running " in line, line


def test_render_prints_the_configuration_and_where_each_path_goes(tmp_path):
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "app.yaml").write_text(yaml.safe_dump_all([
        k8s.ingress_class("nginx"), k8s.service("web"), k8s.endpoint_slice("web", ["10.1.2.3"], 8080),
        k8s.ingress("web", [k8s.rule("web.example.com", ("/api", "Prefix", "web", 80))]),
        # Snippets are refused while the ConfigMap does not allow them: the Ingress is rejected.
        k8s.ingress("bad", [k8s.rule("bad.example.com", ("/", "Prefix", "web", 80))],
                    annotations={"nginx.ingress.kubernetes.io/configuration-snippet": "return 200;"}),
        # An invalid value of an annotation that does not control access is ignored, as ingress-nginx ignores it.
        k8s.ingress("odd", [k8s.rule("odd.example.com", ("/", "Prefix", "web", 80))],
                    annotations={"nginx.ingress.kubernetes.io/proxy-read-timeout": "60s; return 200"})]))
    out = _pyngress("render", f"--manifests={manifests}", f"--state-dir={tmp_path / 's'}", f"--run-dir={tmp_path / 'r'}")
    assert out.returncode == 0, out.stderr
    assert "location @profile_default" in out.stdout
    assert "#   web.example.com/api (prefix) -> default-web-80 [10.1.2.3:8080]" in out.stdout
    assert "# Rejected: " in out.stdout and "configuration-snippet" in out.stdout
    assert "bad.example.com" not in out.stdout.split("# Rejected")[0]
    assert "#   odd.example.com/ (prefix) -> default-web-80 [10.1.2.3:8080]" in out.stdout
    assert "'60s; return 200': must be a duration" in out.stdout and "ignored, its default applies" in out.stdout
    assert "60s; return 200" not in out.stdout.split("# Rejected")[0]  # never rendered


def test_render_of_a_directory_that_does_not_exist_says_so_and_fails(tmp_path):
    out = _pyngress("render", f"--manifests={tmp_path / 'nowhere'}", f"--state-dir={tmp_path / 's'}",
                    f"--run-dir={tmp_path / 'r'}")
    assert out.returncode == 2
    assert f"{tmp_path / 'nowhere'} is not a directory" in out.stderr
    assert out.stdout == ""


def test_status_in_a_run_dir_nobody_reports_to_says_where_an_instance_runs(manifests_controller, tmp_path):
    controller, _ = manifests_controller
    out = _pyngress("status", f"--run-dir={tmp_path / 'nothing-here'}", f"--healthz-port={free_port()}")
    assert out.returncode == 1
    assert f"no component has reported in {tmp_path / 'nothing-here'}" in out.stdout
    assert (f"a pyngress instance is running with its run directory in {controller.run_dir}: "
            f"pyngress status --run-dir {controller.run_dir}") in out.stdout

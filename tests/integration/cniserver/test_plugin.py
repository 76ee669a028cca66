"""pyngress-cni as a container runtime executes it: environment and stdin in, stdout and exit status out."""
from __future__ import annotations

import subprocess
import sys

from proto.cni import SUPPORTED_VERSIONS
from services.cni_plugin import main as plugin
from tests.integration.cniserver.cni_processes import CniStack, pod_args, run_plugin, stub_network


def test_version_is_answered_without_a_server(workdir):
    run = run_plugin("VERSION", {"cniVersion": "0.4.0"}, socket_path=workdir / "nothing-here.sock")
    assert (run.returncode, run.result) == (0, {"cniVersion": "0.4.0", "supportedVersions": list(SUPPORTED_VERSIONS)})
    assert run_plugin("VERSION", b"").result["cniVersion"] == "1.1.0"


def test_an_unreachable_server_is_code_11_naming_the_socket(workdir):
    missing = workdir / "missing.sock"
    run = run_plugin("ADD", stub_network(), "c1", "/var/run/netns/c1", cni_args=pod_args("c1"), socket_path=missing)
    assert run.returncode == 1
    assert run.result["code"] == 11 and str(missing) in run.result["msg"]
    assert run.result["cniVersion"] == "1.1.0"


def test_the_socket_comes_from_serverSocket_then_the_environment(stack: CniStack, workdir):
    stack.start_worker(stub=True)
    stack.wait_workers(1)
    in_config = run_plugin("ADD", {**stub_network(), "serverSocket": str(stack.socket)}, "c1", "/var/run/netns/c1",
                           cni_args=pod_args("c1"), socket_path=workdir / "wrong.sock")
    assert in_config.returncode == 0 and in_config.result["stub"]["container"] == "c1"
    from_env = run_plugin("ADD", stub_network(), "c2", "/var/run/netns/c2", cni_args=pod_args("c2"),
                          socket_path=stack.socket)
    assert from_env.returncode == 0


def test_a_command_without_output_prints_nothing(stack: CniStack):
    stack.start_worker(stub=True)
    stack.wait_workers(1)
    run = run_plugin("DEL", stub_network(), "c1", socket_path=stack.socket)
    assert (run.returncode, run.stdout) == (0, "")


def test_a_server_error_is_printed_as_cni_error_json_with_a_failing_status(stack: CniStack):
    stack.start_worker(stub=True)
    stack.wait_workers(1)
    run = run_plugin("ADD", stub_network(fail={"code": 101, "msg": "no free address"}), "c1", "/var/run/netns/c1",
                     cni_args=pod_args("c1"), socket_path=stack.socket)
    assert run.returncode == 1
    assert run.result == {"cniVersion": "1.1.0", "code": 101, "msg": "no free address", "details": ""}


def test_odd_values_survive_the_hand_written_json(stack: CniStack):
    stack.start_worker(stub=True)
    stack.wait_workers(1)
    odd = 'quote " backslash \\ tab \t newline \n unicode é'
    run = run_plugin("ADD", stub_network(), "c1", "/var/run/netns/c1", socket_path=stack.socket,
                     cni_args=pod_args("c1") + f";ODD={odd}")
    assert run.returncode == 0 and run.result["stub"]["args"]["ODD"] == odd


def test_the_plugin_loads_nothing_heavy():
    """Start-up cost: none of these may be imported on the way of an ADD (see the plugin's docstring)."""
    probe = ("import sys; before = set(sys.modules); import services.cni_plugin.main; "
             "print(' '.join(sorted(set(sys.modules) - before)))")
    loaded = set(subprocess.run([sys.executable, "-I", "-c", probe], capture_output=True, text=True, check=True,
                                cwd=plugin.__file__.rsplit("/services/", 1)[0]).stdout.split())
    heavy = {"json", "re", "socket", "http.client", "ssl", "email", "msgpack", "zmq", "aiohttp", "pyroute2", "proto"}
    assert not loaded & heavy, loaded

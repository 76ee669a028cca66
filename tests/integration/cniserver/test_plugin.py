"""pyngress-cni as a container runtime executes it: environment and stdin in, stdout and exit status out.

Each test runs with both executables (the `plugin` fixture): the Python reference and the static binary
must pass the same tests. test_plugin_parity.py compares their output on odd input byte for byte."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from proto.cni import SUPPORTED_VERSIONS
from services.cni_plugin import main as python_plugin
from tests.integration.cniserver.cni_processes import CniStack, pod_args, run_plugin, stub_network
from tests.integration.cniserver.plugins import PLUGIN_NAMES, STATIC_PLUGIN, plugin_path


@pytest.fixture(params=PLUGIN_NAMES)
def plugin(request: pytest.FixtureRequest) -> Path:
    """Each plugin executable in turn: the Python reference and the static binary."""
    return plugin_path(request.param)


def test_version_is_answered_without_a_server(workdir, plugin: Path):
    run = run_plugin("VERSION", {"cniVersion": "0.4.0"}, socket_path=workdir / "nothing-here.sock", plugin=plugin)
    assert (run.returncode, run.result) == (0, {"cniVersion": "0.4.0", "supportedVersions": list(SUPPORTED_VERSIONS)})
    assert run_plugin("VERSION", b"", plugin=plugin).result["cniVersion"] == "1.1.0"


def test_an_unreachable_server_is_code_11_naming_the_socket(workdir, plugin: Path):
    missing = workdir / "missing.sock"
    run = run_plugin("ADD", stub_network(), "c1", "/var/run/netns/c1", cni_args=pod_args("c1"), socket_path=missing,
                     plugin=plugin)
    assert run.returncode == 1
    assert run.result["code"] == 11 and str(missing) in run.result["msg"]
    assert run.result["cniVersion"] == "1.1.0"


def test_the_socket_comes_from_serverSocket_then_the_environment(stack: CniStack, workdir, plugin: Path):
    stack.start_worker(stub=True)
    stack.wait_workers(1)
    in_config = run_plugin("ADD", {**stub_network(), "serverSocket": str(stack.socket)}, "c1", "/var/run/netns/c1",
                           cni_args=pod_args("c1"), socket_path=workdir / "wrong.sock", plugin=plugin)
    assert in_config.returncode == 0 and in_config.result["stub"]["container"] == "c1"
    from_env = run_plugin("ADD", stub_network(), "c2", "/var/run/netns/c2", cni_args=pod_args("c2"),
                          socket_path=stack.socket, plugin=plugin)
    assert from_env.returncode == 0


def test_a_command_without_output_prints_nothing(stack: CniStack, plugin: Path):
    stack.start_worker(stub=True)
    stack.wait_workers(1)
    run = run_plugin("DEL", stub_network(), "c1", socket_path=stack.socket, plugin=plugin)
    assert (run.returncode, run.stdout) == (0, "")


def test_a_server_error_is_printed_as_cni_error_json_with_a_failing_status(stack: CniStack, plugin: Path):
    stack.start_worker(stub=True)
    stack.wait_workers(1)
    run = run_plugin("ADD", stub_network(fail={"code": 101, "msg": "no free address"}), "c1", "/var/run/netns/c1",
                     cni_args=pod_args("c1"), socket_path=stack.socket, plugin=plugin)
    assert run.returncode == 1
    assert run.result == {"cniVersion": "1.1.0", "code": 101, "msg": "no free address", "details": ""}


def test_odd_values_survive_the_hand_written_json(stack: CniStack, plugin: Path):
    stack.start_worker(stub=True)
    stack.wait_workers(1)
    odd = 'quote " backslash \\ tab \t newline \n unicode é'
    run = run_plugin("ADD", stub_network(), "c1", "/var/run/netns/c1", socket_path=stack.socket,
                     cni_args=pod_args("c1") + f";ODD={odd}", plugin=plugin)
    assert run.returncode == 0 and run.result["stub"]["args"]["ODD"] == odd


def test_the_plugin_loads_nothing_heavy():
    """Start-up cost: none of these may be imported on the way of an ADD (see the plugin's docstring)."""
    probe = ("import sys; before = set(sys.modules); import services.cni_plugin.main; "
             "print(' '.join(sorted(set(sys.modules) - before)))")
    loaded = set(subprocess.run([sys.executable, "-I", "-c", probe], capture_output=True, text=True, check=True,
                                cwd=python_plugin.__file__.rsplit("/services/", 1)[0]).stdout.split())
    heavy = {"json", "re", "socket", "http.client", "ssl", "email", "msgpack", "zmq", "aiohttp", "pyroute2", "proto"}
    assert not loaded & heavy, loaded


def test_the_static_plugin_needs_no_library_and_no_interpreter():
    """What a node without Python (or without a C library) can run: an ELF file with no PT_INTERP (no
    dynamic loader) and no PT_DYNAMIC segment (no shared library)."""
    binary = plugin_path("static").read_bytes()
    assert binary[:4] == b"\x7fELF" and binary[4] == 2  # 64-bit
    phoff = int.from_bytes(binary[0x20:0x28], "little")
    phentsize, phnum = int.from_bytes(binary[0x36:0x38], "little"), int.from_bytes(binary[0x38:0x3A], "little")
    types = {int.from_bytes(binary[phoff + i * phentsize:phoff + i * phentsize + 4], "little") for i in range(phnum)}
    pt_dynamic, pt_interp = 2, 3
    assert not types & {pt_dynamic, pt_interp}, types
    assert STATIC_PLUGIN.stat().st_size < 200_000

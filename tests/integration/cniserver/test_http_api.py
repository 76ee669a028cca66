"""The CNI server's socket as a client sees it: curl straight at the Unix socket, as root and as nobody."""
from __future__ import annotations

import base64
import json
import os
import stat
import subprocess

import pytest

from tests.integration.cniserver.cni_processes import CniStack, curl, pod_args, run_plugin, stub_network

ADD_ENV = {"CNI_COMMAND": "ADD", "CNI_CONTAINERID": "abc123", "CNI_NETNS": "/var/run/netns/none",
           "CNI_IFNAME": "eth0", "CNI_ARGS": pod_args("web-0")}
CONFIG = {"cniVersion": "1.0.0", "name": "net1", "type": "pyngress-cni"}


def body(env: dict, config: dict | bytes = CONFIG) -> bytes:
    raw = config if isinstance(config, bytes) else json.dumps(config).encode()
    return json.dumps({"env": env, "config": base64.b64encode(raw).decode()}).encode()


def with_env(**changes: str | None) -> dict:
    env = {**ADD_ENV, **changes}
    return {k: v for k, v in env.items() if v is not None}


@pytest.mark.parametrize("payload, code, words", [
    (b'{"env": {"CNI_COMMAND": "ADD"', 6, "not JSON"),
    (b'["env"]', 6, "JSON object"),
    (json.dumps({"env": ADD_ENV, "config": "%%% not base64 %%%"}).encode(), 6, "not valid base64"),
    (body(with_env(CNI_COMMAND=None)), 4, "CNI_COMMAND not set"),
    (body(with_env(CNI_COMMAND="FROB")), 4, "'FROB' is not a known command"),
    (body(with_env(CNI_NETNS=None, CNI_IFNAME=None)), 4, "CNI_NETNS, CNI_IFNAME not set"),
    (body(with_env(CNI_ARGS="K8S_POD_NAMESPACE=default")), 4, "lacks K8S_POD_NAME"),
    (body(with_env(CNI_ARGS="K8S_POD_NAMESPACE=default;K8S_POD_NAME=")), 4, "lacks K8S_POD_NAME"),
    (body(with_env(CNI_ARGS="K8S_POD_NAMESPACE=default;garbage")), 4, "'garbage' is not KEY=VALUE"),
    (body(with_env(CNI_CONTAINERID="../../etc/passwd")), 4, "CNI_CONTAINERID"),
    (body(with_env(CNI_IFNAME="eth0:1")), 4, "CNI_IFNAME"),
    (body(ADD_ENV, b"{not json"), 6, "network configuration is not JSON"),
    (body(ADD_ENV, {**CONFIG, "cniVersion": "9.9.9"}), 1, "'9.9.9' is not supported"),
    (body(ADD_ENV, {**CONFIG, "mtu": 70000}), 7, "mtu 70000"),
    (body(ADD_ENV, {**CONFIG, "ipam": {"subnet": "10.1.2.3/24"}}), 7, "ipam.subnet"),
], ids=["truncated-json", "not-an-object", "config-not-base64", "no-command", "unknown-command", "no-netns-ifname",
        "no-pod-name", "empty-pod-name", "malformed-cni-args", "bad-container-id", "bad-ifname", "config-not-json",
        "unsupported-version", "mtu-out-of-range", "subnet-with-host-bits"])
def test_bad_input_gets_a_cni_error_and_the_server_keeps_serving(stack: CniStack, payload, code, words):
    status, text = curl(stack.socket, "/", payload)
    assert status == 400, text
    error = json.loads(text)
    assert error["code"] == code and words in error["msg"], error
    assert set(error) == {"cniVersion", "code", "msg", "details"} and error["details"], error
    assert curl(stack.socket, "/healthz") == (200, "ok\n")
    version = run_plugin("VERSION", {"cniVersion": "1.0.0"}, socket_path=stack.socket)
    assert version.returncode == 0


def test_a_10_mib_body_is_refused_with_413_and_a_cni_error(stack: CniStack):
    status, text = curl(stack.socket, "/", b"x" * (10 << 20))
    assert status == 413
    error = json.loads(text)
    assert error["code"] == 7 and "over the 1048576-byte limit" in error["msg"]
    assert curl(stack.socket, "/healthz")[0] == 200
    assert stack.metric("pyngress_cni_request_duration_seconds_count", '{command="invalid",result="7"}') == 1


def test_the_error_answers_in_the_callers_cni_version(stack: CniStack):
    status, text = curl(stack.socket, "/", body(with_env(CNI_ARGS="K8S_POD_NAME=x"), {**CONFIG, "cniVersion": "0.4.0"}))
    assert status == 400 and json.loads(text)["cniVersion"] == "0.4.0"


def test_version_is_answered_by_the_server_itself(stack: CniStack):
    status, text = curl(stack.socket, "/", body({"CNI_COMMAND": "VERSION"}, {"cniVersion": "0.4.0"}))
    assert status == 200
    assert json.loads(text) == {"cniVersion": "0.4.0", "supportedVersions": ["0.4.0", "1.0.0", "1.1.0"]}


def test_socket_directory_and_socket_are_root_only(stack: CniStack):
    directory = os.stat(stack.socket.parent)
    sock = os.stat(stack.socket)
    assert (directory.st_uid, stat.S_IMODE(directory.st_mode)) == (0, 0o700)
    assert stat.S_ISSOCK(sock.st_mode) and (sock.st_uid, stat.S_IMODE(sock.st_mode)) == (0, 0o600)
    workers = os.stat(stack.run_dir / "cni-workers.sock")
    assert (workers.st_uid, stat.S_IMODE(workers.st_mode)) == (0, 0o600)


def test_a_non_root_user_cannot_connect(stack: CniStack):
    os.chmod(stack.workdir, 0o755)  # only the server's own directory may stop nobody
    status, _ = curl(stack.socket, "/healthz", as_user="nobody")
    assert status == 0
    denied = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "curl", "-sS",
                             "--unix-socket", str(stack.socket), "http://pyngress/healthz"], capture_output=True)
    assert denied.returncode == 7, denied  # curl: could not connect
    assert curl(stack.socket, "/healthz")[0] == 200


def test_a_leftover_open_directory_is_replaced_by_a_private_one(workdir):
    stale = workdir / "run" / "cni"
    stale.mkdir(parents=True)
    os.chmod(stale, 0o777)
    (stale / "planted").write_text("x")
    stack = CniStack(workdir)
    try:
        stack.start_server()
        assert stat.S_IMODE(os.stat(stale).st_mode) == 0o700 and not (stale / "planted").exists()
    finally:
        stack.stop()


def test_a_mounted_socket_directory_must_already_be_private(workdir):
    source, target = workdir / "host-dir", workdir / "run" / "cni"
    source.mkdir()
    target.mkdir(parents=True)
    os.chmod(source, 0o755)
    subprocess.run(["mount", "--bind", str(source), str(target)], check=True)
    stack = CniStack(workdir)
    try:
        server = stack.start_server(wait=False)
        assert server.popen.wait(15) == 2  # a StartupError (services/common/runner.py)
        assert "has mode 0755 and cannot be re-created (it is a mount point)" in server.log()
        assert "chmod 0700" in server.log()
        os.chmod(source, 0o700)
        (source / "kept").write_text("x")
        stack.start_server()
        assert (target / "kept").exists() and stat.S_IMODE(os.stat(stack.socket).st_mode) == 0o600
    finally:
        stack.stop()
        subprocess.run(["umount", str(target)], check=False)


def test_readyz_turns_ready_once_a_worker_registers(stack: CniStack):
    assert curl(stack.socket, "/readyz") == (503, "no cniworker registered\n")
    stack.start_worker(stub=True)
    stack.wait_workers(1)
    assert curl(stack.socket, "/readyz") == (200, "ok\n")


def test_metrics_count_requests_by_command_and_result(stack: CniStack):
    stack.start_worker(stub=True)
    stack.wait_workers(1)
    assert run_plugin("ADD", stub_network(), "m1", "/var/run/netns/m1", cni_args=pod_args("m1"),
                      socket_path=stack.socket).returncode == 0
    assert run_plugin("ADD", stub_network(), "m1", "/var/run/netns/m1", socket_path=stack.socket).returncode == 1
    assert stack.metric("pyngress_cni_request_duration_seconds_count", '{command="ADD",result="success"}') == 1
    assert stack.metric("pyngress_cni_request_duration_seconds_count", '{command="ADD",result="4"}') == 1
    assert stack.metric("pyngress_cni_requests_in_flight") == 0
    assert stack.metric("pyngress_cni_workers_registered") == 1


def test_other_paths_and_methods_are_refused(stack: CniStack):
    assert curl(stack.socket, "/nope")[0] == 404
    assert curl(stack.socket, "/", method="GET")[0] == 405

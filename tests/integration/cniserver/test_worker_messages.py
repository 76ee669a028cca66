"""What a real cniworker process does with a malformed request on the broker's socket.

The test plays the broker with a bare ROUTER, so that it can send what the real broker's encode refuses.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import msgpack
import pytest
import zmq

from proto import decode, encode, endpoints
from services.common.files import ensure_private_dir
from services.common.ipc import bind_private
from tests.integration.cniserver.cni_processes import CniStack, pod_args, stub_network
from tests.support.net import wait_for

WAIT_MS = 10_000


class HandBroker:
    """The broker's ROUTER, driven by hand."""

    def __init__(self, run_dir: Path) -> None:
        ensure_private_dir(run_dir)
        self.ctx = zmq.Context()
        self.router = self.ctx.socket(zmq.ROUTER)
        self.router.setsockopt(zmq.LINGER, 0)
        bind_private(self.router, endpoints.cni_workers(run_dir))

    def receive(self, expected_type: str) -> tuple[bytes, dict]:
        assert self.router.poll(WAIT_MS), f"no {expected_type} from the worker"
        identity, payload = self.router.recv_multipart()
        message = decode(payload)
        assert message.type == expected_type
        return identity, message.body

    def close(self) -> None:
        self.router.close()
        self.ctx.term()


@pytest.fixture
def hand_broker(workdir: Path) -> Iterator[tuple[CniStack, HandBroker]]:
    stack = CniStack(workdir, pod_cidr="10.250.0.0/24")
    broker = HandBroker(stack.run_dir)
    try:
        yield stack, broker
    finally:
        stack.stop()
        broker.close()


def add_env(container: str) -> dict[str, str]:
    return {"CNI_COMMAND": "ADD", "CNI_CONTAINERID": container, "CNI_NETNS": f"/var/run/netns/{container}",
            "CNI_IFNAME": "eth0", "CNI_ARGS": pod_args(container)}


def test_a_request_with_a_bad_env_is_dropped_with_the_reason_and_the_worker_goes_on(hand_broker):
    stack, broker = hand_broker
    worker = stack.start_worker(stub=True)
    identity, _ = broker.receive("cni.worker_ready")
    bad_env = {**add_env("pod-bad"), "CNI_ARGS": 7}
    broker.router.send_multipart([identity, msgpack.packb(
        {"v": 1, "type": "cni.request", "seq": 0, "body": {"id": "bad", "env": bad_env, "config": b"{}"}},
        use_bin_type=True)])
    good = {"id": "good", "env": add_env("pod-good"), "config": json.dumps(stub_network()).encode()}
    broker.router.send_multipart([identity, encode("cni.request", good)])
    _, reply = broker.receive("cni.reply")  # the first reply is the good request's: the bad one got none
    assert (reply["id"], reply["ok"], reply["result"]["stub"]["container"]) == ("good", True, "pod-good")
    wait_for(lambda: "cni.request: field 'env'['CNI_ARGS'] must be str, got int" in worker.log(),
             what=f"the reason in the worker's log ({worker.log_path})")
    assert worker.popen.poll() is None

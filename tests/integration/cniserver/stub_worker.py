"""A real cniworker process (the real worker loop, socket and protocol) whose pod-networking core is
replaced by a stand-in steered from the network configuration's "stub" object, so the broker's
behaviour can be observed exactly:

  "record": FILE     append "start <container>" / "end <container>" lines (O_APPEND: one write each)
  "touch": FILE      create FILE when the request starts (and write this worker's pid into it)
  "wait_for": FILE   wait until FILE exists (fails after 10 s)
  "sleep": SECONDS   then sleep
  "hang": true       never return (the test kills the process)
  "fail": {"code", "msg"}   raise that CniError

Run as `python stub_worker.py <pyngress flags>`.
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from proto.cni import CniError
from services.cniworker.main import run
from services.common.cni_config.request import CniRequest
from services.common.settings import parse


def stub_handle(request: CniRequest, *, state_dir: str, pod_cidr: str | None) -> dict:
    env, stub = request.env, request.network.raw.get("stub", {})
    _record(stub, f"start {env.container_id}")
    if "touch" in stub:
        Path(stub["touch"]).write_text(str(os.getpid()))
    if "wait_for" in stub:
        deadline = time.monotonic() + 10
        while not os.path.exists(stub["wait_for"]):
            if time.monotonic() > deadline:
                raise CniError(100, f"stub: {stub['wait_for']} never appeared")
            time.sleep(0.01)
    time.sleep(stub.get("sleep", 0))
    while stub.get("hang"):
        time.sleep(1)
    if "fail" in stub:
        raise CniError(stub["fail"]["code"], stub["fail"]["msg"])
    _record(stub, f"end {env.container_id}")
    if env.command != "ADD":
        return {}
    return {"cniVersion": request.network.cni_version,
            "stub": {"pid": os.getpid(), "container": env.container_id, "args": env.args}}


def _record(stub: dict, line: str) -> None:
    if "record" in stub:
        fd = os.open(stub["record"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, (line + "\n").encode())
        finally:
            os.close(fd)


if __name__ == "__main__":
    sys.exit(run(parse(sys.argv[1:]), handle=stub_handle))

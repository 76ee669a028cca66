"""The CNI broker's ROUTER over a real ZeroMQ ipc socket, fed a message over its size limit by a worker."""
import asyncio
import logging
import os

import zmq
import zmq.asyncio

from proto import encode, endpoints
from proto.limits import CNI_MAX_MESSAGE_BYTES
from services.cniserver.broker import Broker


def test_an_oversized_message_never_reaches_the_broker_and_the_worker_registers_after_it(tmp_path, caplog):
    async def scenario():
        ctx = zmq.asyncio.Context()
        counts: list[int] = []
        broker = Broker(ctx, endpoint=endpoints.cni_workers(tmp_path), on_workers_changed=counts.append)
        broker.start()
        worker = ctx.socket(zmq.DEALER)
        worker.setsockopt(zmq.LINGER, 0)
        worker.setsockopt(zmq.ROUTING_ID, b"worker-1")  # as a real cniworker: the same identity after reconnecting
        worker.connect(endpoints.cni_workers(tmp_path))
        await worker.send(b"x" * (CNI_MAX_MESSAGE_BYTES + 1))
        # The broker's side drops the connection; the worker's side reconnects by itself and its next message,
        # queued meanwhile, gets through.
        await worker.send(encode("cni.worker_ready", {"pid": os.getpid(), "slots": 1}))
        for _ in range(100):
            if counts:
                break
            await asyncio.sleep(0.05)
        assert counts == [1] and broker.worker_count == 1
        await broker.close()
        worker.close()
        ctx.term()
    with caplog.at_level(logging.INFO, logger="services.cniserver.broker"):
        asyncio.run(scenario())
    assert "dropped a message" not in caplog.text  # the oversized one never reached the application

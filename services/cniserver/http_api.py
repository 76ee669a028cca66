"""The CNI server's HTTP API on its root-only Unix socket.

`POST /` takes `{"env": {...}, "config": "<base64 of the plugin's stdin>"}` — the wire format of the
OpenShift SDN and ovn-kubernetes shims — and answers 200 with the CNI result JSON, or 400 with a CNI
error JSON. A command without output (DEL, CHECK, STATUS, GC) answers 200 with an empty body, as
ovn-kubernetes' server does; its shim only reads the body of an ADD. `GET /healthz`, `GET /readyz`
(503 while stopping or while no worker is registered) and `GET /metrics` serve operators.

Limits, each answered with a CNI error so the plugin can print it:
- a body over 1 MiB: 413, code 7 (the only part of a request that grows is the network configuration);
- more than 64 requests at once: the rest wait their turn, inside their timeout;
- no answer within 2 minutes (the kubelet's runtime request timeout, after which nobody is listening):
  code 11, try again later — the condition is transient, and the request may still be completing:
  the container stays locked until its worker answers, so the runtime's retry runs after it.
"""
from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from proto.cni import INTERNAL, INVALID_NETWORK_CONFIG, PLUGIN_NOT_AVAILABLE, TRY_AGAIN_LATER, CniError
from services.cniserver.broker import Broker
from services.cniserver.metrics import CniMetrics
from services.common.cni_config.ipam import no_pod_subnet
from services.common.cni_config.network import parse_network_config
from services.common.cni_config.request import (NEWEST_VERSION, CniRequest, cni_version_for_reply, decode_body,
                                                version_result)
from services.common.cni_config.runtime_env import COMMANDS, RuntimeEnv, parse_runtime_env
from services.common.logs import kv

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 1 << 20
REQUEST_TIMEOUT_SECONDS = 120.0
MAX_IN_FLIGHT = 64
# Commands that set up a pod's addresses and so need a subnet from the configuration or --pod-cidr.
_NEEDS_SUBNET = frozenset({"ADD", "CHECK", "UPDATE"})


class _BodyTooLarge(Exception):
    def __init__(self, size: int | None) -> None:
        super().__init__()
        shown = f"{size} bytes" if size is not None else "larger"
        self.error = CniError(INVALID_NETWORK_CONFIG, f"request body is {shown}, over the {MAX_BODY_BYTES}-byte limit",
                              details="the network configuration on the plugin's stdin must stay well under "
                                      "768 KiB (it travels base64-encoded)")


@dataclass(kw_only=True)
class _Outcome:
    response: web.Response
    command: str  # a known CNI command, or "invalid": metric labels stay a small set
    result: str  # "success" or the CNI error code
    env: RuntimeEnv | None = None  # once the CNI environment is valid
    error: CniError | None = None


class CniApi:
    def __init__(self, *, broker: Broker, metrics: CniMetrics, pod_cidr: str | None,
                 request_timeout: float = REQUEST_TIMEOUT_SECONDS, max_in_flight: int = MAX_IN_FLIGHT) -> None:
        self.broker = broker
        self.metrics = metrics
        self.pod_cidr = pod_cidr
        self.request_timeout = request_timeout
        self.shutting_down = False
        self._in_flight_limit = asyncio.Semaphore(max_in_flight)

    def set_pod_cidr(self, cidr: str | None) -> None:
        """The node's pod subnet changed (its Node's spec.podCIDR, when no --pod-cidr was given)."""
        self.pod_cidr = cidr

    def application(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/", self.handle_cni, expect_handler=self._expect)
        app.router.add_get("/healthz", self.healthz)
        app.router.add_get("/readyz", self.readyz)
        app.router.add_get("/metrics", self.metrics_page)
        return app

    async def handle_cni(self, http_request: web.Request) -> web.StreamResponse:
        started = time.monotonic()
        self.metrics.requests_in_flight.inc()
        try:
            outcome = await self._answer(http_request)
        finally:
            self.metrics.requests_in_flight.dec()
        elapsed = time.monotonic() - started
        self.metrics.request_duration.labels(outcome.command, outcome.result).observe(elapsed)
        env = outcome.env
        fields = {"command": outcome.command, "result": outcome.result, "ms": round(elapsed * 1000, 1)}
        if env and env.container_id:
            fields["container"] = env.container_id
        if env and "K8S_POD_NAME" in env.args:
            fields["pod"] = f"{env.args.get('K8S_POD_NAMESPACE', '')}/{env.args['K8S_POD_NAME']}"
        if outcome.error:
            fields["error"] = outcome.error.msg
        log.info("cni request", extra=kv(**fields))
        return outcome.response

    async def _answer(self, http_request: web.Request) -> _Outcome:
        runtime_env: RuntimeEnv | None = None
        request: CniRequest | None = None
        body, command = b"", "invalid"
        try:
            body = await _read_body(http_request)
            env, config = decode_body(body)
            if env.get("CNI_COMMAND") in COMMANDS:
                command = env["CNI_COMMAND"]
            runtime_env = parse_runtime_env(env)
            if runtime_env.command == "VERSION":
                result = version_result(config)
            else:
                request = CniRequest(runtime_env, parse_network_config(config, command=runtime_env.command))
                result = await self._run(request, env=env, config=config)
            return _Outcome(response=_result_response(result), command=command, result="success", env=runtime_env)
        except _BodyTooLarge as too_large:
            response = _error_response(too_large.error, cni_version=NEWEST_VERSION, status=413)
            response.force_close()  # the rest of the body is never read
            return _Outcome(response=response, command=command, result=str(too_large.error.code), env=runtime_env,
                            error=too_large.error)
        except CniError as err:
            version = request.network.cni_version if request else cni_version_for_reply(body)
            return _Outcome(response=_error_response(err, cni_version=version, status=400), command=command,
                            result=str(err.code), env=runtime_env, error=err)
        except Exception:
            log.exception("CNI request failed unexpectedly")
            internal = CniError(INTERNAL, "the CNI server failed unexpectedly", details="see the cniserver log")
            return _Outcome(response=_error_response(internal, cni_version=NEWEST_VERSION, status=500),
                            command=command, result=str(INTERNAL), env=runtime_env, error=internal)

    async def _run(self, request: CniRequest, *, env: dict[str, str], config: bytes) -> dict[str, Any]:
        """Sends `request` to a worker as it came: its CNI variables and the network configuration's bytes."""
        command = request.env.command
        if command in _NEEDS_SUBNET and request.network.ipam.subnet is None and not self.pod_cidr:
            raise no_pod_subnet()
        if command == "STATUS" and self.broker.worker_count == 0:
            raise CniError(PLUGIN_NOT_AVAILABLE, "no cniworker is registered with the CNI server",
                           details="start `pyngress cniworker` (supervisord does when --enable-cni is set)")
        # Only the CNI variables travel on: shims that forward their whole environment leak nothing further.
        cni_env = {k: v for k, v in env.items() if k.startswith("CNI_")}
        try:
            return await asyncio.wait_for(self._forward(request.env.container_id, env=cni_env, config=config),
                                          self.request_timeout)
        except TimeoutError:
            if self.broker.worker_count == 0:
                raise CniError(TRY_AGAIN_LATER, f"no cniworker registered within {self.request_timeout:g}s",
                               details="start `pyngress cniworker`; the runtime will retry") from None
            raise CniError(TRY_AGAIN_LATER, f"no answer within {self.request_timeout:g}s",
                           details="the workers are busy or the request is slow; it may still complete, and a "
                                   "retry runs after it") from None

    async def _forward(self, container_id: str, *, env: dict[str, str], config: bytes) -> dict[str, Any]:
        async with self._in_flight_limit:
            job = self.broker.submit(container_id, env=env, config=config)
            try:
                return await asyncio.shield(job.task)
            except asyncio.CancelledError:
                job.abandon()
                raise

    async def _expect(self, http_request: web.Request) -> web.StreamResponse | None:
        """`Expect: 100-continue`: invite only a body within the limit; a larger one is refused by
        handle_cni from its Content-Length, before the client sends it."""
        if (http_request.content_length or 0) > MAX_BODY_BYTES:
            return None
        expect = http_request.headers.get("Expect", "")
        if expect.lower() != "100-continue":
            return web.Response(status=417, text=f"unknown Expect: {expect}\n")
        await http_request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        http_request.writer.output_size = 0  # the 100 is not part of the response proper
        return None

    async def healthz(self, _: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def readyz(self, _: web.Request) -> web.Response:
        if self.shutting_down:
            return web.Response(status=503, text="shutting down\n")
        if self.broker.worker_count == 0:
            return web.Response(status=503, text="no cniworker registered\n")
        return web.Response(text="ok\n")

    async def metrics_page(self, _: web.Request) -> web.Response:
        return web.Response(body=self.metrics.render(), headers={"Content-Type": CONTENT_TYPE_LATEST})


async def _read_body(http_request: web.Request) -> bytes:
    if (http_request.content_length or 0) > MAX_BODY_BYTES:
        raise _BodyTooLarge(http_request.content_length)
    body = bytearray()
    while chunk := await http_request.content.read(65536):
        body += chunk
        if len(body) > MAX_BODY_BYTES:
            raise _BodyTooLarge(None)
    return bytes(body)


def _result_response(result: dict[str, Any]) -> web.Response:
    if not result:
        return web.Response(content_type="application/json")  # success without output: an empty body
    return web.Response(body=json.dumps(result).encode(), content_type="application/json")


def _error_response(err: CniError, *, cni_version: str, status: int) -> web.Response:
    return web.Response(status=status, body=json.dumps(err.to_json(cni_version)).encode(),
                        content_type="application/json")

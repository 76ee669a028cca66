"""`pyngress webhook`: the validating admission webhook, a process of its own (N of them share the port).

It follows the watcher's store (clone pattern: snapshot, then updates) into a `Reviewer` (review.py), which
decides with the syncer's own validators and model; it never runs nginx -t and writes no file, so nothing a
client sends reaches nginx or the disk. The port is opened only once the first snapshot is in: a webhook that
answered before knowing the other Ingresses could not refuse a host another one already serves. It runs at a
lower CPU priority (NICENESS) than nginx, so that a flood of reviews takes only the CPU nginx leaves.
"""
from __future__ import annotations

import asyncio
import logging
import os
from typing import Any, Mapping

import zmq.asyncio

from proto import endpoints
from services.common.clone import CloneSubscriber, Snapshot
from services.common.files import ensure_private_dir
from services.common.logs import kv
from services.common.runner import StartupError, run_process
from services.common.settings import Settings
from services.syncer.admission.review import Reviewer, Verdict, drop_unread
from services.syncer.admission.server import AdmissionServer
from services.syncer.admission.tls_files import CertificateError, ReloadingCertificate
from services.syncer.admission.wire import BadReview, answer_body, decide, parse_review

log = logging.getLogger("webhook")

NICENESS = 10
FIRST_SNAPSHOT_NOTICE_SECONDS = 5.0
_FAILED = ("pyngress's admission webhook could not review this object (its log says why); it is refused rather "
           "than admitted unchecked")


class Webhook:
    """The store follower and the request handler around one Reviewer."""

    def __init__(self, settings: Settings) -> None:
        self.reviewer = Reviewer(settings)
        self.store_ready = asyncio.Event()

    async def follow_store(self, subscriber: CloneSubscriber) -> None:
        async for event in subscriber.batches():
            if isinstance(event, Snapshot):
                objects = len(event.state)
                drop_unread(event.state)  # the snapshot is ours alone
                self.reviewer.replace_store(event.state)
                if not self.store_ready.is_set():
                    log.info("store snapshot", extra=kv(objects=objects))
                self.store_ready.set()
            else:
                for key, value in event.items:
                    self.reviewer.apply_change(key, value)
            del event  # a snapshot is not held until the next change

    def _review(self, ingress: Mapping[str, Any], operation: str) -> Verdict:
        return self.reviewer.review(ingress, operation=operation)

    def handle(self, path: str, body: bytes) -> tuple[int, str, bytes]:
        try:
            request = parse_review(body)
        except BadReview as err:
            return 400, "text/plain", f"{err}\n".encode()
        try:
            answer = decide(request, self._review)
        except Exception:  # noqa: BLE001 - one object must not stop the webhook; refused, never admitted unchecked
            log.exception("review failed", extra=kv(uid=request.uid))
            answer = Verdict(allowed=False, message=_FAILED)
        if not answer.allowed:
            meta = (request.object or {}).get("metadata") or {}
            log.info("denied", extra=kv(uid=request.uid, kind=request.kind,
                                        object=f"{meta.get('namespace')}/{meta.get('name')}", message=answer.message))
        return 200, "application/json", answer_body(request, answer)


def certificate_of(settings: Settings) -> ReloadingCertificate:
    options = settings.webhook
    if not options.address:
        raise StartupError("the webhook needs --validating-webhook=[ADDRESS]:PORT (such as :8443)")
    if not options.certificate or not options.key:
        raise StartupError("--validating-webhook needs --validating-webhook-certificate and "
                           "--validating-webhook-key (PEM files: the webhook serves HTTPS only)")
    try:
        return ReloadingCertificate(options.certificate, options.key)
    except CertificateError as err:
        raise StartupError(str(err)) from None


async def serve(settings: Settings) -> int:
    certificate = certificate_of(settings)
    assert settings.webhook.address is not None
    ensure_private_dir(settings.paths.run_dir)  # the watcher's store arrives over sockets in it
    os.nice(NICENESS)
    webhook = Webhook(settings)
    ctx = zmq.asyncio.Context()
    subscriber = CloneSubscriber(ctx, updates_endpoint=endpoints.watcher_updates(settings.paths.run_dir),
                                 snapshot_endpoint=endpoints.watcher_snapshot(settings.paths.run_dir))
    follow = asyncio.create_task(webhook.follow_store(subscriber))
    server = AdmissionServer(certificate, webhook.handle)
    try:
        try:
            await asyncio.wait_for(asyncio.shield(webhook.store_ready.wait()), FIRST_SNAPSHOT_NOTICE_SECONDS)
        except TimeoutError:
            log.warning("no store from the watcher yet; the port opens when it arrives",
                        extra=kv(endpoint=endpoints.watcher_snapshot(settings.paths.run_dir)))
            await webhook.store_ready.wait()
        try:
            await server.start(settings.webhook.address)
        except OSError as err:
            raise StartupError(f"cannot listen on --validating-webhook={settings.webhook.address}: {err}; free the "
                               "port or choose another") from None
        log.info("serving", extra=kv(pid=os.getpid(), address=settings.webhook.address, ports=server.ports,
                                     certificate=certificate.certificate))
        await asyncio.wait([follow])  # until SIGTERM cancels this task, or the subscription fails
        log.error("store subscription ended; exiting so that supervisord restarts us", exc_info=follow.exception())
        return 1
    finally:
        server.close()
        follow.cancel()
        subscriber.close()
        ctx.destroy(linger=0)


def run(settings: Settings) -> int:
    return run_process("webhook", settings=settings, main=lambda: serve(settings))

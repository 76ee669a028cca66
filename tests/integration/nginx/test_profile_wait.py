"""A route on a location profile nginx.conf does not define (the reload that dropped it ran before the push that
moves the route off it) is never served with other settings: its request waits for the next push and is then
routed by it."""
from __future__ import annotations

import threading
import time

from services.syncer.model.types import HostRoutes

from .conftest import route

HOST = "waiting.profile.test"
PUSH_AFTER_SECONDS = 0.6


def test_a_request_on_an_undefined_profile_waits_for_the_next_push_and_is_served_by_it(shared_nginx, echo):
    app = echo("app")
    backends = {"app": [app.endpoint]}
    shared_nginx.push({HOST: HostRoutes(prefix={"/": route("app", profile="0dropped0000")})}, backends)

    def push_the_moved_route() -> None:
        time.sleep(PUSH_AFTER_SECONDS)
        shared_nginx.push({HOST: HostRoutes(prefix={"/": route("app")})}, backends)

    # The push runs on the test's event loop, which the request below does not use.
    pusher = threading.Thread(target=push_the_moved_route)
    started = time.monotonic()
    pusher.start()
    try:
        answer = shared_nginx.get("/", host=HOST)
    finally:
        pusher.join()
    waited = time.monotonic() - started
    assert (answer.status, answer.backend) == (200, "app")
    assert waited >= PUSH_AFTER_SECONDS  # not served with the default profile's settings before the push

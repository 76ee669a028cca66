"""An Ingress whose settings move it to another location profile is served throughout the reload that brings it.

The reload drops the profile the route used before and the routes table naming the new one is pushed just after
it: a request in between found its route on a profile the new workers do not define, and was answered 503 (seen
at one ConfigMap change in three). Clients sending requests all along must see only answers of the old or of the new
settings.
"""
from __future__ import annotations

import threading
from collections import Counter

import requests

from tests.support import k8s
from tests.support.controller import start_manifests_controller
from tests.support.net import wait_for
from tests.e2e.ingress.scenarios import Stage

PREFIX = "nginx.ingress.kubernetes.io"
HOST = "moving.example.com"


def cors_ingress(origin: str) -> dict:
    # CORS settings belong to the location profile: each origin is a profile of its own, so each change reloads
    # nginx and drops the profile before (no other route uses it). The client's origin is allowed by both.
    return k8s.ingress("moving", [k8s.rule(HOST, ("/", "Prefix", "moving", 80))], annotations={
        f"{PREFIX}/enable-cors": "true", f"{PREFIX}/cors-allow-origin": origin})


def allowed_origin(port: int, session: requests.Session | None = None) -> tuple[int, str | None]:
    answer = (session or requests).get(f"http://127.0.0.1:{port}/", timeout=10,
                                       headers={"Host": HOST, "Origin": "https://a.example.com"})
    return answer.status_code, answer.headers.get("Access-Control-Allow-Origin")


def test_requests_during_a_profile_change_see_the_old_or_the_new_settings_never_an_error(tmp_path, echo):
    controller, cluster = start_manifests_controller(tmp_path, ["--sync-rate-limit=10"])
    try:
        stage = Stage(controller, cluster, echo)
        cluster.apply(*stage.backend("MOVING"))
        cluster.apply(cors_ingress("https://a.example.com"))
        port = controller.http_port
        wait_for(lambda: allowed_origin(port)[0] == 200, 15, what="the Ingress served")

        answers: Counter[tuple[int, str | None]] = Counter()
        stop = threading.Event()

        counting = threading.Lock()

        def client(keepalive: bool) -> None:
            session = requests.Session() if keepalive else None
            while not stop.is_set():
                try:
                    seen = allowed_origin(port, session)
                except requests.ConnectionError:
                    if session is None:
                        raise
                    # A retiring worker closed the kept-alive connection as the request went: any client resends it
                    # (RFC 9112 section 9.3.1).
                    seen = allowed_origin(port, session)
                with counting:
                    answers[seen] += 1

        clients = [threading.Thread(target=client, args=(keepalive,), daemon=True) for keepalive in (True, False, False)]
        for thread in clients:
            thread.start()
        try:
            for origin in ("*", "https://a.example.com", "*", "https://a.example.com"):
                cluster.apply(cors_ingress(origin))
                wait_for(lambda: allowed_origin(port) == (200, origin), 15, what=f"{origin} allowed")
        finally:
            stop.set()
            for thread in clients:
                thread.join(timeout=15)
        errors = {seen: count for seen, count in answers.items() if seen[0] != 200}
        assert not errors, f"answers other than 200 while the profile changed: {errors} (of {sum(answers.values())})"
        assert {origin for _, origin in answers} <= {"https://a.example.com", "*"}
    finally:
        controller.stop()

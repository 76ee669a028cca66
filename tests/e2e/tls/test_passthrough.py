"""SSL passthrough through the whole controller: the proxy processes own the HTTPS port, pass hosts with
ssl-passthrough untouched to their TLS backend by SNI, and hand every other connection to nginx with a
PROXY protocol header, so that terminated hosts still see the client's address."""
import json
import os

import requests

from tests.support import k8s
from tests.support.net import wait_for

from .conftest import BACKEND_IP, BACKEND_NAME
from .pki import https_get, served_certificate, tls_secret

PASSTHROUGH = {"nginx.ingress.kubernetes.io/ssl-passthrough": "true"}
CLIENT_IP = "127.0.30.77"


def _gone(pid: int) -> bool:
    """True once the kernel has closed the process's sockets: every thread has exited, not only the
    main one (a SIGKILLed leader shows as a zombie while its other threads still hold the descriptors)."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
        with open(f"/proc/{pid}/stat") as stat:
            state = stat.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return tasks == [str(pid)] and state in ("Z", "X")


def serve_both(stage, ca, backend_port) -> None:
    """pt.tls.example passed through to the TLS backend, term.tls.example terminated by nginx."""
    port = stage.controller.https_port
    stage.cluster.apply(
        k8s.service("pt-backend", port=443), k8s.endpoint_slice("pt-backend", [BACKEND_IP], backend_port),
        k8s.ingress("pt", [k8s.rule("pt.tls.example", ("/", "Prefix", "pt-backend", 443))], annotations=PASSTHROUGH),
        *stage.backend("TLS-T"), tls_secret("term-cert", ca.issue("term.tls.example")),
        k8s.ingress("term", [k8s.rule("term.tls.example", ("/", "Prefix", "tls-t", 80))],
                    tls=[{"hosts": ["term.tls.example"], "secretName": "term-cert"}]))
    trusted = [ca.cert_path]
    wait_for(lambda: served_certificate(port, "pt.tls.example", trusted)["commonName"] == BACKEND_NAME,
             15, what="pt.tls.example passed through to its backend")
    wait_for(lambda: served_certificate(port, "term.tls.example", trusted)["commonName"] == "term.tls.example",
             15, what="term.tls.example terminated by nginx")


def test_passthrough_and_terminated_hosts_share_the_https_port(passthrough_stage, ca, tls_backend):
    stage = passthrough_stage
    port = stage.controller.https_port
    trusted = [ca.cert_path]
    serve_both(stage, ca, tls_backend)

    passed = https_get(port, "pt.tls.example", "/", trusted, source=CLIENT_IP)
    seen = json.loads(passed.body)
    assert (seen["backend"], seen["client"], seen["sni"]) == ("tls-backend", "127.0.0.1", "pt.tls.example")
    terminated = json.loads(https_get(port, "term.tls.example", "/", trusted, source=CLIENT_IP).body)
    assert terminated["backend"] == "TLS-T"
    assert (terminated["headers"]["x-real-ip"], terminated["headers"]["x-forwarded-for"]) == (CLIENT_IP, CLIENT_IP)
    assert terminated["headers"]["x-forwarded-port"] == str(port)
    # Plain HTTP still goes to nginx, which redirects the terminated host to HTTPS (no port, as ingress-nginx).
    # As ingress-nginx, the trailing slash is dropped (preserve-trailing-slash keeps it).
    assert stage.controller.get("/", "term.tls.example").headers["location"] == "https://term.tls.example"
    # /metrics counts both kinds of connection (from the proxy processes' status, a few seconds old at most).
    wait_for(lambda: _proxy_total(stage, "passthrough") >= 1 and _proxy_total(stage, "to_nginx") >= 1, 10,
             what="passthrough connections on /metrics")


def _proxy_total(stage, outcome: str) -> float:
    text = requests.get(f"http://127.0.0.1:{stage.controller.healthz_port}/metrics", timeout=5).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("pyngress_passthrough_connections_total{") and f'outcome="{outcome}"' in line)


def test_a_killed_proxy_process_is_restarted_and_connections_keep_being_accepted(passthrough_stage, ca,
                                                                                  tls_backend):
    stage = passthrough_stage
    port = stage.controller.https_port
    serve_both(stage, ca, tls_backend)
    killed = stage.controller.kill9("proxy:proxy-0")
    # Until then the kernel still hands connections to the dead process's socket, and resets them with it.
    wait_for(lambda: _gone(killed), 5, what=f"process {killed} gone")

    for _ in range(20):  # every new connection finds a live proxy process
        assert served_certificate(port, "pt.tls.example", [ca.cert_path])["commonName"] == BACKEND_NAME
    wait_for(lambda: "RUNNING" in stage.controller.supervisorctl("status", "proxy:proxy-0")
             and stage.controller.pid("proxy:proxy-0") != killed, 15, what="proxy-0 restarted by supervisord")
    wait_for(lambda: served_certificate(port, "pt.tls.example", [ca.cert_path])["commonName"]
             == BACKEND_NAME, 10, what="passthrough after the restart")
    assert served_certificate(port, "term.tls.example", [ca.cert_path])["commonName"] == "term.tls.example"

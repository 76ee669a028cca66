"""The launcher and reloads: bootstrap, `nginx -t` failures, HUP reloads, a SIGKILLed master, passthrough."""
from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import stat

import pytest

from services.nginxconf import processes
from services.nginxconf.config import LocationProfile
from services.nginxconf.config_check import NginxConfigError
from services.syncer.model.types import HostRoutes

from .conftest import client_tls_context, eventually, route, trust

HOST = "example.test"  # what Nginx.get() sends by default


def test_a_fresh_instance_serves_the_bootstrap_configuration(nginx_factory):
    nginx = nginx_factory()

    response = nginx.get("/anything", host="any.test")
    assert response.status == 404 and b"<title>404 Not Found</title>" in response.body
    assert "server" not in response.headers  # server-tokens false, as ingress-nginx: no Server header at all
    for path in (nginx.paths.conf, nginx.paths.default_certificate):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    trust(nginx.paths.default_certificate)
    assert nginx.get("/", https=True, sni="any.test").peer_subject == "Kubernetes Ingress Controller Fake Certificate"


def test_a_broken_config_is_refused_with_nginx_s_message_and_the_last_one_keeps_serving(nginx_factory, echo):
    nginx = nginx_factory()
    app = echo("app")
    nginx.push({HOST: HostRoutes(prefix={"/": route("app")})}, {"app": [app.endpoint]})
    workers = nginx.worker_pids()
    good = nginx.paths.conf.read_text()
    broken = nginx.config(profiles=[LocationProfile("bad", (("proxy_read_timeout", "not-a-duration"),))])

    with pytest.raises(NginxConfigError) as refused:
        nginx.apply(broken)

    assert '"proxy_read_timeout" directive invalid value' in str(refused.value)
    assert str(nginx.paths.conf) in str(refused.value)
    assert nginx.paths.conf.read_text() == good
    assert not list(nginx.paths.prefix.glob(".nginx.conf.test-*"))
    assert nginx.get("/").backend == "app"
    assert nginx.worker_pids() == workers


def test_a_reload_brings_a_new_profile_and_keeps_the_pushed_tables(nginx_factory, echo):
    nginx = nginx_factory()
    app = echo("app")
    nginx.push({HOST: HostRoutes(prefix={"/": route("app"), "/extra": route("app", profile="extra")})},
               {"app": [app.endpoint]})
    assert nginx.get("/extra").status == 503
    workers = nginx.worker_pids()

    assert nginx.apply(nginx.config(profiles=[LocationProfile("extra", (("proxy_set_header", "X-Extra yes"),))]))

    assert nginx.worker_pids().isdisjoint(workers)
    extra = nginx.get("/extra")
    assert extra.json["headers"]["x-extra"] == "yes"
    assert "x-extra" not in nginx.get("/").json["headers"]
    assert nginx.run(nginx.pusher.needs_push()) is False


def test_after_the_master_is_killed_a_relaunch_reaps_its_workers_and_serves_the_last_tables(nginx_factory, echo):
    nginx = nginx_factory()
    app = echo("app")
    nginx.apply(nginx.config(profiles=[LocationProfile("extra", (("proxy_set_header", "X-Extra yes"),))]))
    nginx.push({HOST: HostRoutes(prefix={"/": route("app", profile="extra")})}, {"app": [app.endpoint]})
    orphans = nginx.worker_pids()

    nginx.kill_master()
    assert {p.pid for p in processes.instance_processes(nginx.paths.prefix)} == orphans  # still holding the ports
    nginx.start()

    # Told to finish and exit once the new master runs workers (services/nginx/retire.py).
    eventually(lambda: orphans.isdisjoint(p.pid for p in processes.instance_processes(nginx.paths.prefix)))
    response = nginx.get("/")
    assert response.backend == "app" and response.json["headers"]["x-extra"] == "yes"
    assert nginx.run(nginx.pusher.needs_push()) is False  # it loaded the state files itself


def test_a_relaunch_touches_no_other_instance(nginx_factory):
    mine, other = nginx_factory(), nginx_factory()
    others = {p.pid for p in processes.instance_processes(other.paths.prefix)}

    mine.kill_master()
    mine.start()

    assert {p.pid for p in processes.instance_processes(other.paths.prefix)} == others
    assert other.get("/").status == 404


def test_a_second_launcher_takes_over_from_a_running_master(nginx_factory):
    nginx = nginx_factory()
    first = nginx.process
    old = {p.pid for p in processes.instance_processes(nginx.paths.prefix)}

    nginx.start()

    # The old master is killed; its workers serve until the new master does, then finish and exit.
    assert first.wait(timeout=15) == -signal.SIGKILL
    eventually(lambda: old.isdisjoint(p.pid for p in processes.instance_processes(nginx.paths.prefix)))
    assert nginx.get("/").status == 404


def test_an_existing_config_that_fails_nginx_t_is_replaced_at_launch(nginx_factory):
    nginx = nginx_factory()
    nginx.stop()
    nginx.paths.conf.write_text("this is not nginx configuration;\n")

    nginx.start()

    assert nginx.get("/").status == 404
    assert "fails nginx -t" in nginx.log()


def test_apply_without_a_running_master_installs_the_file_for_the_next_start(nginx_factory):
    nginx = nginx_factory()
    nginx.stop()
    conf = nginx.config(profiles=[LocationProfile("later")])

    assert nginx.apply(conf) is False

    assert "@profile_later" in nginx.paths.conf.read_text()


@pytest.mark.parametrize("use_proxy_protocol", [False, True], ids=["direct", "behind-a-proxy-protocol-lb"])
def test_behind_the_passthrough_proxy_nginx_takes_tls_with_a_proxy_protocol_header(nginx_factory, echo,
                                                                                   use_proxy_protocol):
    nginx = nginx_factory(ssl_passthrough=True)
    app = echo("app")
    if use_proxy_protocol:  # the load balancer's addresses are trusted too: the Unix socket's must stay so
        nginx.apply(nginx.config(use_proxy_protocol=True))
    nginx.push({HOST: HostRoutes(prefix={"/": route("app")})}, {"app": [app.endpoint]})

    for port in (nginx.https_port, nginx.ssl_passthrough_proxy_port):  # the proxy's port; no TCP port at all
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=5)
    sock = socket.socket(socket.AF_UNIX)
    sock.settimeout(10)
    sock.connect(str(nginx.paths.passthrough_tls_socket))
    sock.sendall(f"PROXY TCP4 203.0.113.7 127.0.0.1 40000 {nginx.https_port}\r\n".encode())
    trust(nginx.paths.default_certificate)
    tls = client_tls_context().wrap_socket(sock, server_hostname=HOST)
    conn = http.client.HTTPConnection("127.0.0.1")
    conn.sock = tls
    conn.request("GET", "/", headers={"Host": HOST})
    headers = json.loads(conn.getresponse().read())["headers"]
    conn.close()

    assert headers["x-real-ip"] == "203.0.113.7"
    assert headers["x-forwarded-proto"] == "https"
    assert headers["x-forwarded-port"] == str(nginx.https_port)


def test_the_launcher_warns_when_workers_cannot_reach_their_temp_directories(nginx_factory):
    nginx = nginx_factory()
    nginx.stop()
    os.chmod(nginx.state_dir, 0o700)

    nginx.start()

    assert "cannot reach their temp directories" in nginx.log() and str(nginx.state_dir) in nginx.log()

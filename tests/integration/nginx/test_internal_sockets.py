"""nginx's internal listeners (the configuration API, the TLS listener behind the passthrough proxy) are
Unix sockets in a root-only directory: no TCP port, and no other local user gets in."""
from __future__ import annotations

import os
import socket
import stat
import subprocess

import pytest

from services.nginxconf import processes
from services.nginxconf.paths import NginxPaths
from services.nginxconf.prefix import PrefixError, prepare, remove_stale_sockets
from tests.support.controller import tcp_ports_listened_by

from .conftest import REPO

# Run as an unprivileged user: tries each socket given and says what happened.
CONNECT_EACH = """
import socket, sys
for path in sys.argv[1:]:
    with socket.socket(socket.AF_UNIX) as s:
        try:
            s.connect(path)
            print("connected")
        except OSError as err:
            print(type(err).__name__)
"""


@pytest.mark.parametrize("ssl_passthrough", [False, True])
def test_nginx_listens_on_tcp_only_on_the_http_and_https_ports(nginx_factory, ssl_passthrough):
    nginx = nginx_factory(ssl_passthrough=ssl_passthrough)

    pids = [p.pid for p in processes.instance_processes(nginx.paths.prefix)]
    assert tcp_ports_listened_by(pids) == ({nginx.http_port} if ssl_passthrough else {nginx.http_port, nginx.https_port})
    assert nginx.api("GET", "/configuration/versions").status == 200
    for port in (nginx.status_port, nginx.ssl_passthrough_proxy_port):  # given as flags, but never opened
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=5)


def test_the_socket_directory_keeps_other_users_out(nginx_factory):
    nginx = nginx_factory(ssl_passthrough=True)
    sockets = [str(nginx.paths.config_socket), str(nginx.paths.passthrough_tls_socket)]
    # Only the socket directory stands in the way: nginx makes its sockets 0666.
    os.chmod(nginx.run_dir, 0o711)

    directory = nginx.paths.socket_dir.stat()
    assert (directory.st_uid, stat.S_IMODE(directory.st_mode)) == (0, 0o700)
    assert all(stat.S_IMODE(os.stat(path).st_mode) == 0o666 for path in sockets)
    as_nobody = subprocess.run(["/usr/bin/python3", "-c", CONNECT_EACH, *sockets], user="nobody",
                               capture_output=True, text=True, timeout=30, check=True)
    as_root = subprocess.run(["/usr/bin/python3", "-c", CONNECT_EACH, *sockets],
                             capture_output=True, text=True, timeout=30, check=True)

    assert as_nobody.stdout.split() == ["PermissionError", "PermissionError"]
    assert as_root.stdout.split() == ["connected", "connected"]


def test_a_socket_directory_left_more_open_is_made_private_again(nginx_factory):
    nginx = nginx_factory()
    nginx.stop()
    os.chmod(nginx.paths.socket_dir, 0o755)

    nginx.start()

    assert stat.S_IMODE(nginx.paths.socket_dir.stat().st_mode) == 0o700


def test_a_socket_directory_of_another_user_is_refused_with_what_to_change(nginx_factory):
    nginx = nginx_factory()
    nginx.stop()
    os.chown(nginx.paths.socket_dir, 65534, 65534)

    launcher = subprocess.run(nginx.launcher_command(), cwd=REPO, capture_output=True, text=True, timeout=60)

    assert launcher.returncode == 2
    assert f"{nginx.paths.socket_dir} is owned by uid 65534" in launcher.stdout + launcher.stderr


def test_stale_sockets_are_removed_but_live_ones_are_not(nginx_factory):
    nginx = nginx_factory()

    with pytest.raises(PrefixError, match="another process listens on .*config.sock: give each pyngress instance"):
        remove_stale_sockets(nginx.paths)  # this instance's nginx still runs
    nginx.kill_master()  # its workers keep the socket; stop_stale ends them, then the file is stale
    processes.stop_stale(nginx.paths.prefix, grace_seconds=2)
    assert nginx.paths.config_socket.exists()
    remove_stale_sockets(nginx.paths)
    assert not nginx.paths.config_socket.exists()


def test_a_run_dir_too_long_for_a_unix_socket_is_refused(tmp_path):
    paths = NginxPaths.of(tmp_path / "state", tmp_path / ("r" * 100))

    with pytest.raises(PrefixError, match="longer than the 107 bytes .* choose a shorter --run-dir"):
        prepare(paths)

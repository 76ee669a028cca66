"""Private run directories and IPC sockets, on the real filesystem with real ZeroMQ sockets (tests run as root)."""
import os
import stat
from pathlib import Path

import pytest
import zmq

from services.common.files import NotPrivateError, ensure_private_dir
from services.common.ipc import bind_private

NOBODY = 65534


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.fixture
def permissive_umask():
    """The loosest umask a process could inherit: bind_private must not depend on it."""
    old = os.umask(0)
    yield 0
    os.umask(old)


@pytest.fixture
def sock():
    ctx = zmq.Context()
    s = ctx.socket(zmq.ROUTER)
    s.setsockopt(zmq.LINGER, 0)
    yield s
    s.close()
    ctx.term()


def test_socket_file_is_0600_right_after_bind_and_the_umask_is_restored(tmp_path, permissive_umask, sock):
    path = tmp_path / "s.sock"
    bind_private(sock, f"ipc://{path}")
    assert stat.S_ISSOCK(os.lstat(path).st_mode) and mode(path) == 0o600
    assert os.umask(permissive_umask) == permissive_umask  # restored: what we set before, not 077


def test_a_stale_socket_file_is_replaced(tmp_path, sock):
    path = tmp_path / "s.sock"
    path.write_text("left by a killed predecessor")
    os.chmod(path, 0o666)
    bind_private(sock, f"ipc://{path}")
    assert stat.S_ISSOCK(os.lstat(path).st_mode) and mode(path) == 0o600
    peer = sock.context.socket(zmq.DEALER)
    peer.setsockopt(zmq.LINGER, 0)
    peer.connect(f"ipc://{path}")
    peer.send(b"hello")
    assert sock.poll(5000) and sock.recv_multipart()[1] == b"hello"
    peer.close()


def test_only_ipc_endpoints_are_taken(sock):
    with pytest.raises(ValueError, match="ipc://"):
        bind_private(sock, "tcp://127.0.0.1:0")


def test_a_missing_run_dir_is_created_0700(tmp_path, permissive_umask):
    run_dir = tmp_path / "a" / "run"
    assert ensure_private_dir(run_dir) == run_dir
    assert mode(run_dir) == 0o700


def test_our_own_run_dir_gets_its_mode_fixed(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    os.chmod(run_dir, 0o755)
    ensure_private_dir(run_dir)
    assert mode(run_dir) == 0o700


def test_a_run_dir_owned_by_another_user_is_refused_and_left_alone(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir(mode=0o755)
    os.chown(run_dir, NOBODY, NOBODY)
    with pytest.raises(NotPrivateError, match=f"{run_dir} is owned by uid {NOBODY}, not by uid {os.geteuid()}.*"
                                              f"chown {os.geteuid()} {run_dir}"):
        ensure_private_dir(run_dir)
    assert (os.lstat(run_dir).st_uid, mode(run_dir)) == (NOBODY, 0o755)


@pytest.mark.parametrize("make, what", [
    (lambda path, target: path.symlink_to(target), "a symlink"),
    (lambda path, target: path.write_text(""), "not a directory"),
])
def test_a_symlink_or_a_file_in_place_of_the_run_dir_is_refused(tmp_path, make, what):
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o755)
    run_dir = tmp_path / "run"
    make(run_dir, target)
    with pytest.raises(NotPrivateError, match=f"{run_dir} is {what}.*remove it"):
        ensure_private_dir(run_dir)
    assert mode(target) == 0o755  # a symlink's target is not touched

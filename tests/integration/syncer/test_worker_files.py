"""WorkerFiles on a real filesystem, as root: modes, owner, group, replacement by rename, clean-up."""
import logging
import os
import pwd
import stat
import tempfile
from pathlib import Path

import pytest

from services.syncer.nginx_apply.worker_files import NGINX_WORKER_USER, WorkerFiles

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the files are given the workers' group: needs root")


@pytest.fixture
def base():
    path = Path(tempfile.mkdtemp(prefix="pyngress-auth-files-", dir="/tmp"))
    os.chmod(path, 0o711)
    yield path
    for child in sorted(path.rglob("*"), reverse=True):
        child.rmdir() if child.is_dir() else child.unlink()
    path.rmdir()


def mode_owner(path: Path) -> tuple[int, int, int]:
    info = path.stat()
    return stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid


def test_files_are_written_for_the_workers_group_and_replaced_whole(base):
    group = pwd.getpwnam(NGINX_WORKER_USER).pw_gid
    writer = WorkerFiles(base / "auth")
    writer.write({"a.htpasswd": b"alice:x\n", "b.htpasswd": b"bob:y\n"})
    assert mode_owner(base / "auth") == (0o750, 0, group)
    assert mode_owner(base / "auth" / "a.htpasswd") == (0o640, 0, group)
    before = (base / "auth" / "a.htpasswd").stat().st_ino

    writer.write({"a.htpasswd": b"alice:z\n", "b.htpasswd": b"bob:y\n"})
    path = base / "auth" / "a.htpasswd"
    # A new inode: a request that opened the old file reads it whole, the next one reads the new file.
    assert path.read_bytes() == b"alice:z\n" and path.stat().st_ino != before
    assert mode_owner(path) == (0o640, 0, group)
    assert sorted(p.name for p in (base / "auth").iterdir()) == ["a.htpasswd", "b.htpasswd"]  # no temp files

    writer.remove_others({"b.htpasswd": b"bob:y\n"})
    assert [p.name for p in (base / "auth").iterdir()] == ["b.htpasswd"]


def test_unchanged_files_are_not_rewritten(base):
    writer = WorkerFiles(base / "auth")
    writer.write({"a.htpasswd": b"alice:x\n"})
    inode = (base / "auth" / "a.htpasswd").stat().st_ino
    writer.write({"a.htpasswd": b"alice:x\n"})
    assert (base / "auth" / "a.htpasswd").stat().st_ino == inode


def test_a_state_dir_the_workers_cannot_reach_is_reported(base, caplog):
    os.chmod(base, 0o700)
    with caplog.at_level(logging.ERROR, logger="syncer"):
        WorkerFiles(base / "auth").write({"a.htpasswd": b"alice:x\n"})
    assert f"let others search {base} (chmod o+x)" in caplog.text

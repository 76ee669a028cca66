"""File helpers shared by the components."""
from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

from services.common.runner import StartupError


def atomic_write(path: str | Path, data: bytes, *, mode: int = 0o644) -> None:
    """Replace `path` with `data` so that readers see the old or the new file, never a partial one."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


class NotPrivateError(StartupError):
    """A path that must be private to this user is not, and is left alone; the message says what to change.

    A StartupError, so that a process run by `run_process` reports it as one line and exits 2."""


def ensure_private_dir(path: str | Path) -> Path:
    """Create `path` (and parents) if missing and make it mode 0700; refuse one that is not ours.

    A directory another user owns (or a symlink, which may point anywhere) could hold sockets and files
    they planted or can replace: trusting it would let them feed this process messages or read its state.
    """
    path = Path(path)
    try:
        path.mkdir(mode=0o700, parents=True)
    except FileExistsError:
        pass  # a directory, a symlink or a file: told apart below
    # Opened without following a symlink, then checked and fixed through the descriptor: nothing can swap
    # the directory between the check and the chmod.
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as err:
        if err.errno in (errno.ELOOP, errno.ENOTDIR):
            what = "a symlink" if path.is_symlink() else "not a directory"
            raise NotPrivateError(f"{path} is {what}, where a private directory is needed: remove it "
                                  f"(pyngress creates it) or choose another directory") from None
        raise
    try:
        owner = os.fstat(fd).st_uid
        if owner != os.geteuid():
            raise NotPrivateError(f"{path} is owned by uid {owner}, not by uid {os.geteuid()} that runs pyngress: "
                                  f"chown {os.geteuid()} {path}, remove it, or choose another directory")
        os.fchmod(fd, 0o700)
    finally:
        os.close(fd)
    return path

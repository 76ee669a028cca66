"""The run directory and the sockets in it, with real pyngress processes: private, or refused with what to change."""
import os
import stat
import subprocess

from tests.integration.watcher.conftest import REPO, watcher_command

NOBODY = 65534


def test_a_run_dir_owned_by_another_user_is_refused_with_what_to_change(tmp_path):
    run_dir, manifests = tmp_path / "run", tmp_path / "manifests"
    run_dir.mkdir(mode=0o755)
    manifests.mkdir()
    os.chown(run_dir, NOBODY, NOBODY)
    done = subprocess.run(watcher_command() + ["up", "--manifests", str(manifests), "--run-dir", str(run_dir),
                                               "--state-dir", str(tmp_path / "state")],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stderr
    assert f"{run_dir} is owned by uid {NOBODY}, not by uid 0" in done.stderr
    assert f"chown 0 {run_dir}" in done.stderr and "Traceback" not in done.stderr
    assert os.listdir(run_dir) == [] and os.lstat(run_dir).st_uid == NOBODY  # nothing was started in it


def test_the_watcher_sockets_are_private(watcher):
    watcher.write("a.yaml", "apiVersion: v1\nkind: Service\nmetadata:\n  name: a\nspec:\n  ports:\n  - port: 80\n")
    old = os.umask(0)  # the watcher inherits the loosest umask there is
    try:
        watcher.start()
    finally:
        os.umask(old)
    watcher.wait_for_status(lambda s: s.get("ready"))
    for name in ("watcher-updates.sock", "watcher-snapshot.sock"):
        info = os.lstat(watcher.run_dir / name)
        assert stat.S_ISSOCK(info.st_mode) and (info.st_uid, stat.S_IMODE(info.st_mode)) == (0, 0o600), name
    assert stat.S_IMODE(os.lstat(watcher.run_dir).st_mode) == 0o700
    assert watcher.stop() == 0

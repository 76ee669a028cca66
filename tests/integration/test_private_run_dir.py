"""Every pyngress process refuses a run directory it does not own, saying what to change, without a traceback."""
import os
import subprocess

import pytest

from tests.integration.watcher.conftest import REPO, watcher_command

NOBODY = 65534


@pytest.mark.parametrize("command", ["up", "watcher", "syncer", "proxy", "cniserver", "cniworker"])
def test_a_run_dir_owned_by_another_user_is_refused_with_what_to_change(tmp_path, command):
    run_dir, manifests = tmp_path / "run", tmp_path / "manifests"
    run_dir.mkdir(mode=0o755)
    manifests.mkdir()
    os.chown(run_dir, NOBODY, NOBODY)
    done = subprocess.run(watcher_command() + [command, "--manifests", str(manifests), "--run-dir", str(run_dir),
                                               "--state-dir", str(tmp_path / "state")],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0, done.stderr
    assert f"{run_dir} is owned by uid {NOBODY}, not by uid 0" in done.stderr, done.stderr
    assert f"chown 0 {run_dir}" in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert os.listdir(run_dir) == [] and os.lstat(run_dir).st_uid == NOBODY  # nothing was started in it

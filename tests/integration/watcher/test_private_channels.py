"""The watcher's run directory and sockets, with a real watcher process started under the loosest umask."""
import os
import stat


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

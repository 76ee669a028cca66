import os
import time

from services.common.settings import Settings
from services.watcher.filters import LAST_APPLIED_ANNOTATION


def names(store):
    return sorted(store)


def test_reads_yaml_yml_and_json_in_the_directory_only(manifests, svc):
    manifests.write("a.yaml", svc("a") + "---\n" + svc("b"))
    manifests.write("c.yml", svc("c"))
    manifests.write("d.json", '{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "d"}}')
    manifests.write(".e.yaml.swp", svc("hidden"))
    manifests.write("notes.txt", svc("text"))
    (manifests.directory / "sub").mkdir()
    (manifests.directory / "sub" / "f.yaml").write_text(svc("nested"))  # kubectl apply -f DIR is not recursive
    store = manifests.scan()
    assert names(store) == ["Service/default/a", "Service/default/b", "Service/default/c", "Service/default/d"]
    assert manifests.source.errors == []


def test_added_changed_and_removed_files_are_followed(manifests, svc):
    manifests.write("a.yaml", svc("a"))
    assert names(manifests.scan()) == ["Service/default/a"]
    manifests.write("b.yaml", svc("b"))
    assert names(manifests.apply()) == ["Service/default/a", "Service/default/b"]
    manifests.write("b.yaml", svc("b", port=8080))
    store = manifests.apply()
    assert store["Service/default/b"]["spec"]["ports"] == [{"port": 8080}]
    os.unlink(manifests.directory / "a.yaml")
    assert names(manifests.apply()) == ["Service/default/b"]
    assert manifests.apply() is None  # nothing more to do


def test_a_same_size_rewrite_is_seen(manifests, svc):
    manifests.write("a.yaml", svc("aaa"))
    manifests.scan()
    manifests.write("a.yaml", svc("bbb"))  # same inode and size, likely the same coarse mtime
    assert names(manifests.apply()) == ["Service/default/bbb"]


def test_a_file_caught_half_written_does_not_drop_objects(manifests, svc):
    manifests.write("a.yaml", svc("a") + "---\n" + svc("b"))
    manifests.scan()
    manifests.write("a.yaml", svc("a"))  # the writer has not got to the second document yet
    assert manifests.scan() is None
    manifests.write("a.yaml", svc("a") + "---\n" + svc("b") + "---\n" + svc("c"))
    assert names(manifests.apply()) == ["Service/default/a", "Service/default/b", "Service/default/c"]


def test_a_file_that_stops_parsing_keeps_its_last_good_objects(manifests, svc):
    manifests.write("good.yaml", svc("other"))
    manifests.write("edit.yaml", svc("a"))
    before = manifests.scan()
    manifests.write("edit.yaml", svc("a") + "  - port: [81\n")
    assert manifests.apply() is None  # the same objects as before
    (error,) = manifests.source.errors
    assert error.startswith(f"{manifests.directory / 'edit.yaml'}:10: ")
    assert "keeping the 1 object it defined when it last parsed" in error
    manifests.write("good.yaml", svc("other", port=90))
    store = manifests.apply()
    assert store["Service/default/a"] == before["Service/default/a"]
    manifests.write("edit.yaml", svc("a", port=81))
    assert manifests.apply()["Service/default/a"]["spec"]["ports"] == [{"port": 81}]
    assert manifests.source.errors == []


def test_a_file_that_never_parsed_defines_nothing(manifests, svc):
    manifests.write("good.yaml", svc("a"))
    manifests.write("bad.yaml", svc("b") + "x: [\n")
    assert names(manifests.scan()) == ["Service/default/a"]
    (error,) = manifests.source.errors
    assert error.startswith(f"{manifests.directory / 'bad.yaml'}:10: did not find expected node content")
    assert "it defines nothing until it parses" in error


def test_last_good_objects_survive_a_restart(manifests, svc):
    manifests.write("edit.yaml", svc("a"))
    before = manifests.scan()
    manifests.write("edit.yaml", "not: [valid\n")
    manifests.apply()
    restarted = manifests.new_source()
    assert manifests.scan(restarted) == before
    assert len(restarted.errors) == 1


def test_invalid_documents_are_skipped_and_the_rest_of_the_file_counts(manifests, svc):
    manifests.write("a.yaml", svc("a") + "---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n---\n"
                    + svc("b"))
    assert names(manifests.scan()) == ["Service/default/a", "Service/default/b"]
    (error,) = manifests.source.errors
    assert error.startswith(f"{manifests.directory / 'a.yaml'}:10, document 2: kind Deployment")


def test_the_later_file_name_wins_with_a_warning(manifests, svc):
    manifests.write("10-a.yaml", svc("web", port=1))
    manifests.write("20-b.yaml", svc("web", port=2))
    store = manifests.scan()
    assert store["Service/default/web"]["spec"]["ports"] == [{"port": 2}]
    (warning,) = manifests.source.warnings
    assert "10-a.yaml" in warning and "the one in 20-b.yaml is used" in warning


def test_metadata_is_filled_and_identical_after_a_restart(manifests, svc):
    manifests.write("a.yaml", svc("a"))
    meta = manifests.scan()["Service/default/a"]["metadata"]
    assert {"uid", "creationTimestamp", "resourceVersion", "generation"} <= meta.keys()
    assert manifests.scan(manifests.new_source())["Service/default/a"]["metadata"] == meta


def test_objects_removed_while_the_watcher_was_down_come_back_as_new_objects(manifests, svc):
    manifests.write("a.yaml", svc("a"))
    uid = manifests.scan()["Service/default/a"]["metadata"]["uid"]
    os.unlink(manifests.directory / "a.yaml")
    assert manifests.scan(manifests.new_source()) == {}
    manifests.write("a.yaml", svc("a"))
    assert manifests.scan(manifests.new_source())["Service/default/a"]["metadata"]["uid"] != uid


def test_filters_apply(manifests_with):
    m = manifests_with(Settings.from_flags(watch_namespace="team"))
    m.write("a.yaml", f"""apiVersion: v1
kind: Secret
metadata: {{name: token, namespace: team}}
type: kubernetes.io/service-account-token
---
apiVersion: v1
kind: Secret
metadata:
  name: cert
  namespace: team
  annotations: {{{LAST_APPLIED_ANNOTATION}: "{{}}"}}
type: kubernetes.io/tls
---
apiVersion: v1
kind: Service
metadata: {{name: elsewhere, namespace: other}}
""")
    store = m.scan()
    assert names(store) == ["Secret/team/cert"]
    assert "annotations" not in store["Secret/team/cert"]["metadata"]


def test_an_unreadable_directory_keeps_the_objects(manifests, svc):
    manifests.write("a.yaml", svc("a"))
    manifests.scan()
    moved = manifests.directory.with_name("moved")
    manifests.directory.rename(moved)
    assert manifests.scan() is None
    (error,) = manifests.source.errors
    assert "cannot list the manifests directory" in error
    moved.rename(manifests.directory)
    manifests.apply()
    assert manifests.source.errors == []


def test_damaged_saved_last_good_objects_are_checked_again(manifests, svc):
    manifests.write("edit.yaml", svc("a") + "---\n" + svc("b"))
    manifests.scan()
    manifests.write("edit.yaml", "not: [valid\n")
    manifests.apply()
    saved = manifests.state_dir / "watcher" / "last-good.json"
    saved.write_text(saved.read_text().replace('"kind":"Service"', '"kind":"Nonsense"', 1))
    assert names(manifests.scan(manifests.new_source())) == ["Service/default/b"]


def _settled(path, text: str) -> None:
    """Write `text` and date it an hour back: no longer in the racy window of its read."""
    path.write_text(text)
    past = path.stat().st_mtime_ns - 3600 * 10**9
    os.utime(path, ns=(past, past))


def test_a_restart_reads_only_the_files_whose_signature_changed(manifests, svc):
    _settled(manifests.directory / "kept.yaml", svc("aaa"))
    _settled(manifests.directory / "changed.yaml", svc("bbb"))
    manifests.scan()
    manifests.source.save_cache()
    # Same inode, size and mtime, other content: only a reader that trusts the signature misses it.
    kept = manifests.directory / "kept.yaml"
    mtime = kept.stat().st_mtime_ns
    kept.write_text(svc("zzz"))
    os.utime(kept, ns=(mtime, mtime))
    (manifests.directory / "changed.yaml").write_text(svc("ccc-longer"))
    restarted = manifests.new_source()
    assert names(manifests.scan(restarted)) == ["Service/default/aaa", "Service/default/ccc-longer"]


def test_a_damaged_parse_cache_reads_everything_again(manifests, svc):
    _settled(manifests.directory / "a.yaml", svc("a"))
    manifests.scan()
    manifests.source.save_cache()
    (manifests.state_dir / "watcher" / "parsed.msgpack").write_bytes(b"\x93not msgpack")
    assert names(manifests.scan(manifests.new_source())) == ["Service/default/a"]


def test_a_long_read_does_not_put_off_the_next_poll(manifests, svc, monkeypatch):
    # A file caught half settled by a long scan (thousands of objects read) is taken at its second sighting: the
    # next poll comes after the poll interval, not after a multiple of the time the reading took.
    import services.watcher.manifests as module
    read = module.read_objects
    monkeypatch.setattr(module, "read_objects", lambda *args: (time.sleep(0.5), read(*args))[1])
    manifests.source.poll_seconds = 1.0
    manifests.write("a.yaml", svc("a"))
    assert names(manifests.scan()) == ["Service/default/a"]
    assert manifests.source.next_poll_seconds() == 1.0  # the listing of one file is far below its 20% share


def test_a_file_too_fresh_to_read_joins_a_scan_whose_reading_took_a_poll_interval(manifests, svc, monkeypatch):
    # Many files landing at once: the last ones written are too fresh to read at the listing (they may be still
    # being written). When reading the others took a poll interval, their second sighting comes then, in the same
    # scan, instead of a whole long read later.
    import services.watcher.manifests as module
    manifests.scan()  # the empty directory: a file now needs two sightings, or to be older than QUIET_NS
    long_ago = time.time() - 10

    def written(name: str, text: str, fresh: bool) -> None:
        manifests.write(name, text)
        if not fresh:
            os.utime(manifests.directory / name, (long_ago, long_ago))

    read = module.read_objects
    monkeypatch.setattr(module, "read_objects", lambda *args: (time.sleep(0.2), read(*args))[1])
    manifests.source.poll_seconds = 0.1
    written("a.yaml", svc("a"), fresh=False)
    written("b.yaml", svc("b"), fresh=True)
    assert names(manifests.scan()) == ["Service/default/a", "Service/default/b"]

    # Read within a poll interval: the fresh file waits for the next scan.
    monkeypatch.setattr(module, "read_objects", read)
    manifests.source.poll_seconds = 10.0
    written("c.yaml", svc("c"), fresh=False)
    written("d.yaml", svc("d"), fresh=True)
    assert names(manifests.scan()) == ["Service/default/a", "Service/default/b", "Service/default/c"]
    assert "Service/default/d" in manifests.scan()


def test_new_objects_of_new_files_are_published_ahead_of_the_end_of_a_scan(manifests, svc, monkeypatch):
    monkeypatch.setattr("services.watcher.manifests.EARLY_OBJECTS", 2)
    manifests.write("a.yaml", svc("kept"))
    manifests.scan()
    for name in ("b", "c", "d"):
        manifests.write(f"{name}.yaml", svc(f"{name}1") + "---\n" + svc(f"{name}2"))
    manifests.write("a.yaml", svc("kept", port=81))  # a file read before: its objects wait for the end
    manifests.write("e.yaml", svc("kept", port=82) + "---\n" + svc("e1"))  # names an object the store has
    time.sleep(0.06)  # settled (QUIET_NS)
    early = []
    store = manifests.scan(early=early)
    assert [sorted(batch) for batch in early] == [[f"Service/default/{n}{i}" for i in (1, 2)] for n in "bcd"]
    assert all(obj["metadata"]["uid"] for batch in early for obj in batch.values())
    # The scan's end brings the rest, and leaves what went early as it went (the same objects).
    assert store["Service/default/kept"]["spec"]["ports"] == [{"port": 82}]  # the later file wins, as always
    assert store["Service/default/b1"] is early[0]["Service/default/b1"]
    assert set(store) == {"Service/default/kept", "Service/default/e1",
                          *(f"Service/default/{n}{i}" for n in "bcd" for i in (1, 2))}
    # As a watcher restarted on the same directory sees it: the same objects and metadata.
    assert manifests.scan(manifests.new_source()) == store


def test_a_clash_between_new_files_read_early_ends_with_the_later_file(manifests, svc, monkeypatch):
    monkeypatch.setattr("services.watcher.manifests.EARLY_OBJECTS", 1)
    manifests.scan()
    manifests.write("10-a.yaml", svc("web", port=1))
    manifests.write("20-b.yaml", svc("web", port=2))
    time.sleep(0.06)
    early = []
    store = manifests.scan(early=early)
    assert [list(batch) for batch in early] == [["Service/default/web"]]  # the first one went early
    assert store["Service/default/web"]["spec"]["ports"] == [{"port": 2}]
    assert manifests.scan(manifests.new_source()) == store

"""`pyngress watcher --manifests DIR` as a real process, followed by a real clone subscriber."""
import os
import stat


def service(name: str, port: int = 80) -> str:
    return f"apiVersion: v1\nkind: Service\nmetadata:\n  name: {name}\nspec:\n  ports:\n  - port: {port}\n"


def ingress(name: str, host: str) -> str:
    return f"""apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: {name}
spec:
  rules:
  - host: {host}
    http:
      paths:
      - path: /
        pathType: Prefix
        backend:
          service: {{name: {name}, port: {{number: 80}}}}
"""


def test_the_store_follows_added_changed_and_removed_files(watcher, follow):
    watcher.write("web.yaml", ingress("web", "web.example") + "---\n" + service("web"))
    watcher.start()
    store = follow(watcher.run_dir)
    state = store.wait_for(lambda s: {"Ingress/default/web", "Service/default/web"} <= s.keys(), "the first file")
    meta = state["Ingress/default/web"]["metadata"]
    assert meta["uid"] and meta["creationTimestamp"] and meta["generation"] == 1

    watcher.write("api.yml", ingress("api", "api.example"))
    store.wait_for(lambda s: "Ingress/default/api" in s, "an added file")

    watcher.write("web.yaml", ingress("web", "www.example") + "---\n" + service("web"))
    state = store.wait_for(lambda s: s["Ingress/default/web"]["spec"]["rules"][0]["host"] == "www.example",
                           "a changed file")
    changed = state["Ingress/default/web"]["metadata"]
    assert (changed["uid"], changed["creationTimestamp"]) == (meta["uid"], meta["creationTimestamp"])
    assert changed["generation"] == 2
    assert int(changed["resourceVersion"]) > int(meta["resourceVersion"])

    os.unlink(watcher.manifests / "api.yml")
    store.wait_for(lambda s: "Ingress/default/api" not in s, "a removed file")

    status = watcher.wait_for_status(lambda s: s["objects"] == 2)
    assert status["source"] == "manifests" and status["errors"] == [] and status["ready"]
    assert status["last_sync"] >= status["last_event"]
    assert stat.S_IMODE(os.stat(watcher.run_dir).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(watcher.state_dir / "watcher").st_mode) == 0o700
    assert watcher.stop() == 0


def test_a_yaml_error_is_reported_and_the_rest_keeps_working(watcher, follow):
    watcher.write("a.yaml", service("a"))
    watcher.write("b.yaml", service("b"))
    watcher.start()
    store = follow(watcher.run_dir)
    before = store.wait_for(lambda s: len(s) == 2, "both services")

    watcher.write("a.yaml", service("a", port=81) + "  - port: [82\n")  # a half-saved edit
    status = watcher.wait_for_status(lambda s: len(s["errors"]) == 1)
    assert status["errors"][0].startswith(f"{watcher.manifests / 'a.yaml'}:9: ")
    assert "keeping the 1 object it defined when it last parsed" in status["errors"][0]

    watcher.write("b.yaml", service("b", port=8080))
    state = store.wait_for(lambda s: s["Service/default/b"]["spec"]["ports"] == [{"port": 8080}],
                           "a change in the other file")
    assert state["Service/default/a"] == before["Service/default/a"]

    watcher.write("a.yaml", service("a", port=81))
    store.wait_for(lambda s: s["Service/default/a"]["spec"]["ports"] == [{"port": 81}], "the fixed file")
    watcher.wait_for_status(lambda s: s["errors"] == [])
    assert watcher.stop() == 0


def test_after_kill_9_and_restart_subscribers_see_the_same_objects(watcher, follow):
    watcher.write("all.yaml", ingress("web", "web.example") + "---\n" + service("web"))
    watcher.start()
    store = follow(watcher.run_dir)
    before = store.wait_for(lambda s: len(s) == 2, "both objects")
    snapshots = store.snapshots

    watcher.kill()
    watcher.start()
    # A new publisher epoch makes the subscriber fetch a new snapshot; it must hold identical objects.
    after = store.wait_for(lambda s: store.snapshots > snapshots, "a new snapshot")
    assert after == before
    for key in before:
        assert after[key]["metadata"]["uid"] == before[key]["metadata"]["uid"]
        assert after[key]["metadata"]["creationTimestamp"] == before[key]["metadata"]["creationTimestamp"]
    assert watcher.stop() == 0


def test_a_missing_directory_is_a_clear_error(watcher):
    os.rmdir(watcher.manifests)
    watcher.start()
    assert watcher.process.wait(20) == 2
    assert "no such directory" in watcher.log.read_text()

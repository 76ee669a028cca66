"""A tenant's Secrets adding up to three times the clone channel's message limit (PYNGRESS_CLONE_MAX_MESSAGE_BYTES,
1 MiB here) do not break synchronisation: the whole controller serves a new Ingress, and again after its syncer
restarts and takes the store in a snapshot of several parts."""
import base64
import os

from tests.e2e.ingress.scenarios import Stage
from tests.support import k8s
from tests.support.controller import Controller, ManifestsCluster
from tests.support.net import wait_for

LIMIT = 1 << 20


def opaque_secret(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": {"name": name, "namespace": "tenant"},
            "data": {"blob": base64.b64encode(os.urandom(75_000)).decode()}}  # 100 KB


def test_secrets_over_the_message_limit_leave_new_ingresses_served(tmp_path, monkeypatch, echo):
    monkeypatch.setenv("PYNGRESS_CLONE_MAX_MESSAGE_BYTES", str(LIMIT))  # every program of the controller inherits it
    cluster = ManifestsCluster(tmp_path / "manifests")
    cluster.apply(k8s.ingress_class("nginx"), *(opaque_secret(f"s{i}") for i in range(30)))
    controller = Controller(tmp_path, [f"--manifests={cluster.directory}"]).start()
    try:
        stage = Stage(controller, cluster, echo)
        cluster.apply(*stage.backend("LARGE"), k8s.ingress("first", [k8s.rule("first.tenant.example",
                                                                             ("/", "Prefix", "large", 80))]))
        stage.expect("first.tenant.example", "/", "LARGE")

        old_pid = controller.kill9("syncer")
        wait_for(lambda: controller.pid("syncer") not in (0, old_pid), 10, what="syncer restarted")
        cluster.apply(k8s.ingress("second", [k8s.rule("second.tenant.example", ("/", "Prefix", "large", 80))]))
        stage.expect("second.tenant.example", "/", "LARGE")
        assert stage.served_by("first.tenant.example", "/") == "LARGE"
        log = controller.log_path.read_text(errors="replace")
        assert "refused" not in log and "rejected snapshot" not in log
    finally:
        controller.stop()

"""The Ingresses and orphans /metrics reports follow each model's changes: one change looks at its own hosts, not at
every route (a pass over 100,000 hosts held the syncer's event loop 3.7 s at each scrape)."""
from __future__ import annotations

import json

from prometheus_client import Gauge, generate_latest

from services.common.objects import object_key
from services.common.settings import Settings
from services.syncer.model.incremental import IncrementalModel
from services.syncer.model.problems import Problem
from services.syncer.observability.metrics import SyncerMetrics

HOSTS = 200


def metrics_of(tmp_path, cluster):
    metrics = SyncerMetrics(Settings.from_flags(run_dir=str(tmp_path / "run"), state_dir=str(tmp_path / "state")))
    model = IncrementalModel(cluster.settings)
    metrics.note_routes(model.update(cluster.store, None))
    return metrics, model


def change(metrics, model, cluster, *objects, removed=()):
    keys = {object_key(obj) for obj in objects} | set(removed)
    for key in removed:
        del cluster.store[key]
    before = metrics.routed.hosts_looked_at
    metrics.note_routes(model.update(cluster.store, keys))
    return metrics.routed.hosts_looked_at - before


def app(cluster, name: str, addresses=("10.0.0.1",)) -> None:
    """A Service, its one EndpointSlice (named as it, to be replaced) and an Ingress to it."""
    cluster.service(name)
    cluster.endpoint_slice(name, name=name, addresses=addresses)
    cluster.ingress(name, host=f"{name}.example.com", paths=(("/", "Prefix", name, 80),))


def requests_of(ingress: str, layout) -> bytes:
    namespace, name = ingress.split("/")
    key = f"{name}.example.com\t{namespace}\t{name}\t{name}\t/\t\t200\tGET"
    return json.dumps([{key: [1] * layout.width}]).encode()


def test_one_change_looks_at_its_hosts_only(tmp_path, cluster):
    cluster.ingress_class()
    for i in range(HOSTS):
        app(cluster, f"app{i}")
    metrics, model = metrics_of(tmp_path, cluster)
    assert metrics.routed.hosts_looked_at == HOSTS
    assert len(metrics.routed.ingresses) == HOSTS and not metrics.routed.orphans

    # Its endpoints gone: one host looked at again, the Ingress orphaned.
    assert change(metrics, model, cluster, cluster.endpoint_slice("app7", name="app7", addresses=())) == 1
    assert metrics.routed.current_orphans() == {("default/app7", "no-endpoint")}
    # A new Ingress without its Service.
    assert change(metrics, model, cluster, cluster.ingress("lone", host="lone.example.com",
                                                            paths=(("/", "Prefix", "nothing", 80),))) == 1
    assert ("default/lone", "no-service") in metrics.routed.current_orphans()
    # Endpoints back: no longer orphaned, still reported (as 0) since it was.
    assert change(metrics, model, cluster, cluster.endpoint_slice("app7", name="app7")) == 1
    assert ("default/app7", "no-endpoint") not in metrics.routed.current_orphans()
    assert ("default/app7", "no-endpoint") in metrics.routed.orphans_ever


def test_a_deleted_ingress_takes_its_request_series_and_later_batches_add_none(tmp_path, cluster):
    cluster.ingress_class()
    for i in range(3):
        app(cluster, f"app{i}")
    metrics, model = metrics_of(tmp_path, cluster)
    requests = metrics.requests
    for i in range(3):
        requests.add_batches(requests_of(f"default/app{i}", requests.layout))
    assert len(requests.totals) == 3

    key = next(key for key in cluster.store if key.startswith("Ingress/") and key.endswith("/app1"))
    assert change(metrics, model, cluster, removed=[key]) == 1
    assert sorted(labels[2] for labels in requests.totals) == ["app0", "app2"]
    requests.add_batches(requests_of("default/app1", requests.layout))  # a request served before the delete
    assert sorted(labels[2] for labels in requests.totals) == ["app0", "app2"]


def test_problem_counts_write_only_what_changed(tmp_path, monkeypatch):
    metrics = SyncerMetrics(Settings.from_flags(run_dir=str(tmp_path / "run"), state_dir=str(tmp_path / "state")))
    problems = [Problem.warning(f"Ingress default/app{i}", "annotation ignored") for i in range(HOSTS)]
    metrics.set_problems(problems)
    written = []
    real_labels = Gauge.labels
    monkeypatch.setattr(Gauge, "labels", lambda self, *values: written.append(values) or real_labels(self, *values))
    metrics.set_problems([*problems[1:], Problem.error("Ingress default/app5", "refused")])
    assert written == [("default", "app5", "error")]
    text = generate_latest(metrics.registry).decode()
    assert 'ingress="app0"' not in text and 'ingress="app1",namespace="default",severity="warning"} 1.0' in text

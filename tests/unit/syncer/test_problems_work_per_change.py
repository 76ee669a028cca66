"""One change costs the problems' sorting, counting and logging the problems it changed: counted (problems counted
by the syncer), not timed, at two sizes, with every Ingress rejected; what /metrics shows and the lines logged are
those of a count of every problem. Before, each sync sorted, formatted and counted every problem (10,000 at
10,000 rejected Ingresses) to find the few that changed (issue 37)."""
from __future__ import annotations

from typing import Any, Callable

import pytest

from services.common.settings import Settings
from services.syncer.main import ProblemCount
from services.syncer.model.build import build_model
from services.syncer.model.incremental import IncrementalModel
from services.syncer.model.problems import Problem
from services.syncer.model.types import Model
from services.syncer.observability.metrics import SyncerMetrics


def shown(metrics: SyncerMetrics) -> tuple[float | None, dict[tuple[str, ...], float]]:
    """What /metrics shows of the problems: the rejected objects, and each Ingress's problems by severity."""
    per_ingress = {tuple(sample.labels.values()): sample.value for family in metrics.registry.collect()
                   if family.name == "pyngress_ingress_problems" for sample in family.samples}
    return metrics.registry.get_sample_value("pyngress_rejected_objects"), per_ingress


def reject(cluster, name: str) -> None:
    """An Ingress refused by its plan: its auth-secret is missing."""
    cluster.app(name, host=f"{name}.example", annotations={"auth-type": "basic", "auth-secret": "missing"})


def canary_alone(cluster, name: str) -> None:
    """An Ingress rejected when merged with the others: a canary without a main Ingress."""
    cluster.app(name, host=f"{name}.example", annotations={"canary": "true", "canary-weight": "10"})


@pytest.mark.parametrize("n", [100, 1000])
def test_a_change_counts_the_problems_it_changed(cluster, tmp_path, n):
    for i in range(n):
        (reject if i % 2 else canary_alone)(cluster, f"app{i}")
    settings = Settings.from_flags(run_dir=str(tmp_path / "run"), state_dir=str(tmp_path / "state"))
    metrics = SyncerMetrics(settings)
    incremental = IncrementalModel(cluster.settings)
    count = ProblemCount(metrics)
    late: list[Problem] = []  # added to the model after it was built, as nginx's refusals are

    def sync(change: Callable[[], Any] | None) -> tuple[list[str], int]:
        """(the lines logged as new, the problems counted) by the sync after `change`."""
        before = dict(cluster.store)
        if change is not None:
            change()
        keys = {key for key in before.keys() | cluster.store.keys() if before.get(key) is not cluster.store.get(key)}
        model: Model = incremental.update(cluster.store, None if change is None else keys)
        assert model == build_model(cluster.store, settings=cluster.settings)  # the same problems, in the same order
        model.problems.extend(late)
        count.changed(incremental.take_problem_changes())
        counted = metrics.problems_counted
        new = count.count(model)
        everything = SyncerMetrics(settings)
        everything.set_problems(model.problems)
        assert shown(metrics) == shown(everything)
        return new, metrics.problems_counted - counted

    new, counted = sync(None)  # the first: every problem
    assert len(new) == counted == n and shown(metrics)[0] == n

    # A change without problems.
    assert sync(lambda: cluster.app("fine", host="fine.example")) == ([], 0)
    # One more rejected Ingress: its problem, logged.
    assert sync(lambda: reject(cluster, "new")) == ([
        "Ingress default/new: auth-secret default/missing was not found (pyngress reads Opaque Secrets in the "
        "namespaces it watches); its paths answer 503 until the Secret is fixed"], 1)
    # A rejected Ingress changed, rejected as before: its problem out and in again, not logged.
    assert sync(lambda: cluster.ingress("app1", host="app1.example", paths=(("/", "Prefix", "app1", 80),),
                                        annotations={"auth-type": "basic", "auth-secret": "missing",
                                                     "proxy-body-size": "1m"})) == ([], 2)
    # A canary deleted: its problem goes.
    assert sync(lambda: cluster.store.pop("Ingress/default/app0")) == ([], 1)
    # A problem nginx adds after the build: counted while it lasts, with the model's others each time.
    late.append(Problem.error("Ingress default/fine", "nginx refused its backend"))
    assert sync(lambda: None) == (["Ingress default/fine: nginx refused its backend"], 1)
    late.clear()
    assert sync(lambda: None) == ([], 1)

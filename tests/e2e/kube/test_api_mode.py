"""The ingress scenarios of tests/e2e/ingress/scenarios.py, with the cluster being a Kubernetes API server:
objects created and replaced through the official client → watcher (list+watch) → syncer → real nginx."""
from __future__ import annotations

import time

import pytest
from kubernetes import client

from tests.e2e.ingress import scenarios
from tests.e2e.ingress.scenarios import Stage
from tests.e2e.kube.helpers import api_controller
from tests.support import k8s

# The API server stamps creationTimestamp itself, in whole seconds.
CREATION_TIMESTAMP_RESOLUTION_SECONDS = 1.0


@pytest.fixture(scope="module")
def controller(tmp_path_factory, kubeconfig, cluster):
    controller = api_controller(tmp_path_factory.mktemp("api"), kubeconfig).start()
    yield controller
    controller.stop()


@pytest.fixture
def stage(controller, cluster, echo):
    return Stage(controller, cluster, echo)


def test_matching_matrix(stage):
    scenarios.matching_matrix(stage)


def test_prefix_matches_whole_path_elements(stage):
    scenarios.prefix_matches_whole_path_elements(stage)


def test_hosts_unknown_host_and_missing_service(stage):
    scenarios.hosts_unknown_host_and_missing_service(stage)


def test_endpoints_change_without_reload(stage):
    scenarios.endpoints_change_without_reload(stage)


def test_ingress_class_matrix(stage):
    scenarios.ingress_class_matrix(stage, watch_without_class=False)


def test_invalid_object_is_refused_by_the_api_and_other_routes_keep_working(stage):
    def create_invalid_object():
        # What a broken manifest is to the manifests source, an invalid object is to the API: refused at
        # the door, so the controller never sees it.
        with pytest.raises(client.ApiException) as refused:
            stage.cluster.create(k8s.ingress("Not_A_Valid_Name", [k8s.rule("invalid.example.com",
                                                                           ("/", "Prefix", "good", 80))]))
        assert refused.value.status == 422
    scenarios.bad_input_leaves_other_routes_working(stage, create_invalid_object)


@pytest.mark.skip(reason="scenarios.oldest_ingress_wins sets creationTimestamp in the objects; an API server "
                         "stamps its own on create (see test_oldest_ingress_by_the_api_creation_time_wins)")
def test_oldest_ingress_wins(stage):
    scenarios.oldest_ingress_wins(stage)


def test_oldest_ingress_by_the_api_creation_time_wins(stage):
    host = "first-come.example.com"
    stage.cluster.apply(*stage.backend("FIRST"), *stage.backend("SECOND"))
    # Named so that ordering by name alone would pick the later one.
    stage.cluster.apply(k8s.ingress("z-first", [k8s.rule(host, ("/", "Prefix", "first", 80))]))
    time.sleep(CREATION_TIMESTAMP_RESOLUTION_SECONDS + 0.1)
    stage.cluster.apply(k8s.ingress("a-second", [k8s.rule(host, ("/", "Prefix", "second", 80))]))
    stage.expect(host, "/", "FIRST")
    stage.cluster.delete(k8s.ingress("z-first"))
    stage.expect(host, "/", "SECOND")

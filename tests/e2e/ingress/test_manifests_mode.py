"""The ingress data path in manifests mode: files → watcher → syncer → real nginx → echo backends."""
import pytest

from tests.e2e.ingress import scenarios
from tests.e2e.ingress.scenarios import Stage
from tests.support.controller import start_manifests_controller


@pytest.fixture
def stage(manifests_controller, echo):
    controller, cluster = manifests_controller
    return Stage(controller, cluster, echo)


def test_matching_matrix(stage):
    scenarios.matching_matrix(stage)


def test_prefix_matches_whole_path_elements(stage):
    scenarios.prefix_matches_whole_path_elements(stage)


def test_hosts_unknown_host_and_missing_service(stage):
    scenarios.hosts_unknown_host_and_missing_service(stage)


def test_oldest_ingress_wins(stage):
    scenarios.oldest_ingress_wins(stage)


def test_endpoints_change_without_reload(stage):
    scenarios.endpoints_change_without_reload(stage)


def test_yaml_error_and_dangling_ingress_leave_other_routes_working(stage):
    def write_broken_file():
        stage.cluster.write("broken.yaml", "kind: Ingress\nmetadata:\n  name: [unclosed\n")
    scenarios.bad_input_leaves_other_routes_working(stage, write_broken_file)


def test_ingress_class_matrix(stage):
    scenarios.ingress_class_matrix(stage, watch_without_class=False)


def test_ingress_class_matrix_with_watch_ingress_without_class(tmp_path, echo):
    controller, cluster = start_manifests_controller(tmp_path, ["--watch-ingress-without-class"])
    try:
        scenarios.ingress_class_matrix(Stage(controller, cluster, echo), watch_without_class=True)
    finally:
        controller.stop()

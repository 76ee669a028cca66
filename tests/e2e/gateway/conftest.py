"""One controller per module, serving a GatewayClass of pyngress's and the Gateways the tests declare."""
from __future__ import annotations

from dataclasses import dataclass

import pytest

from tests.e2e.ingress.scenarios import Stage
from tests.support import gateway_objects as gw
from tests.support.controller import start_manifests_controller
from tests.support.net import wait_for


@dataclass
class GatewayStage(Stage):
    """Stage (tests/e2e/ingress/scenarios.py) with what Gateway API tests ask of a request."""

    def answer(self, host: str, path: str, **kwargs) -> dict:
        """The echo backend's JSON (with "status"), or {"status": code} for another answer."""
        response = self.controller.request(kwargs.pop("method", "GET"), path, host, **kwargs)
        try:
            found = response.json() if response.status_code == 200 else {}
        except ValueError:
            found = {}
        return {**found, "status": response.status_code, "response": response}

    def expect_answer(self, host: str, path: str, want: str | int, timeout: float = 10.0, **kwargs) -> dict:
        """Wait until a request is answered by backend `want` (or with status `want`); returns the answer."""
        seen: list[dict] = []

        def answered() -> bool:
            seen.append(self.answer(host, path, **kwargs))
            return seen[-1].get("backend", seen[-1]["status"]) == want
        try:
            wait_for(answered, timeout, what=f"{host}{path} {kwargs or ''} → {want}")
        except AssertionError as err:
            raise AssertionError(f"{err}; the last answer: {seen[-1].get('backend', seen[-1]['status'])}") from None
        return seen[-1]


@pytest.fixture(scope="module")
def stage(tmp_path_factory, echo):
    controller, cluster = start_manifests_controller(tmp_path_factory.mktemp("gateway"))
    cluster.apply(gw.gateway_class())
    yield GatewayStage(controller, cluster, echo)
    controller.stop()

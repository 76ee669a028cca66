"""What the kube e2e modules share: a controller watching the API, and what the API says should be served."""
from __future__ import annotations

from pathlib import Path

from tests.kube_api import KubeApiServer
from tests.support.controller import Controller, EchoBackends

SERVICE_NAME_LABEL = "kubernetes.io/service-name"


def api_controller(workdir: Path, kubeconfig: str, *extra_args: str) -> Controller:
    """A controller (not yet started) watching the API server `kubeconfig` names."""
    return Controller(workdir, [f"--kubeconfig={kubeconfig}"], list(extra_args))


def expected_backend(api: KubeApiServer, echo: EchoBackends, host: str) -> str:
    """What `host` + "/" should answer according to the API's objects now: the echo backend's name, "503"
    (a Service without ready endpoints) or "404" (no Ingress for the host).

    For the simple shapes the fault tests use: one Ingress rule per host, one path "/", every ready
    endpoint of the Service being one echo backend.
    """
    names_by_ip = {ip: name for name, ip in echo.ips.items()}
    for ingress in api.objects("Ingress"):
        for rule in ingress["spec"].get("rules") or []:
            if rule.get("host") != host:
                continue
            namespace = ingress["metadata"]["namespace"]
            service = rule["http"]["paths"][0]["backend"]["service"]["name"]
            ready = sorted({names_by_ip[endpoint["addresses"][0]]
                            for slice_ in api.objects("EndpointSlice")
                            if slice_["metadata"]["namespace"] == namespace
                            and (slice_["metadata"].get("labels") or {}).get(SERVICE_NAME_LABEL) == service
                            for endpoint in slice_.get("endpoints") or []
                            if (endpoint.get("conditions") or {}).get("ready", True)})
            assert len(ready) <= 1, f"{host}: expected_backend handles one endpoint per Service, got {ready}"
            return ready[0] if ready else "503"
    return "404"

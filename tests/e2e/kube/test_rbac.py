"""The install manifests' RBAC is exactly what the controller needs: installed into the API test server
(RBAC enforced for ServiceAccount tokens, tests/kube_api/rbac.py), the controller runs with the manifests'
ServiceAccount token and the Deployment's own arguments; everything works. Then each verb of each rule of
the ClusterRole and the Role is taken away in turn, the controller's processes that use it restarted, and a 403
naming the resource must show in its log and in /healthz's detail.
"""
from __future__ import annotations

import copy
import json
import requests
import time
import xmlrpc.client
from dataclasses import dataclass
from typing import Any, Iterator

import pytest
from kubernetes import client
from kubernetes.dynamic import DynamicClient
from supervisor.xmlrpc import SupervisorTransport

from services.tools import install_manifests as m
from tests.e2e.ingress.scenarios import Stage
from tests.e2e.kube.helpers import api_controller
from tests.kube_api import KubeApiServer
from tests.kube_api.resources import RESOURCE_TYPES
from tests.support import gateway_objects as gw
from tests.support import k8s
from tests.support.controller import Controller
from tests.support.kube_cluster import ApiCluster
from tests.support.net import wait_for

NS = m.DEFAULT_NAMESPACE
POD_NAME = "pyngress-controller-rbac-test"
LOAD_BALANCER_IP = "203.0.113.10"
HOST = "rbac.example.com"
APP_NAMESPACE = "shop"
LOG_WAIT_SECONDS = 15.0
HEALTHZ_WAIT_SECONDS = 5.0
# One object of each Gateway API kind whose status pyngress writes, by the plural its status permission names.
GATEWAY_OBJECTS = {
    "gatewayclasses": gw.gateway_class(),
    "gateways": gw.gateway("rbac-gw", ns=APP_NAMESPACE),
    "httproutes": gw.http_route("rbac-http", ns=APP_NAMESPACE, parents=[{"name": "rbac-gw"}],
                                hostnames=["http.gw.rbac.example.com"], rules=[gw.rule(gw.backend_ref("rbac"))]),
    "grpcroutes": gw.grpc_route("rbac-grpc", ns=APP_NAMESPACE, parents=[{"name": "rbac-gw"}],
                                hostnames=["grpc.gw.rbac.example.com"], rules=[gw.rule(gw.backend_ref("rbac"))]),
    "tlsroutes": gw.tls_route("rbac-tls", gw.backend_ref("rbac", 443), ns=APP_NAMESPACE, parents=[{"name": "rbac-gw"}],
                              hostnames=["tls.gw.rbac.example.com"]),
    # The HTTPRoute's Service: the policy's status names the route's Gateway as its ancestor.
    "backendtlspolicies": gw.backend_tls_policy("rbac-tls-policy", "rbac", hostname="rbac.internal", ns=APP_NAMESPACE),
}
@dataclass(frozen=True)
class Case:
    role_kind: str   # "ClusterRole" or "Role"
    rule_index: int
    verb: str
    resource: str

    def __str__(self) -> str:
        return f"{self.role_kind} {self.resource} {self.verb}"


def _kind_of(resource: str) -> str:
    [kind] = [r.kind for r in RESOURCE_TYPES if r.plural == resource]
    return kind


def _is_custom(resource: str) -> bool:
    """A kind of a CRD (the Gateway API's)."""
    return any(r.custom for r in RESOURCE_TYPES if r.plural == resource)


def expected_log(case: Case) -> tuple[str, ...]:
    """What one log line must hold (backslashes left out) to report this case's 403 and name what was refused."""
    if case.resource == "leases":
        return "lease request failed", f"lease={NS}/{m.ELECTION_ID}", "403"
    if case.resource == "ingresses/status":
        return "Ingress status update failed", "403", 'cannot patch resource "ingresses/status"'
    if case.resource.endswith("/status"):  # the Gateway API kinds'
        return "Gateway API status update failed", "403", f'cannot patch resource "{case.resource}"'
    if case.verb == "get":  # the --publish-service Service
        return "Ingress status update failed", "403", f'services "{m.CONTROLLER}" is forbidden'
    # The watcher names its target: the kind (and the namespace when it watches one in particular).
    kind = _kind_of(case.resource)
    return "Kubernetes API request failed", f"target={kind} " if case.role_kind == "ClusterRole" \
        else f'target="{kind} in {NS}"', "HTTP 403"


def reported(log: str, needles: tuple[str, ...]) -> bool:
    return any(all(needle in line for needle in needles) for line in log.replace("\\", "").splitlines())


def removal_cases() -> list[Case]:
    documents = m.manifests(m.Options())
    cases = []
    for role_kind in ("ClusterRole", "Role"):
        [role] = [d for d in documents if d["kind"] == role_kind and d["metadata"]["name"] == m.NAME]
        for index, rule in enumerate(role["rules"]):
            [resource] = rule["resources"]
            cases += [Case(role_kind, index, verb, resource) for verb in rule["verbs"]]
    return cases


class Installation:
    """The manifests installed into the API server, and the admin's means to bend them per case."""

    def __init__(self, api: KubeApiServer) -> None:
        self.api = api
        self.api_client = client.ApiClient(api.configuration())
        self.dynamic = DynamicClient(self.api_client)
        self.documents = m.manifests(m.Options())
        self.cluster = ApiCluster(self.api_client)

    def resource(self, kind: str, api_version: str) -> Any:
        return self.dynamic.resources.get(api_version=api_version, kind=kind)

    def install(self) -> None:
        """Everything but the Deployment, as `kubectl apply -f deploy/` would create it."""
        for doc in self.documents:
            if doc["kind"] != "Deployment":
                self.resource(doc["kind"], doc["apiVersion"]).create(body=doc, namespace=doc["metadata"].get("namespace"))
        # What a cloud's load balancer controller would write: the address Ingress status must show.
        client.CoreV1Api(self.api_client).patch_namespaced_service_status(
            m.CONTROLLER, NS, {"status": {"loadBalancer": {"ingress": [{"ip": LOAD_BALANCER_IP}]}}})
        self.cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": APP_NAMESPACE}})
        for obj in GATEWAY_OBJECTS.values():
            self.resource(obj["kind"], obj["apiVersion"]).create(body=obj, namespace=obj["metadata"].get("namespace"))

    def token(self) -> str:
        answer = client.CoreV1Api(self.api_client).create_namespaced_service_account_token(m.NAME, NS, {"spec": {}})
        return answer.status.token

    def role(self, kind: str) -> dict[str, Any]:
        [role] = [d for d in self.documents if d["kind"] == kind and d["metadata"]["name"] == m.NAME]
        return role

    def set_rules(self, kind: str, rules: list[dict[str, Any]]) -> None:
        role = self.role(kind)
        self.resource(kind, role["apiVersion"]).patch(
            body={"rules": rules}, name=m.NAME, namespace=role["metadata"].get("namespace"),
            content_type="application/merge-patch+json")

    def restore(self) -> None:
        for kind in ("ClusterRole", "Role"):
            self.set_rules(kind, self.role(kind)["rules"])

    def remove(self, case: Case) -> None:
        """The role as generated, less one verb of one rule (the rule goes when it has no verb left)."""
        self.restore()
        rules = copy.deepcopy(self.role(case.role_kind)["rules"])
        rules[case.rule_index]["verbs"].remove(case.verb)
        if not rules[case.rule_index]["verbs"]:
            del rules[case.rule_index]
        self.set_rules(case.role_kind, rules)

    # --- the Lease and the Ingress status, set up so that the verb under test is the next one used ---

    def lease(self) -> dict[str, Any] | None:
        found = [o for o in self.api.objects("Lease") if o["metadata"]["name"] == m.ELECTION_ID]
        return found[0] if found else None

    def prepare(self, case: Case) -> None:
        coordination = client.CoordinationV1Api(self.api_client)
        if case.resource == "leases" and case.verb == "create" and self.lease():
            coordination.delete_namespaced_lease(m.ELECTION_ID, NS)
        if case.resource == "leases" and case.verb == "update" and not self.lease():
            coordination.create_namespaced_lease(NS, {"metadata": {"name": m.ELECTION_ID}, "spec": {}})
        if case.resource == "ingresses/status":
            self.clear_status()
        if case.resource.removesuffix("/status") in GATEWAY_OBJECTS:
            self.clear_gateway_status(case.resource.removesuffix("/status"))

    def clear_status(self) -> None:
        client.NetworkingV1Api(self.api_client).patch_namespaced_ingress_status(
            "rbac", APP_NAMESPACE, {"status": {"loadBalancer": {"ingress": None}}})

    def clear_gateway_status(self, plural: str) -> None:
        """The status of that kind's object as pyngress has not written it yet."""
        obj = GATEWAY_OBJECTS[plural]
        status = {"parents": []} if plural.endswith("routes") else \
            {"ancestors": []} if plural == "backendtlspolicies" else {"conditions": []}
        self.resource(obj["kind"], obj["apiVersion"]).status.patch(
            body={"metadata": {"name": obj["metadata"]["name"]}, "status": status}, name=obj["metadata"]["name"],
            namespace=obj["metadata"].get("namespace"), content_type="application/merge-patch+json")

    def gateway_status_written(self) -> bool:
        """Whether each Gateway API object shows a status pyngress wrote."""
        found = {plural: self.resource(obj["kind"], obj["apiVersion"]).get(
            name=obj["metadata"]["name"], namespace=obj["metadata"].get("namespace")).to_dict()
            for plural, obj in GATEWAY_OBJECTS.items()}
        return all(any(p.get("controllerName") == gw.CONTROLLER for p in (found[plural].get("status") or {}).get(
            "parents") or ()) for plural in ("httproutes", "grpcroutes", "tlsroutes")) and all(
            "observedGeneration" in ((found[plural].get("status") or {}).get("conditions") or [{}])[0]
            for plural in ("gatewayclasses", "gateways")) and any(
            a.get("controllerName") == gw.CONTROLLER
            for a in (found["backendtlspolicies"].get("status") or {}).get("ancestors") or ())

    def published(self) -> list[str]:
        [ingress] = [o for o in self.api.objects("Ingress") if o["metadata"]["name"] == "rbac"]
        return [e.get("ip") for e in ((ingress.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []]


def deployment_args() -> list[str]:
    """The controller container's args with $(POD_NAMESPACE) expanded, as the kubelet does."""
    [deployment] = [d for d in m.manifests(m.Options()) if d["kind"] == "Deployment"]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["pyngress", "up"]
    return [arg.replace("$(POD_NAMESPACE)", NS) for arg in container["args"]]


@pytest.fixture(scope="module")
def api() -> Iterator[KubeApiServer]:
    # No token is nobody here: only the admin token and the ServiceAccount's get through.
    with KubeApiServer(anonymous_is_admin=False) as server:
        yield server


@pytest.fixture(scope="module")
def installation(api) -> Iterator[Installation]:
    installation = Installation(api)
    installation.install()
    yield installation
    installation.api_client.close()


@pytest.fixture(scope="module")
def controller(tmp_path_factory, api, installation, echo) -> Iterator[Controller]:
    kubeconfig = api.write_kubeconfig(tmp_path_factory.mktemp("sa") / "kubeconfig", token=installation.token())
    with pytest.MonkeyPatch.context() as env:
        # The Deployment's downward API: the Lease lives in the pod's namespace, held under its name.
        env.setenv("POD_NAME", POD_NAME)
        env.setenv("POD_NAMESPACE", NS)
        controller = api_controller(tmp_path_factory.mktemp("rbac"), kubeconfig, *deployment_args())
        stage = Stage(controller, installation.cluster, echo)
        installation.cluster.apply(*stage.backend("RBAC", namespace=APP_NAMESPACE),
                                   k8s.ingress("rbac", [k8s.rule(HOST, ("/", "Prefix", "rbac", 80))],
                                               namespace=APP_NAMESPACE))
        controller.start()
        try:
            yield controller
        finally:
            controller.stop()


def programs_refused(case: Case) -> tuple[str, ...]:
    """The processes whose requests `case` refuses: the watcher lists and watches; the syncer writes the statuses, gets
    the --publish-service Service and holds the Lease. A refused list also keeps the syncer's store unsynced, which
    only a syncer started afresh shows (one that had synced before stays synced through a watcher restart)."""
    if case.verb == "watch":
        return ("watcher",)
    if case.verb == "list":
        return ("syncer", "watcher")
    return ("syncer",)


def restart_api_clients(controller: Controller, programs: tuple[str, ...]) -> None:
    """Restart `programs` of those that talk to the API (the syncer before the watcher): new connections, new
    requests, nothing carried over; nginx keeps serving what it had, as through an API outage. Through
    supervisord's XML-RPC socket, without waiting for `startsecs`: a whole `pyngress up` per case, or
    supervisorctl's waits, would double the module's time. The log shows the new processes start."""
    supervisor = xmlrpc.client.ServerProxy(
        "http://127.0.0.1", transport=SupervisorTransport(serverurl=f"unix://{controller.run_dir}/supervisor.sock"))
    for program in ("syncer", "watcher"):  # the syncer releases the Lease as it stops
        if program in programs:
            supervisor.supervisor.stopProcess(program, True)
    for program in ("watcher", "syncer"):
        if program in programs:
            supervisor.supervisor.startProcess(program, False)


def log_since(controller: Controller, offset: int) -> str:
    return controller.log_path.read_bytes()[offset:].decode(errors="replace")


def healthz(controller: Controller) -> tuple[int, dict[str, Any]] | None:
    try:
        response = controller.health()
    except requests.RequestException:
        return None
    return response.status_code, response.json()


def refusal_shown(answer: tuple[int, dict[str, Any]] | None, case: Case) -> bool:
    """Whether /healthz's detail holds the API's refusal of `case`: the watcher's failing targets, the Lease
    and the Ingress status updater each show the API's message ("... cannot <verb> resource "<resource>"")."""
    if answer is None:
        return False
    _, detail = answer
    messages = [*detail.get("watcher_errors", []), *detail.get("api_errors", {}).values()]
    return any("403 Forbidden" in m and f'resource "{case.resource}"' in m for m in messages)


def test_everything_works_with_exactly_the_manifests_permissions(controller, installation, echo):
    Stage(controller, installation.cluster, echo).expect(HOST, "/", "RBAC")
    wait_for(lambda: installation.published() == [LOAD_BALANCER_IP], 15, what="Ingress status written")
    wait_for(installation.gateway_status_written, 15, what="Gateway API status written")
    lease = installation.lease()
    assert lease is not None and lease["spec"]["holderIdentity"] == POD_NAME
    assert controller.health().status_code == 200
    log = log_since(controller, 0)
    assert " 403" not in log and "Forbidden" not in log, log


def test_removing_any_one_verb_of_any_rule_gives_a_clear_403_in_the_log_and_healthz(controller, installation):
    started = time.monotonic()
    healthz_seen: dict[str, Any] = {}
    missing: list[str] = []
    try:
        for case in removal_cases():
            case_started = time.monotonic()
            installation.remove(case)
            installation.prepare(case)
            offset = controller.log_path.stat().st_size
            programs = programs_refused(case)
            restart_api_clients(controller, programs)
            needles = expected_log(case)
            deadline = time.monotonic() + LOG_WAIT_SECONDS
            while not reported(log_since(controller, offset), needles) and time.monotonic() < deadline:
                time.sleep(0.1)
            log = log_since(controller, offset)
            assert all(f"spawned: '{program}'" in log for program in programs), log
            if not reported(log, needles):
                missing.append(f"{case}: no line holding {needles} in:\n{log}")
                continue
            wait_for(lambda: healthz(controller) is not None, 10, what="/healthz answering")
            wait_for(lambda: refusal_shown(healthz(controller), case), HEALTHZ_WAIT_SECONDS,
                     what=f"/healthz detail naming the 403 of {case}")
            status, detail = healthz(controller)  # type: ignore[misc]
            healthz_seen[str(case)] = (status, detail, time.monotonic() - case_started)
            if case.verb == "list" and _is_custom(case.resource):
                # The Gateway API kinds are optional (a cluster may lack their CRDs): the store syncs without them.
                wait_for(lambda: (healthz(controller) or (0, {}))[1].get("store_synced") is True, 10,
                         what=f"the store synced without {case.resource}")
            elif case.verb == "list":
                # The first list fails, so the store never syncs: /healthz fails, without saying why.
                assert status == 503 and detail["store_synced"] is False, (case, status, detail)
    finally:
        controller.stop()
        installation.restore()
        installation.clear_status()
    print(f"\n{len(removal_cases())} removal cases in {time.monotonic() - started:.1f} s; /healthz when the 403 "
          "showed:")
    for name, (status, detail, seconds) in healthz_seen.items():
        shown = {k: detail[k] for k in ("healthy", "store_synced", "nginx_serving") if k in detail}
        print(f"  {name} ({seconds:.1f} s): {status} {json.dumps(shown)}")
    assert not missing, "\n\n".join(missing)


def test_with_the_rules_restored_the_controller_works_again(controller, installation, echo):
    controller.start()
    Stage(controller, installation.cluster, echo).expect(HOST, "/", "RBAC")
    wait_for(lambda: installation.published() == [LOAD_BALANCER_IP], 15, what="Ingress status written again")

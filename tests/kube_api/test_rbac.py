"""The test API server's authentication and RBAC (auth.py, rbac.py), driven by the official client: one test
per semantic."""
from __future__ import annotations

import json
from typing import Any, Callable, Iterator

import pytest
from kubernetes import client

from tests.kube_api import KubeApiServer
from tests.kube_api.auth import ADMIN_TOKEN

NS = "default"
ROBOT = f"system:serviceaccount:{NS}:robot"


class Account:
    """Clients that authenticate with one ServiceAccount's token."""

    def __init__(self, api: KubeApiServer, token: str) -> None:
        self.token = token
        self.api_client = client.ApiClient(api.configuration(token))
        self.core = client.CoreV1Api(self.api_client)
        self.networking = client.NetworkingV1Api(self.api_client)
        self.coordination = client.CoordinationV1Api(self.api_client)


@pytest.fixture
def rbac_api(k8s) -> client.RbacAuthorizationV1Api:
    return client.RbacAuthorizationV1Api(k8s.api_client)


@pytest.fixture
def account(api, k8s) -> Iterator[Callable[..., Account]]:
    made: list[Account] = []

    def make(name: str = "robot", namespace: str = NS) -> Account:
        if namespace != NS:
            ensure_namespace(k8s, namespace)
        k8s.core.create_namespaced_service_account(namespace, {"metadata": {"name": name}})
        token = k8s.core.create_namespaced_service_account_token(name, namespace, {"spec": {}}).status.token
        made.append(Account(api, token))
        return made[-1]
    yield make
    for each in made:
        each.api_client.close()


def ensure_namespace(k8s, name: str) -> None:
    try:
        k8s.core.create_namespace({"metadata": {"name": name}})
    except client.ApiException as err:
        if err.status != 409:
            raise


def rule(group: str, resources: str | list[str], verbs: str | list[str], names: list[str] | None = None) -> dict:
    out: dict[str, Any] = {"apiGroups": [group], "resources": [resources] if isinstance(resources, str) else resources,
                           "verbs": [verbs] if isinstance(verbs, str) else verbs}
    if names:
        out["resourceNames"] = names
    return out


def sa_subject(name: str = "robot", namespace: str | None = NS) -> dict:
    subject = {"kind": "ServiceAccount", "name": name}
    if namespace:
        subject["namespace"] = namespace
    return subject


def grant_cluster(rbac_api, name: str, *rules: dict, subject: dict | None = None) -> None:
    rbac_api.create_cluster_role({"metadata": {"name": name}, "rules": list(rules)})
    rbac_api.create_cluster_role_binding({"metadata": {"name": name}, "subjects": [subject or sa_subject()],
                                          "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                                                      "kind": "ClusterRole", "name": name}})


def grant_namespace(rbac_api, namespace: str, name: str, *rules: dict, subject: dict | None = None,
                    role_kind: str = "Role") -> None:
    if rules:
        if role_kind == "Role":
            rbac_api.create_namespaced_role(namespace, {"metadata": {"name": name}, "rules": list(rules)})
        else:
            rbac_api.create_cluster_role({"metadata": {"name": name}, "rules": list(rules)})
    rbac_api.create_namespaced_role_binding(namespace, {
        "metadata": {"name": name}, "subjects": [subject or sa_subject()],
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": name}})


def forbidden(call: Callable[..., Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
    """The Status body of the 403 that `call` must get."""
    with pytest.raises(client.ApiException) as info:
        call(*args, **kwargs)
    assert info.value.status == 403, info.value.body
    return json.loads(info.value.body)


def allowed(call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    return call(*args, **kwargs)


def lease(name: str) -> dict:
    return {"metadata": {"name": name}, "spec": {"holderIdentity": "x"}}


# --- authentication ---

def test_token_request_gives_a_token_that_authenticates_as_the_service_account(k8s, api):
    k8s.core.create_namespaced_service_account(NS, {"metadata": {"name": "robot"}})
    answer = k8s.core.create_namespaced_service_account_token("robot", NS, {"spec": {"audiences": ["x"]}})
    assert answer.status.token and answer.spec.audiences == ["x"]
    robot = Account(api, answer.status.token)
    body = forbidden(robot.core.list_namespaced_config_map, NS)
    assert f'User "{ROBOT}"' in body["message"]
    robot.api_client.close()


def test_token_request_for_a_missing_service_account_is_404(k8s):
    with pytest.raises(client.ApiException) as info:
        k8s.core.create_namespaced_service_account_token("nobody", NS, {"spec": {}})
    assert info.value.status == 404


def test_unknown_token_is_401_with_a_status(api):
    stranger = client.CoreV1Api(client.ApiClient(api.configuration("not-a-token")))
    with pytest.raises(client.ApiException) as info:
        stranger.list_namespaced_config_map(NS)
    assert info.value.status == 401
    assert json.loads(info.value.body) == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                           "message": "Unauthorized", "reason": "Unauthorized", "code": 401}


def test_a_token_dies_with_its_service_account_even_if_one_of_the_same_name_is_created(k8s, account, rbac_api):
    robot = account()
    grant_cluster(rbac_api, "read-cm", rule("", "configmaps", "list"))
    allowed(robot.core.list_namespaced_config_map, NS)
    k8s.core.delete_namespaced_service_account("robot", NS)
    k8s.core.create_namespaced_service_account(NS, {"metadata": {"name": "robot"}})
    with pytest.raises(client.ApiException) as info:
        robot.core.list_namespaced_config_map(NS)
    assert info.value.status == 401


def test_the_admin_token_and_by_default_no_token_are_never_held_to_rbac(api, k8s):
    assert api.configuration().api_key["authorization"] == f"Bearer {ADMIN_TOKEN}"
    k8s.networking.list_ingress_for_all_namespaces()
    anonymous = client.ApiClient(client.Configuration(host=api.url))
    client.NetworkingV1Api(anonymous).list_ingress_for_all_namespaces()
    anonymous.close()


def test_without_anonymous_admin_no_token_is_system_anonymous_and_held_to_rbac():
    with KubeApiServer(anonymous_is_admin=False) as strict:
        anonymous = client.ApiClient(client.Configuration(host=strict.url))
        body = forbidden(client.CoreV1Api(anonymous).list_namespaced_config_map, NS)
        assert 'User "system:anonymous"' in body["message"]
        assert client.VersionApi(anonymous).get_code(_preload_content=False).status == 200  # for everyone
        forbidden(client.CoreV1Api(anonymous).get_api_resources)  # discovery is for authenticated users
        anonymous.close()
        client.CoreV1Api(client.ApiClient(strict.configuration())).list_namespaced_config_map(NS)


def test_discovery_is_allowed_to_any_authenticated_user(account):
    robot = account()
    assert any(r.name == "configmaps" for r in robot.core.get_api_resources().resources)
    assert client.ApisApi(robot.api_client).get_api_versions().groups


# --- authorization ---

def test_forbidden_is_403_with_the_api_servers_message_and_details(account):
    robot = account()
    body = forbidden(robot.networking.list_ingress_for_all_namespaces)
    assert body == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "reason": "Forbidden", "code": 403,
        "message": f'ingresses.networking.k8s.io is forbidden: User "{ROBOT}" cannot list resource "ingresses" '
                   f'in API group "networking.k8s.io" at the cluster scope',
        "details": {"group": "networking.k8s.io", "kind": "ingresses"}}


def test_forbidden_names_the_object_subresource_and_namespace(account, k8s):
    robot = account()
    k8s.networking.create_namespaced_ingress(NS, {"metadata": {"name": "web"}, "spec": {}})
    body = forbidden(robot.networking.patch_namespaced_ingress_status, "web", NS, {"status": {}})
    assert body["message"] == (f'ingresses.networking.k8s.io "web" is forbidden: User "{ROBOT}" cannot patch resource '
                               f'"ingresses/status" in API group "networking.k8s.io" in the namespace "default"')
    assert body["details"] == {"name": "web", "group": "networking.k8s.io", "kind": "ingresses"}
    body = forbidden(robot.core.list_namespaced_config_map, NS)
    assert body["message"] == (f'configmaps is forbidden: User "{ROBOT}" cannot list resource "configmaps" in API '
                               f'group "" in the namespace "default"')


def test_cluster_role_binding_grants_in_every_namespace_across_namespaces_and_cluster_scoped(account, rbac_api, k8s):
    robot = account()
    ensure_namespace(k8s, "team")
    grant_cluster(rbac_api, "read", rule("", ["configmaps", "nodes"], "list"))
    allowed(robot.core.list_namespaced_config_map, NS)
    allowed(robot.core.list_namespaced_config_map, "team")
    allowed(robot.core.list_config_map_for_all_namespaces)
    allowed(robot.core.list_node)


def test_role_binding_grants_only_in_its_own_namespace(account, rbac_api, k8s):
    robot = account()
    ensure_namespace(k8s, "team")
    grant_namespace(rbac_api, "team", "read", rule("", "configmaps", "list"))
    allowed(robot.core.list_namespaced_config_map, "team")
    assert 'in the namespace "default"' in forbidden(robot.core.list_namespaced_config_map, NS)["message"]
    assert "at the cluster scope" in forbidden(robot.core.list_config_map_for_all_namespaces)["message"]


def test_role_binding_to_a_cluster_role_grants_its_rules_in_the_binding_namespace_only(account, rbac_api, k8s):
    robot = account()
    ensure_namespace(k8s, "team")
    grant_namespace(rbac_api, "team", "read", rule("", ["configmaps", "nodes"], "list"), role_kind="ClusterRole")
    allowed(robot.core.list_namespaced_config_map, "team")
    forbidden(robot.core.list_namespaced_config_map, NS)
    forbidden(robot.core.list_node)  # cluster-scoped: a RoleBinding never reaches it


def test_verbs_match_exactly_list_watch_and_get_are_different(account, rbac_api, k8s):
    robot = account()
    k8s.core.create_namespaced_config_map(NS, {"metadata": {"name": "a"}})
    grant_cluster(rbac_api, "list-only", rule("", "configmaps", "list"))
    allowed(robot.core.list_namespaced_config_map, NS)
    assert "cannot watch" in forbidden(robot.core.list_namespaced_config_map, NS, watch=True,
                                       timeout_seconds=1)["message"]
    assert "cannot get" in forbidden(robot.core.read_namespaced_config_map, "a", NS)["message"]


def test_verb_wildcard_grants_every_verb(account, rbac_api, k8s):
    robot = account()
    grant_cluster(rbac_api, "all-cm", rule("", "configmaps", "*"))
    robot.core.create_namespaced_config_map(NS, {"metadata": {"name": "a"}})
    robot.core.patch_namespaced_config_map("a", NS, {"data": {"k": "v"}})
    robot.core.delete_namespaced_config_map("a", NS)


def test_api_group_must_match(account, rbac_api):
    robot = account()
    grant_cluster(rbac_api, "wrong-group", rule("", "ingresses", "list"))
    forbidden(robot.networking.list_ingress_for_all_namespaces)
    grant_cluster(rbac_api, "any-group", rule("*", "ingresses", "list"))
    allowed(robot.networking.list_ingress_for_all_namespaces)


def test_a_subresource_is_granted_only_by_its_own_name(account, rbac_api, k8s):
    robot = account()
    k8s.networking.create_namespaced_ingress(NS, {"metadata": {"name": "web"}, "spec": {}})
    grant_cluster(rbac_api, "ingresses", rule("networking.k8s.io", "ingresses", ["get", "patch"]))
    allowed(robot.networking.patch_namespaced_ingress, "web", NS, {"metadata": {"labels": {"a": "b"}}})
    forbidden(robot.networking.patch_namespaced_ingress_status, "web", NS, {"status": {}})
    grant_cluster(rbac_api, "status", rule("networking.k8s.io", "ingresses/status", "patch"))
    allowed(robot.networking.patch_namespaced_ingress_status, "web", NS, {"status": {}})


def test_resource_wildcard_covers_subresources_and_star_slash_names_one_subresource(account, rbac_api, k8s):
    robot = account()
    k8s.networking.create_namespaced_ingress(NS, {"metadata": {"name": "web"}, "spec": {}})
    grant_cluster(rbac_api, "any-status", rule("networking.k8s.io", "*/status", "patch"))
    allowed(robot.networking.patch_namespaced_ingress_status, "web", NS, {"status": {}})
    forbidden(robot.networking.patch_namespaced_ingress, "web", NS, {"metadata": {"labels": {"a": "b"}}})
    grant_cluster(rbac_api, "anything", rule("networking.k8s.io", "*", "patch"))
    allowed(robot.networking.patch_namespaced_ingress, "web", NS, {"metadata": {"labels": {"a": "b"}}})


def test_resource_names_narrow_get_and_update_and_never_grant_create(account, rbac_api, k8s):
    robot = account()
    for name in ("mine", "theirs"):
        k8s.coordination.create_namespaced_lease(NS, lease(name))
    grant_namespace(rbac_api, NS, "lease", rule("coordination.k8s.io", "leases", ["get", "update", "create"],
                                                names=["mine"]))
    current = robot.coordination.read_namespaced_lease("mine", NS)
    robot.coordination.replace_namespaced_lease("mine", NS, current)
    body = forbidden(robot.coordination.read_namespaced_lease, "theirs", NS)
    assert body["message"].startswith('leases.coordination.k8s.io "theirs" is forbidden')
    k8s.coordination.delete_namespaced_lease("mine", NS)
    body = forbidden(robot.coordination.create_namespaced_lease, NS, lease("mine"))
    assert body["message"].startswith("leases.coordination.k8s.io is forbidden")  # a create names nothing yet


def test_a_list_or_watch_narrowed_to_one_name_counts_as_naming_it(account, rbac_api, k8s):
    robot = account()
    grant_cluster(rbac_api, "one-node", rule("", "nodes", ["list", "watch"], names=["n1"]))
    allowed(robot.core.list_node, field_selector="metadata.name=n1")
    allowed(robot.core.list_node, field_selector="metadata.name==n1", watch=True, timeout_seconds=1,
            _preload_content=False)
    forbidden(robot.core.list_node)
    forbidden(robot.core.list_node, field_selector="metadata.name=n2")


def test_group_subjects_match_the_service_account_groups(account, rbac_api):
    robot = account()
    grant_cluster(rbac_api, "ns-accounts", rule("", "configmaps", "list"),
                  subject={"kind": "Group", "name": f"system:serviceaccounts:{NS}"})
    allowed(robot.core.list_config_map_for_all_namespaces)


def test_user_subjects_match_the_user_name(account, rbac_api):
    robot = account()
    grant_cluster(rbac_api, "by-user", rule("", "configmaps", "list"), subject={"kind": "User", "name": ROBOT})
    allowed(robot.core.list_config_map_for_all_namespaces)


def test_service_account_subject_defaults_to_the_role_binding_namespace_and_must_match_it(account, rbac_api, k8s):
    robot = account()
    other = account("robot", "team")
    grant_namespace(rbac_api, NS, "read", rule("", "configmaps", "list"), subject=sa_subject(namespace=None))
    allowed(robot.core.list_namespaced_config_map, NS)
    forbidden(other.core.list_namespaced_config_map, NS)  # same name, another namespace


def test_a_binding_to_a_missing_role_grants_nothing_until_the_role_exists(account, rbac_api):
    robot = account()
    grant_namespace(rbac_api, NS, "later")  # the binding only
    forbidden(robot.core.list_namespaced_config_map, NS)
    rbac_api.create_namespaced_role(NS, {"metadata": {"name": "later"}, "rules": [rule("", "configmaps", "list")]})
    allowed(robot.core.list_namespaced_config_map, NS)


def test_removing_a_rule_takes_effect_at_the_next_request(account, rbac_api):
    robot = account()
    grant_cluster(rbac_api, "read", rule("", "configmaps", "list"), rule("", "secrets", "list"))
    allowed(robot.core.list_config_map_for_all_namespaces)
    rbac_api.patch_cluster_role("read", {"rules": [rule("", "secrets", "list")]})
    forbidden(robot.core.list_config_map_for_all_namespaces)
    allowed(robot.core.list_secret_for_all_namespaces)


# --- the RBAC objects themselves ---

def test_rbac_objects_may_have_names_with_colons(rbac_api):
    rbac_api.create_cluster_role({"metadata": {"name": "system:pyngress:reader"}, "rules": []})
    assert rbac_api.read_cluster_role("system:pyngress:reader").metadata.name == "system:pyngress:reader"


def test_a_cluster_role_binding_must_refer_to_a_cluster_role(rbac_api):
    with pytest.raises(client.ApiException) as info:
        rbac_api.create_cluster_role_binding({"metadata": {"name": "bad"}, "subjects": [sa_subject()],
                                              "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                                          "name": "x"}})
    assert info.value.status == 422 and json.loads(info.value.body)["details"]["causes"][0]["field"] == "roleRef"


def test_the_role_ref_of_a_binding_cannot_change(rbac_api):
    grant_namespace(rbac_api, NS, "a", rule("", "configmaps", "list"))
    with pytest.raises(client.ApiException) as info:
        rbac_api.patch_namespaced_role_binding("a", NS, {"roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                                                                    "kind": "ClusterRole", "name": "b"}})
    assert info.value.status == 422 and "cannot change roleRef" in json.loads(info.value.body)["message"]

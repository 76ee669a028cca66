"""`pyngress manifests`: the install manifests (multi-document YAML on stdout); deploy/ holds them as generated.

What the controller may do in the cluster is what its code does, no more: each permission below names the
code that needs it. tests/e2e/kube/test_rbac.py runs the controller with exactly these permissions and
removes each verb in turn to show that every one is needed (a 403 in the log), and
tests/unit/test_manifests.py compares the list/watch grants with the watcher's own list of watch targets.

Choices that differ from ingress-nginx's deploy.yaml (facts from it: ports, probes, labels, the Service's
externalTrafficPolicy Local, the leader Lease named by resourceNames):
- The controller container runs as the image does (Dockerfile): supervisord, the Python processes and the
  nginx master as root, nginx's workers, which parse every request, as `nobody`. ingress-nginx runs all of
  it as uid 101, so its workers can read the service account token and reach everything the controller
  can; here the token (mounted 0400), the private keys and the root-only run directory with its control
  sockets are out of the workers' reach. Every capability is dropped except four. SETUID and SETGID (the
  master switches its workers to nobody) and CHOWN (nginx chowns its temp directories to the worker user
  at start) were measured, running `pyngress up` under `setpriv --bounding-set`: without any of them nginx
  does not start. KILL is for signalling processes of another uid (services/nginxconf/processes.py stops a
  killed master's orphaned workers, which belong to nobody). No
  NET_BIND_SERVICE: ports 80 and 443 are opened through the pod's namespaced sysctl
  net.ipv4.ip_unprivileged_port_start=0 ("safe" since Kubernetes 1.22, allowed by the Pod Security
  "baseline" level, which these capabilities also fit). The root filesystem is read-only: the run dir,
  state dir and /tmp are emptyDirs.
- Ingress and Gateway API status are written with a merge PATCH (services/syncer/ingress_status/): the verb is `patch`
  on ingresses/status and the Gateway API kinds' status, not `update`.
- No `events` permission: pyngress creates no Events. No `nodes` permission for the controller: Nodes
  are read only with --node-name, which the Deployment does not pass (--publish-service gives status).
- With --validating-webhook, the admission webhook (`pyngress webhook`, on WEBHOOK_PORT) is on, behind its own
  Service, with a ValidatingWebhookConfiguration as ingress-nginx's chart writes it (failurePolicy Fail,
  sideEffects None, admissionReviewVersions v1, ingress-nginx's path). Off by default, unlike the chart: with
  failurePolicy Fail every Ingress write in the cluster, of any class, waits on the controller's pods, and the
  syncer refuses a bad Ingress anyway (the log, /healthz and /status say why); the webhook moves that refusal to
  `kubectl apply`. The certificate comes from a Job running `pyngress webhook-certificate` in pyngress's own
  image (the chart runs kube-webhook-certgen, an image of the retired project): it makes a CA and the Service's
  certificate once, stores them in a Secret the controller mounts, and writes the CA into the configuration's
  caBundle. The Job's own service account may create that Secret and update that one configuration; the
  controller gets no new permission. The webhook selects no Ingress by class (an Ingress's class is no label,
  and ingress-nginx's chart selects none either): it allows other classes' Ingresses itself.
- With --enable-cni, a DaemonSet runs the CNI server as root with NET_ADMIN (netlink: links, addresses,
  routes, the bridge; nftables for ipMasq) and SYS_ADMIN (setns(2) into a pod's network namespace
  requires it in the namespace's owning user namespace), everything else dropped. Its own service
  account may only list and watch Nodes (a node's spec.podCIDR, by --node-name).
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Sequence

import yaml

from services.common.settings import parse_bool, parse_selector

NAME = "pyngress"
CONTROLLER = "pyngress-controller"        # the Deployment, its Service and ConfigMap
CNI = "pyngress-cni"                      # the DaemonSet, its ServiceAccount, ClusterRole and ConfigMap
ELECTION_ID = "pyngress-leader"           # the Lease
INGRESS_CLASS = "nginx"
CONTROLLER_CLASS = "k8s.io/ingress-nginx"
HEALTHZ_PORT = 10254
DEFAULT_NAMESPACE = "pyngress"
DEFAULT_REPLICAS = 2
SERVICE_TYPES = ("LoadBalancer", "NodePort")
# What the controller's root processes need besides running as root (see the docstring).
CONTROLLER_CAPABILITIES = ("CHOWN", "KILL", "SETGID", "SETUID")
RUN_DIR, STATE_DIR = "/var/run/pyngress", "/var/lib/pyngress"  # pyngress's defaults
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"  # where in-cluster config reads it
# Where the image keeps the CNI plugin executable the DaemonSet copies onto the node.
PLUGIN_IN_IMAGE = "/usr/lib/pyngress/cni/pyngress-cni"
CONFLIST_NAME = "10-pyngress.conflist"
HOST_CNI_BIN, HOST_CNI_NET_D = "/opt/cni/bin", "/etc/cni/net.d"
RBAC_GROUP = "rbac.authorization.k8s.io"
# The admission webhook (--validating-webhook): its Service, the Secret with its certificate, the Job making it
# and the Job's service account and roles, and the ValidatingWebhookConfiguration all take the ADMISSION name.
ADMISSION = "pyngress-admission"
ADMISSION_SERVICE = "pyngress-controller-admission"
WEBHOOK_NAME = "validate.nginx.ingress.kubernetes.io"  # ingress-nginx's: kubectl's messages read the same
WEBHOOK_PATH = "/networking/v1/ingresses"
WEBHOOK_PORT = 8443
WEBHOOK_CERT_DIR = "/usr/local/certificates"  # ingress-nginx's chart mounts its Secret here too


def default_image() -> str:
    """The image `make image` builds (podman names local images localhost/...); push it where the cluster
    can pull it and pass --image."""
    return "localhost/pyngress:latest"


def _version() -> str:
    try:
        return metadata.version("pyngress")
    except metadata.PackageNotFoundError:
        return "0.0.0"


@dataclass(frozen=True)
class Options:
    namespace: str = DEFAULT_NAMESPACE
    replicas: int = DEFAULT_REPLICAS
    service_type: str = "LoadBalancer"
    enable_ssl_passthrough: bool = False
    enable_cni: bool = False
    validating_webhook: bool = False
    watch_namespace_selector: str = ""  # the controller's --watch-namespace-selector ("": every namespace)
    image: str = ""  # "": default_image()

    def args(self) -> list[str]:
        """The command-line flags that give these options (what the header of the output shows)."""
        defaults = Options()
        out = [f"--namespace={self.namespace}"] if self.namespace != defaults.namespace else []
        if self.replicas != defaults.replicas:
            out.append(f"--replicas={self.replicas}")
        if self.service_type != defaults.service_type:
            out.append(f"--service-type={self.service_type}")
        out += ["--enable-ssl-passthrough"] if self.enable_ssl_passthrough else []
        out += ["--enable-cni"] if self.enable_cni else []
        out += ["--validating-webhook"] if self.validating_webhook else []
        out += [f"--watch-namespace-selector={self.watch_namespace_selector}"] if self.watch_namespace_selector else []
        out += [f"--image={self.image}"] if self.image else []
        return out


# --- permissions, each with the code that needs it ---

@dataclass(frozen=True)
class Permission:
    api_group: str
    resource: str
    verbs: tuple[str, ...]
    used_by: str
    resource_names: tuple[str, ...] = ()

    def rule(self) -> dict[str, Any]:
        rule: dict[str, Any] = {"apiGroups": [self.api_group], "resources": [self.resource]}
        if self.resource_names:
            rule["resourceNames"] = list(self.resource_names)
        rule["verbs"] = list(self.verbs)
        return rule


_WATCHED = "services/watcher/kube_source.py: list, then watch, in every namespace"

# The ClusterRole: what the controller reads in every namespace, and Ingress status.
CLUSTER_PERMISSIONS: tuple[Permission, ...] = (
    Permission("networking.k8s.io", "ingresses", ("list", "watch"), _WATCHED),
    Permission("networking.k8s.io", "ingressclasses", ("list", "watch"), _WATCHED + " (cluster-scoped)"),
    Permission("", "services", ("list", "watch"), _WATCHED),
    Permission("discovery.k8s.io", "endpointslices", ("list", "watch"), _WATCHED),
    Permission("", "secrets", ("list", "watch"), _WATCHED + " (TLS certificates)"),
    Permission("", "configmaps", ("list", "watch"), _WATCHED + " (the ConfigMaps Ingresses name)"),
    # Gateway API: read when its CRDs are installed; a cluster without them is not an error.
    *(Permission("gateway.networking.k8s.io", plural, ("list", "watch"),
                 _WATCHED + (" (cluster-scoped)" if plural == "gatewayclasses" else "") + ", when the CRD is installed")
      for plural in ("gatewayclasses", "gateways", "httproutes", "grpcroutes", "referencegrants", "tlsroutes",
                     "backendtlspolicies")),
    Permission("networking.k8s.io", "ingresses/status", ("patch",),
               "services/syncer/ingress_status/updater.py: the leader's merge patch of status.loadBalancer"),
    *(Permission("gateway.networking.k8s.io", f"{plural}/status", ("patch",),
                 "services/syncer/ingress_status/gateway_status.py: the leader's merge patch of the Gateway API status")
      for plural in ("gatewayclasses", "gateways", "httproutes", "grpcroutes", "tlsroutes", "backendtlspolicies")),
)


# With --watch-namespace-selector: the Namespaces whose labels choose the Ingresses served.
NAMESPACE_SELECTOR_PERMISSION = Permission("", "namespaces", ("list", "watch"),
                                           _WATCHED + " (cluster-scoped; their labels, for --watch-namespace-selector)")


def cluster_permissions(options: Options) -> tuple[Permission, ...]:
    """The controller's ClusterRole: exactly what its flags make it read."""
    return CLUSTER_PERMISSIONS + ((NAMESPACE_SELECTOR_PERMISSION,) if options.watch_namespace_selector else ())


def namespace_permissions() -> tuple[Permission, ...]:
    """The Role, in the controller's namespace: its own Service and its Lease."""
    return (
        Permission("", "services", ("get",),
                   "services/syncer/ingress_status/updater.py: the --publish-service Service's addresses",
                   (CONTROLLER,)),
        # A create names no object at authorization time: it cannot be narrowed by resourceNames.
        Permission("coordination.k8s.io", "leases", ("create",),
                   "services/syncer/ingress_status/leader.py: the first candidate creates the Lease"),
        Permission("coordination.k8s.io", "leases", ("get", "update"),
                   "services/syncer/ingress_status/leader.py: read, then renew or take over with the resourceVersion "
                   "read",
                   (ELECTION_ID,)),
    )


def admission_namespace_permissions() -> tuple[Permission, ...]:
    """The certificate Job's Role, in the controller's namespace."""
    return (
        Permission("", "secrets", ("get",), "services/tools/webhook_certificate.py: the certificate made before",
                   (ADMISSION,)),
        # A create names no object at authorization time: it cannot be narrowed by resourceNames.
        Permission("", "secrets", ("create",), "services/tools/webhook_certificate.py: the first run stores it"),
    )


# The certificate Job's ClusterRole: the webhook configuration is cluster-scoped.
ADMISSION_CLUSTER_PERMISSIONS: tuple[Permission, ...] = (
    Permission("admissionregistration.k8s.io", "validatingwebhookconfigurations", ("get", "update"),
               "services/tools/webhook_certificate.py: the CA written into every webhook's caBundle", (ADMISSION,)),
)


# The CNI DaemonSet's ClusterRole: its Node's spec.podCIDR (a list+watch narrowed by metadata.name; the
# node's name is not known when the manifests are written, so resourceNames cannot narrow it).
CNI_PERMISSIONS: tuple[Permission, ...] = (
    Permission("", "nodes", ("list", "watch"),
               "services/common/cni_config/node_pod_cidr.py via the watcher's Node target (--node-name)"),
)


# --- objects ---

def labels(component: str | None = None) -> dict[str, str]:
    """ingress-nginx's label keys; selectors use name, instance and component only (version changes)."""
    out = {"app.kubernetes.io/name": NAME, "app.kubernetes.io/instance": NAME}
    if component:
        out["app.kubernetes.io/component"] = component
    return out


def _all_labels(component: str | None) -> dict[str, str]:
    return {**labels(component), "app.kubernetes.io/part-of": NAME, "app.kubernetes.io/version": _version()}


def _meta(name: str, component: str | None, namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    meta["labels"] = _all_labels(component)
    return meta


def namespace_object(options: Options) -> dict[str, Any]:
    # Pod Security admission: the controller meets "baseline" (root, and only capabilities of its list); the
    # CNI DaemonSet (host network, host paths, NET_ADMIN and SYS_ADMIN) needs "privileged".
    level = "privileged" if options.enable_cni else "baseline"
    meta = _meta(options.namespace, None)
    meta["labels"] = {**meta["labels"], "pod-security.kubernetes.io/enforce": level,
                      "pod-security.kubernetes.io/enforce-version": "latest"}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}


def service_account(name: str, component: str, options: Options, *, automount: bool) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(name, component, options.namespace),
            "automountServiceAccountToken": automount}


def role(kind: str, name: str, component: str, permissions: Sequence[Permission],
         namespace: str | None = None) -> dict[str, Any]:
    return {"apiVersion": f"{RBAC_GROUP}/v1", "kind": kind, "metadata": _meta(name, component, namespace),
            "rules": [p.rule() for p in permissions]}


def binding(kind: str, name: str, component: str, role_kind: str, options: Options,
            namespace: str | None = None) -> dict[str, Any]:
    return {"apiVersion": f"{RBAC_GROUP}/v1", "kind": kind, "metadata": _meta(name, component, namespace),
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": role_kind, "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": options.namespace}]}


def controller_configmap(options: Options) -> dict[str, Any]:
    # Empty: pyngress's defaults are ingress-nginx's, hardened. Keys go under data (docs/ lists them).
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(CONTROLLER, "controller", options.namespace),
            "data": {}}


def ingress_class() -> dict[str, Any]:
    return {"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass",
            "metadata": _meta(INGRESS_CLASS, "controller"), "spec": {"controller": CONTROLLER_CLASS}}


def controller_args(options: Options) -> list[str]:
    """`pyngress up`'s flags in the controller container ($(VAR) is expanded by the kubelet)."""
    args = [f"--configmap=$(POD_NAMESPACE)/{CONTROLLER}", f"--publish-service=$(POD_NAMESPACE)/{CONTROLLER}",
            f"--election-id={ELECTION_ID}", f"--controller-class={CONTROLLER_CLASS}",
            f"--ingress-class={INGRESS_CLASS}"]
    if options.enable_ssl_passthrough:
        args.append("--enable-ssl-passthrough")
    if options.watch_namespace_selector:
        args.append(f"--watch-namespace-selector={options.watch_namespace_selector}")
    if options.validating_webhook:
        args += [f"--validating-webhook=:{WEBHOOK_PORT}", f"--validating-webhook-certificate={WEBHOOK_CERT_DIR}/cert",
                 f"--validating-webhook-key={WEBHOOK_CERT_DIR}/key"]
    return args


def _field_env(name: str, path: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def _probe(failure_threshold: int) -> dict[str, Any]:
    return {"httpGet": {"path": "/healthz", "port": HEALTHZ_PORT, "scheme": "HTTP"}, "initialDelaySeconds": 10,
            "periodSeconds": 10, "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": failure_threshold}


def deployment(options: Options, image: str) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": "controller",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["pyngress", "up"],
        "args": controller_args(options),
        "env": [_field_env("POD_NAME", "metadata.name"), _field_env("POD_NAMESPACE", "metadata.namespace")],
        "ports": [{"name": "http", "containerPort": 80, "protocol": "TCP"},
                  {"name": "https", "containerPort": 443, "protocol": "TCP"},
                  {"name": "metrics", "containerPort": HEALTHZ_PORT, "protocol": "TCP"}],
        "readinessProbe": _probe(3),
        "livenessProbe": _probe(5),
        # supervisord, the watcher, the syncer, crashmon and nginx's master and workers.
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}},
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "capabilities": {"drop": ["ALL"], "add": list(CONTROLLER_CAPABILITIES)}},
        "volumeMounts": [{"name": "run", "mountPath": RUN_DIR}, {"name": "state", "mountPath": STATE_DIR},
                         {"name": "tmp", "mountPath": "/tmp"},
                         {"name": "kube-api-access", "mountPath": SERVICE_ACCOUNT_DIR, "readOnly": True}],
    }
    volumes = [{"name": "run", "emptyDir": {"medium": "Memory"}}, {"name": "state", "emptyDir": {}},
               {"name": "tmp", "emptyDir": {}}, _service_account_volume()]
    if options.validating_webhook:
        container["ports"].append({"name": "webhook", "containerPort": WEBHOOK_PORT, "protocol": "TCP"})
        container["volumeMounts"].append({"name": "webhook-cert", "mountPath": WEBHOOK_CERT_DIR, "readOnly": True})
        # Root-only, as the token; a whole-directory mount (no subPath), so that a new certificate reaches the
        # files, which the webhook re-reads.
        volumes.append({"name": "webhook-cert", "secret": {"secretName": ADMISSION, "defaultMode": 0o400, "items": [
            {"key": "cert", "path": "cert"}, {"key": "key", "path": "key"}]}})
    pod_spec = {
        "serviceAccountName": NAME,
        # Mounted below instead, root-only: what the kubelet mounts by itself is readable by every uid.
        "automountServiceAccountToken": False,
        "securityContext": {
            "runAsUser": 0, "runAsNonRoot": False,
            "seccompProfile": {"type": "RuntimeDefault"},
            # nginx and the passthrough proxy bind 80 and 443 without NET_BIND_SERVICE (module docstring).
            "sysctls": [{"name": "net.ipv4.ip_unprivileged_port_start", "value": "0"}],
        },
        "containers": [container],
        "volumes": volumes,
        "nodeSelector": {"kubernetes.io/os": "linux"},
        # externalTrafficPolicy Local sends traffic only to nodes with a replica: spread the replicas.
        "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
            "weight": 100, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname",
                                               "labelSelector": {"matchLabels": labels("controller")}}}]}},
        # nginx drains in-flight requests on SIGTERM (supervisord's QUIT) before the pod goes.
        "terminationGracePeriodSeconds": 300,
    }
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": _meta(CONTROLLER, "controller", options.namespace),
        "spec": {
            "replicas": options.replicas,
            "selector": {"matchLabels": labels("controller")},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
            "template": {"metadata": {"labels": _all_labels("controller")}, "spec": pod_spec},
        },
    }


def _service_account_volume() -> dict[str, Any]:
    """What the kubelet would mount for the service account (a rotating token, the cluster's CA, the
    namespace), readable by root only, so that nginx's workers (nobody) cannot read the token."""
    return {"name": "kube-api-access", "projected": {"defaultMode": 0o400, "sources": [
        {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1",
                                                                      "fieldPath": "metadata.namespace"}}]}}]}}


def controller_service(options: Options) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Service", "metadata": _meta(CONTROLLER, "controller", options.namespace),
        "spec": {
            "type": options.service_type,
            # The client's address reaches nginx unchanged, and no second hop between nodes.
            "externalTrafficPolicy": "Local",
            "selector": labels("controller"),
            "ports": [{"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP", "appProtocol": "http"},
                      {"name": "https", "port": 443, "targetPort": "https", "protocol": "TCP",
                       "appProtocol": "https"}],
        },
    }


def admission_service(options: Options) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Service", "metadata": _meta(ADMISSION_SERVICE, "controller", options.namespace),
        "spec": {"type": "ClusterIP", "selector": labels("controller"),
                 "ports": [{"name": "https-webhook", "port": 443, "targetPort": "webhook", "protocol": "TCP",
                            "appProtocol": "https"}]},
    }


def _gateway_api_rules() -> list[dict[str, Any]]:
    """A rule per version for the Gateway API kinds the webhook reviews, in the versions the watcher reads each in
    (matchPolicy Equivalent sends a request in another served version too, converted)."""
    from services.syncer.admission.gateway_review import REVIEWED_KINDS
    from services.watcher.kube_source import KIND_APIS

    by_version: dict[str, list[str]] = {}
    for kind in REVIEWED_KINDS:
        custom = KIND_APIS[kind].custom
        assert custom is not None, kind
        for version in custom.versions:
            by_version.setdefault(version, []).append(custom.plural)
    group = KIND_APIS[REVIEWED_KINDS[0]].api_version.split("/")[0]
    return [{"apiGroups": [group], "apiVersions": [version], "operations": ["CREATE", "UPDATE"], "resources": plurals}
            for version, plurals in by_version.items()]


def validating_webhook_configuration(options: Options) -> dict[str, Any]:
    """caBundle is left out: the certificate Job writes it."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": _meta(ADMISSION, "admission-webhook"),
        "webhooks": [{
            "name": WEBHOOK_NAME,
            "matchPolicy": "Equivalent",
            "rules": [{"apiGroups": ["networking.k8s.io"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                       "resources": ["ingresses"]}, *_gateway_api_rules()],
            "failurePolicy": "Fail",
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "clientConfig": {"service": {"namespace": options.namespace, "name": ADMISSION_SERVICE,
                                         "path": WEBHOOK_PATH, "port": 443}},
            "timeoutSeconds": 10,
        }],
    }


def admission_certificate_job(options: Options, image: str) -> dict[str, Any]:
    container = {
        "name": "certificate", "image": image, "imagePullPolicy": "IfNotPresent",
        "command": ["pyngress", "webhook-certificate"],
        "args": ["--namespace=$(POD_NAMESPACE)", f"--service={ADMISSION_SERVICE}", f"--secret={ADMISSION}",
                 f"--webhook-configuration={ADMISSION}"],
        "env": [_field_env("POD_NAMESPACE", "metadata.namespace")],
        # openssl and one API client: nobody, no capability, a read-only root with a private /tmp.
        "securityContext": {"runAsUser": 65534, "runAsNonRoot": True, "allowPrivilegeEscalation": False,
                            "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]}},
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
    }
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": _meta(f"{ADMISSION}-certificate", "admission-webhook", options.namespace),
        "spec": {
            # Run by `kubectl apply` together with the configuration it patches: retried until that exists.
            "backoffLimit": 10,
            "template": {"metadata": {"labels": _all_labels("admission-webhook")}, "spec": {
                "serviceAccountName": ADMISSION, "restartPolicy": "OnFailure",
                "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
                "nodeSelector": {"kubernetes.io/os": "linux"},
                "containers": [container], "volumes": [{"name": "tmp", "emptyDir": {}}]}},
        },
    }


def conflist() -> dict[str, Any]:
    """The node's CNI network: the subnet is left out, so the server uses the Node's spec.podCIDR."""
    return {"cniVersion": "1.0.0", "cniVersions": ["1.0.0", "1.1.0"], "name": NAME, "plugins": [
        {"type": "pyngress-cni", "bridge": "pyngress0", "mtu": 1500, "ipMasq": True, "ipam": {}}]}


def cni_configmap(options: Options) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(CNI, "cni", options.namespace),
            "data": {CONFLIST_NAME: json.dumps(conflist(), indent=2) + "\n"}}


# The plugin and the conflist are written beside their final names and renamed: the runtime never reads
# a half-written file.
_INSTALL_SCRIPT = f"""set -eu
install -m 0755 {PLUGIN_IN_IMAGE} /host{HOST_CNI_BIN}/.pyngress-cni.new
mv -f /host{HOST_CNI_BIN}/.pyngress-cni.new /host{HOST_CNI_BIN}/pyngress-cni
install -m 0644 /etc/pyngress/cni/{CONFLIST_NAME} /host{HOST_CNI_NET_D}/.{CONFLIST_NAME}.new
mv -f /host{HOST_CNI_NET_D}/.{CONFLIST_NAME}.new /host{HOST_CNI_NET_D}/{CONFLIST_NAME}
"""


def _host_path(name: str, path: str) -> dict[str, Any]:
    return {"name": name, "hostPath": {"path": path, "type": "DirectoryOrCreate"}}


def _root_with(*capabilities: str) -> dict[str, Any]:
    """Root (the server's socket is root-only: whoever reaches it can plumb any pod's network; its files on
    the host are root's) with every capability dropped but `capabilities`."""
    drop_add: dict[str, Any] = {"drop": ["ALL"]}
    if capabilities:
        drop_add["add"] = list(capabilities)
    return {"runAsUser": 0, "runAsNonRoot": False, "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True, "capabilities": drop_add}


def cni_daemonset(options: Options, image: str) -> dict[str, Any]:
    install = {
        "name": "install-cni", "image": image, "imagePullPolicy": "IfNotPresent",
        "command": ["sh", "-c", _INSTALL_SCRIPT],
        "securityContext": _root_with(),  # file copies into root-owned host directories: no capability
        "volumeMounts": [{"name": "cni-bin", "mountPath": f"/host{HOST_CNI_BIN}"},
                         {"name": "cni-net-d", "mountPath": f"/host{HOST_CNI_NET_D}"},
                         {"name": "cni-config", "mountPath": "/etc/pyngress/cni", "readOnly": True}],
    }
    server = {
        "name": "cni", "image": image, "imagePullPolicy": "IfNotPresent",
        "command": ["pyngress", "up"],
        "args": ["--enable-cni", "--node-name=$(NODE_NAME)"],
        "env": [_field_env("NODE_NAME", "spec.nodeName"),
                {"name": "PYNGRESS_ENABLE_INGRESS", "value": "false"}],  # the CNI half only
        "resources": {"requests": {"cpu": "50m", "memory": "128Mi"}},
        # NET_ADMIN: netlink (veth, bridge, addresses, routes) and nftables; SYS_ADMIN: setns(2) into the
        # pod's network namespace.
        "securityContext": _root_with("NET_ADMIN", "SYS_ADMIN"),
        "volumeMounts": [
            # The run dir is the host's: the plugin, run by the runtime on the host, finds the socket at
            # /var/run/pyngress/cni/cni-server.sock.
            {"name": "run", "mountPath": "/var/run/pyngress"},
            {"name": "state", "mountPath": "/var/lib/pyngress"},  # IP allocations outlive the pod
            # The runtime's network namespaces, including those mounted after this pod started.
            {"name": "netns", "mountPath": "/var/run/netns", "mountPropagation": "HostToContainer"},
            {"name": "tmp", "mountPath": "/tmp"}],
    }
    pod_spec = {
        "serviceAccountName": CNI,
        "automountServiceAccountToken": True,
        "hostNetwork": True,
        "dnsPolicy": "ClusterFirstWithHostNet",
        "priorityClassName": "system-node-critical",
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
        # Every node, also those not Ready yet: a node is not Ready until its network plugin is.
        "tolerations": [{"operator": "Exists"}],
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "initContainers": [install],
        "containers": [server],
        "volumes": [_host_path("cni-bin", HOST_CNI_BIN), _host_path("cni-net-d", HOST_CNI_NET_D),
                    {"name": "cni-config", "configMap": {"name": CNI}},
                    _host_path("run", "/var/run/pyngress"), _host_path("state", "/var/lib/pyngress"),
                    _host_path("netns", "/var/run/netns"), {"name": "tmp", "emptyDir": {}}],
        "terminationGracePeriodSeconds": 140,  # the CNI server finishes in-flight calls (stopwaitsecs 130)
    }
    return {
        "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": _meta(CNI, "cni", options.namespace),
        "spec": {
            "selector": {"matchLabels": labels("cni")},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
            "template": {"metadata": {"labels": _all_labels("cni")}, "spec": pod_spec},
        },
    }


def manifests(options: Options) -> list[dict[str, Any]]:
    """Every object, in the order `kubectl apply` should create them."""
    image = options.image or default_image()
    ns = options.namespace
    docs = [
        namespace_object(options),
        service_account(NAME, "controller", options, automount=False),
        role("ClusterRole", NAME, "controller", cluster_permissions(options)),
        role("Role", NAME, "controller", namespace_permissions(), ns),
        binding("ClusterRoleBinding", NAME, "controller", "ClusterRole", options),
        binding("RoleBinding", NAME, "controller", "Role", options, ns),
        controller_configmap(options),
        ingress_class(),
        controller_service(options),
        deployment(options, image),
    ]
    if options.validating_webhook:
        docs += [
            admission_service(options),
            validating_webhook_configuration(options),
            service_account(ADMISSION, "admission-webhook", options, automount=True),
            role("ClusterRole", ADMISSION, "admission-webhook", ADMISSION_CLUSTER_PERMISSIONS),
            role("Role", ADMISSION, "admission-webhook", admission_namespace_permissions(), ns),
            binding("ClusterRoleBinding", ADMISSION, "admission-webhook", "ClusterRole", options),
            binding("RoleBinding", ADMISSION, "admission-webhook", "Role", options, ns),
            admission_certificate_job(options, image),
        ]
    if options.enable_cni:
        docs += [
            service_account(CNI, "cni", options, automount=True),
            role("ClusterRole", CNI, "cni", CNI_PERMISSIONS),
            binding("ClusterRoleBinding", CNI, "cni", "ClusterRole", options),
            cni_configmap(options),
            cni_daemonset(options, image),
        ]
    return docs


class _Dumper(yaml.SafeDumper):
    """yaml.safe_dump, with multi-line strings (the conflist, the install script) as literal blocks."""


def _represent_str(dumper: yaml.SafeDumper, text: str) -> yaml.Node:
    style = "|" if "\n" in text else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


_Dumper.add_representer(str, _represent_str)


def render(options: Options) -> str:
    command = " ".join(["pyngress manifests", *options.args()])
    header = (f"# pyngress install manifests, generated by `{command}`.\n"
              "# Do not edit: change services/tools/install_manifests.py and regenerate.\n")
    return header + yaml.dump_all(manifests(options), Dumper=_Dumper, sort_keys=False, default_flow_style=False,
                                  explicit_start=True, width=120)


# --- command line ---

_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


def _namespace(text: str) -> str:
    if len(text) > 63 or not _DNS1123_LABEL.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a namespace name: lower case letters, digits and '-', "
                                         "starting and ending with a letter or digit, at most 63 characters")
    return text


def _replicas(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of replicas, at least 1, got {text!r}")
    return value


def _image(text: str) -> str:
    if not text or any(c.isspace() for c in text):
        raise argparse.ArgumentTypeError(f"expected an image reference such as registry.example/pyngress:0.1.0, "
                                         f"got {text!r}")
    return text


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--namespace", type=_namespace, default=DEFAULT_NAMESPACE,
                        help=f"namespace to install into (default {DEFAULT_NAMESPACE})")
    parser.add_argument("--replicas", type=_replicas, default=DEFAULT_REPLICAS,
                        help=f"controller replicas (default {DEFAULT_REPLICAS}); one leader writes Ingress status")
    parser.add_argument("--service-type", choices=SERVICE_TYPES, default="LoadBalancer",
                        help="type of the controller's Service (default LoadBalancer)")
    for flag, what in (("--enable-ssl-passthrough", "run the controller with TLS passthrough"),
                       ("--enable-cni", "add the CNI server DaemonSet, which installs the plugin on every node"),
                       ("--validating-webhook", "add the validating admission webhook, its Service and the Job "
                                                "that makes its certificate")):
        parser.add_argument(flag, nargs="?", const=True, default=False, type=parse_bool, help=f"{what} (default false)")
    parser.add_argument("--watch-namespace-selector", type=parse_selector, default="", metavar="SELECTOR",
                        help="serve only the Ingresses of namespaces whose labels match (team=a); adds the "
                             "ClusterRole's list and watch of Namespaces it needs")
    parser.add_argument("--image", type=_image, default=None,
                        help=f"container image (default {default_image()}, what `make image` builds)")


def options_from(namespace: argparse.Namespace) -> Options:
    return Options(namespace=namespace.namespace, replicas=namespace.replicas, service_type=namespace.service_type,
                   enable_ssl_passthrough=namespace.enable_ssl_passthrough, enable_cni=namespace.enable_cni,
                   validating_webhook=namespace.validating_webhook,
                   watch_namespace_selector=namespace.watch_namespace_selector, image=namespace.image or "")


def run(namespace: argparse.Namespace) -> int:
    sys.stdout.write(render(options_from(namespace)))
    return 0

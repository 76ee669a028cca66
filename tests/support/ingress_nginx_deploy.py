"""How ingress-nginx's own installs start its controller: the container args and pod environment that the
tests of the ingress-nginx entrypoint (`/nginx-ingress-controller`, deploy/nginx-ingress-controller) replay."""
from __future__ import annotations

# deploy/static/provider/cloud/deploy.yaml (controller-v1.15.1), the controller container's args. The Helm
# chart (4.15.1) with its default values passes the same list. $(POD_NAMESPACE) is left for the program to
# expand: in a pod the kubelet does it, elsewhere nothing does.
ENTRYPOINT = "/nginx-ingress-controller"
CLOUD_DEPLOY_ARGS = [
    "--publish-service=$(POD_NAMESPACE)/ingress-nginx-controller",
    "--election-id=ingress-nginx-leader",
    "--controller-class=k8s.io/ingress-nginx",
    "--ingress-class=nginx",
    "--configmap=$(POD_NAMESPACE)/ingress-nginx-controller",
    "--validating-webhook=:8443",
    "--validating-webhook-certificate=/usr/local/certificates/cert",
    "--validating-webhook-key=/usr/local/certificates/key",
]
HELM_DEFAULT_ARGS = list(CLOUD_DEPLOY_ARGS)
# The container's command lines, as the program sees its argv.
CLOUD_DEPLOY_COMMAND = [ENTRYPOINT, *CLOUD_DEPLOY_ARGS]
HELM_DEFAULT_COMMAND = [ENTRYPOINT, *HELM_DEFAULT_ARGS]
# The downward API variables both set.
POD_ENV = {"POD_NAMESPACE": "ingress-nginx", "POD_NAME": "ingress-nginx-controller-5d8f9c-abcde"}

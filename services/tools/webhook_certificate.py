"""`pyngress webhook-certificate`: the admission webhook's certificate, made once and handed to the API server.

What the Job of the install manifests (`pyngress manifests --validating-webhook`) runs, as ingress-nginx's chart
runs kube-webhook-certgen, in pyngress's own image:
1. the Secret (--secret, in --namespace) holding `ca`, `cert` and `key` is read; when it does not exist, a CA and a
   serving certificate for the webhook's Service (`<service>`, `<service>.<namespace>`,
   `<service>.<namespace>.svc` and `...svc.cluster.local`) are made with the openssl command, in a private
   temporary directory, and the Secret is created (a concurrent run that created it first wins: its pair is used);
2. every webhook of the ValidatingWebhookConfiguration (--webhook-configuration) gets the CA as its caBundle.
Run again, it changes nothing. The controller mounts the Secret and re-reads the files when they change; to
rotate, delete the Secret and run the Job again.

It needs, and the manifests grant its own service account, no more than: get and create Secrets in its
namespace (get narrowed to the one Secret), get and update the one ValidatingWebhookConfiguration. The
controller itself gets no permission for either: the long-running process that faces the network cannot write
Secrets or webhook configurations.
"""
from __future__ import annotations

import argparse
import base64
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from kubernetes import client

from services.common.kube import KubeConfigError, api_error_text, kube_configuration, read_json
from services.common.settings import Settings

DAYS = 3650
KEYS = ("ca", "cert", "key")  # the Secret's keys, as kube-webhook-certgen names them
HTTP_NOT_FOUND, HTTP_CONFLICT = 404, 409


class UnusableSecret(RuntimeError):
    """The Secret exists but holds no certificate this command made; the message says what to do."""


def service_names(service: str, namespace: str) -> list[str]:
    return [service, f"{service}.{namespace}", f"{service}.{namespace}.svc",
            f"{service}.{namespace}.svc.cluster.local"]


def _openssl(directory: Path, *args: str) -> None:
    subprocess.run(["openssl", *args], cwd=directory, check=True, capture_output=True, timeout=60)


def make_pair(service: str, namespace: str, days: int = DAYS) -> dict[str, str]:
    """A new CA and a serving certificate signed by it (P-256 keys), PEM: {"ca", "cert", "key"}."""
    with tempfile.TemporaryDirectory(prefix="pyngress-webhook-") as temporary:
        directory = Path(temporary)  # mode 0700: the keys are never readable by another user
        key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        _openssl(directory, "req", "-x509", *key, "-keyout", "ca.key", "-out", "ca.crt", "-days", str(days),
                 "-subj", f"/O=pyngress/CN=pyngress admission CA {namespace}",
                 "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign")
        _openssl(directory, "req", *key, "-keyout", "tls.key", "-out", "tls.csr",
                 "-subj", f"/O=pyngress/CN={service}")
        names = ",".join(f"DNS:{n}" for n in service_names(service, namespace))
        (directory / "ext").write_text(f"subjectAltName={names}\nextendedKeyUsage=serverAuth\n"
                                       "keyUsage=critical,digitalSignature\n")
        _openssl(directory, "x509", "-req", "-in", "tls.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                 "-days", str(days), "-extfile", "ext", "-out", "tls.crt")
        return {"ca": (directory / "ca.crt").read_text(), "cert": (directory / "tls.crt").read_text(),
                "key": (directory / "tls.key").read_text()}


def _decoded(secret: dict[str, Any]) -> dict[str, str] | None:
    data = secret.get("data") or {}
    if not all(data.get(k) for k in KEYS):
        return None
    return {k: base64.b64decode(data[k]).decode() for k in KEYS}


def ensure_secret(core: client.CoreV1Api, namespace: str, name: str, service: str) -> str:
    """The CA (PEM) of the Secret, created first when missing."""
    try:
        existing = _decoded(read_json(core.read_namespaced_secret, name, namespace))
        if existing is None:
            raise UnusableSecret(f"Secret {namespace}/{name} exists without the keys {', '.join(KEYS)}: delete it, "
                                 "and this command makes a new one")
        return existing["ca"]
    except client.ApiException as err:
        if err.status != HTTP_NOT_FOUND:
            raise
    pair = make_pair(service, namespace)
    body = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": name, "namespace": namespace}, "data": {k: base64.b64encode(v.encode()).decode() for k, v in pair.items()}}
    try:
        read_json(core.create_namespaced_secret, namespace, body)
    except client.ApiException as err:
        if err.status != HTTP_CONFLICT:
            raise
        return ensure_secret(core, namespace, name, service)  # another run made it first: its CA is the one
    return pair["ca"]


def patch_ca_bundle(admission: client.AdmissionregistrationV1Api, name: str, ca: str) -> bool:
    """Every webhook of the configuration trusts `ca`; whether anything changed. A read, then an update with the
    resourceVersion read (a conflicting write in between: read again)."""
    bundle = base64.b64encode(ca.encode()).decode()
    while True:
        configuration = read_json(admission.read_validating_webhook_configuration, name)
        webhooks = configuration.get("webhooks") or []
        if all((w.get("clientConfig") or {}).get("caBundle") == bundle for w in webhooks):
            return False
        for webhook in webhooks:
            webhook.setdefault("clientConfig", {})["caBundle"] = bundle
        try:
            read_json(admission.replace_validating_webhook_configuration, name, configuration)
            return True
        except client.ApiException as err:
            if err.status != HTTP_CONFLICT:
                raise


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--namespace", required=True, help="the namespace of the Secret and the webhook's Service")
    parser.add_argument("--service", required=True, help="the webhook's Service (the certificate's names)")
    parser.add_argument("--secret", required=True, help="the Secret holding ca, cert and key")
    parser.add_argument("--webhook-configuration", required=True, help="the ValidatingWebhookConfiguration to patch")
    parser.add_argument("--kubeconfig", default=None, help="the API server from this kubeconfig (default: in-cluster)")


def run(namespace: argparse.Namespace) -> int:
    try:
        api_client = client.ApiClient(kube_configuration(Settings.from_flags(kubeconfig=namespace.kubeconfig)))
    except KubeConfigError as err:
        print(f"pyngress webhook-certificate: {err}", file=sys.stderr)
        return 2
    try:
        ca = ensure_secret(client.CoreV1Api(api_client), namespace.namespace, namespace.secret, namespace.service)
        changed = patch_ca_bundle(client.AdmissionregistrationV1Api(api_client), namespace.webhook_configuration, ca)
    except client.ApiException as err:
        print(f"pyngress webhook-certificate: {api_error_text(err)}", file=sys.stderr)
        return 1
    except UnusableSecret as err:
        print(f"pyngress webhook-certificate: {err}", file=sys.stderr)
        return 2
    print(f"Secret {namespace.namespace}/{namespace.secret} ready; ValidatingWebhookConfiguration "
          f"{namespace.webhook_configuration} {'patched with' if changed else 'already trusts'} its CA")
    return 0

"""Validating admission webhooks, called as kube-apiserver calls them.

The ValidatingWebhookConfigurations stored through the API are read at each write. A create or update (PUT or
PATCH, not the status subresource) of an object whose group, version, resource and operation a webhook's
rules match, and whose labels (new or old object's) and namespace's labels its objectSelector and
namespaceSelector select, is first computed without being stored (as with dryRun); each matching webhook is
then sent an AdmissionReview (the first of its admissionReviewVersions this server speaks) by POST over HTTPS,
the server's certificate verified against the webhook's caBundle for `<service>.<namespace>.svc` (or the
url's host), within timeoutSeconds (default 10). Its answer:
- allowed: the write goes on; its `warnings` reach the client as `Warning: 299 - "..."` headers;
- denied: the write is refused with the webhook's status code (at least 400) and
  `admission webhook "<name>" denied the request: <message>`;
- no answer, or one that cannot be read (a wrong uid included): with failurePolicy Fail (the default) the
  write is refused with 500 `failed calling webhook "<name>": ...`, with Ignore it goes on.

A webhook's Service is reached as kube-apiserver reaches it with endpoint routing: through the Service's port
(clientConfig.service.port, default 443) to its targetPort on a ready endpoint of its EndpointSlices (the
tests point one at 127.0.0.1). Not implemented: matchConditions (CEL), matchPolicy Equivalent's conversion,
reinvocation, mutating webhooks, DELETE and CONNECT operations.
"""
from __future__ import annotations

import asyncio
import base64
import json
import ssl
import urllib.parse
import uuid
from typing import Any

import aiohttp

from .errors import ApiError
from .resources import ResourceType, by_kind
from .storage import Storage

Obj = dict[str, Any]
REVIEW_VERSIONS = ("admission.k8s.io/v1", "admission.k8s.io/v1beta1")
DEFAULT_TIMEOUT_SECONDS = 10


class WebhookCallError(Exception):
    """The webhook could not be called, or its answer not read."""


def _matches_any(values: list[str] | None, value: str) -> bool:
    return bool(values) and ("*" in values or value in values)  # type: ignore[operator]


def rules_match(webhook: Obj, rtype: ResourceType, operation: str) -> bool:
    for rule in webhook.get("rules") or []:
        resources = rule.get("resources") or []
        if (_matches_any(rule.get("operations"), operation) and _matches_any(rule.get("apiGroups"), rtype.group)
                and _matches_any(rule.get("apiVersions"), rtype.version)
                and ("*" in resources or "*/*" in resources or rtype.plural in resources)):
            return True
    return False


def selector_matches(selector: Obj | None, labels: dict[str, str]) -> bool:
    """A metav1.LabelSelector (matchLabels, matchExpressions) over `labels`; an empty one selects everything."""
    selector = selector or {}
    if any(labels.get(key) != value for key, value in (selector.get("matchLabels") or {}).items()):
        return False
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = expression["key"], expression["operator"], expression.get("values") or []
        if operator == "In" and labels.get(key) not in values:
            return False
        if operator == "NotIn" and key in labels and labels[key] in values:
            return False
        if operator == "Exists" and key not in labels:
            return False
        if operator == "DoesNotExist" and key in labels:
            return False
    return True


def _labels(obj: Obj | None) -> dict[str, str]:
    return ((obj or {}).get("metadata") or {}).get("labels") or {}


class Admission:
    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self.calls = 0  # AdmissionReviews sent, for tests

    def webhooks_for(self, rtype: ResourceType, operation: str, new: Obj, old: Obj | None) -> list[Obj]:
        found = []
        for config in self.storage.objects[by_kind("ValidatingWebhookConfiguration")].values():
            for webhook in config.get("webhooks") or []:
                if not rules_match(webhook, rtype, operation):
                    continue
                if not (selector_matches(webhook.get("objectSelector"), _labels(new))
                        or old is not None and selector_matches(webhook.get("objectSelector"), _labels(old))):
                    continue
                namespace = new["metadata"].get("namespace")
                if rtype.namespaced and namespace:
                    ns = self.storage.objects[by_kind("Namespace")].get(("", namespace))
                    if not selector_matches(webhook.get("namespaceSelector"), _labels(ns)):
                        continue
                found.append(webhook)
        return found

    def any_for(self, rtype: ResourceType, operation: str) -> bool:
        return any(rules_match(webhook, rtype, operation)
                   for config in self.storage.objects[by_kind("ValidatingWebhookConfiguration")].values()
                   for webhook in config.get("webhooks") or [])

    async def review(self, rtype: ResourceType, operation: str, new: Obj, old: Obj | None, *, user: str,
                     dry_run: bool) -> list[str]:
        """The warnings of every matching webhook; ApiError when one denies or fails with failurePolicy Fail."""
        warnings: list[str] = []
        for webhook in self.webhooks_for(rtype, operation, new, old):
            name = webhook.get("name", "")
            try:
                response = await self._call(webhook, rtype, operation, new, old, user=user, dry_run=dry_run)
            except WebhookCallError as err:
                if webhook.get("failurePolicy", "Fail") == "Ignore":
                    continue
                raise ApiError(500, "InternalError",
                               f'Internal error occurred: failed calling webhook "{name}": {err}') from None
            warnings.extend(str(w) for w in response.get("warnings") or [])
            if not response.get("allowed"):
                status = response.get("status") or {}
                code = status.get("code") or 0
                message = status.get("message") or status.get("reason") or ""
                denied = f'admission webhook "{name}" denied the request'
                raise ApiError(max(int(code), 400), status.get("reason") or "BadRequest",
                               f"{denied}: {message}" if message else f"{denied} without explanation")
        return warnings

    def _target(self, webhook: Obj) -> tuple[str, str, int, str]:
        """(address to connect to, TLS server name, port, path)."""
        client = webhook.get("clientConfig") or {}
        if client.get("url"):
            url = urllib.parse.urlsplit(client["url"])
            return url.hostname or "", url.hostname or "", url.port or 443, url.path or "/"
        service = client.get("service") or {}
        namespace, name = service.get("namespace", ""), service.get("name", "")
        address, port = self._endpoint(namespace, name, int(service.get("port") or 443))
        return address, f"{name}.{namespace}.svc", port, service.get("path") or "/"

    def _endpoint(self, namespace: str, name: str, service_port: int) -> tuple[str, int]:
        svc = self.storage.objects[by_kind("Service")].get((namespace, name))
        if svc is None:
            raise WebhookCallError(f'service "{name}" not found')
        ports = [p for p in (svc.get("spec") or {}).get("ports") or [] if p.get("port") == service_port]
        if not ports:
            raise WebhookCallError(f'service "{name}" has no port {service_port}')
        port_name, target = ports[0].get("name", ""), ports[0].get("targetPort", service_port)
        for slice_ in self.storage.objects[by_kind("EndpointSlice")].values():
            meta = slice_["metadata"]
            if meta.get("namespace") != namespace or _labels(slice_).get("kubernetes.io/service-name") != name:
                continue
            slice_ports = [p["port"] for p in slice_.get("ports") or []
                           if p.get("name", "") == port_name or p.get("port") == target]
            for endpoint in slice_.get("endpoints") or []:
                if slice_ports and (endpoint.get("conditions") or {}).get("ready", True):
                    return endpoint["addresses"][0], slice_ports[0]
        raise WebhookCallError(f'no endpoints available for service "{name}"')

    async def _call(self, webhook: Obj, rtype: ResourceType, operation: str, new: Obj, old: Obj | None, *,
                    user: str, dry_run: bool) -> Obj:
        versions = [v for v in webhook.get("admissionReviewVersions") or [] if v in ("v1", "v1beta1")]
        if not versions:
            raise WebhookCallError("none of the webhook's admissionReviewVersions is v1 or v1beta1")
        api_version = f"admission.k8s.io/{versions[0]}"
        uid = str(uuid.uuid4())
        meta = new["metadata"]
        kind = {"group": rtype.group, "version": rtype.version, "kind": rtype.kind}
        resource = {"group": rtype.group, "version": rtype.version, "resource": rtype.plural}
        review = {"apiVersion": api_version, "kind": "AdmissionReview", "request": {
            "uid": uid, "kind": kind, "resource": resource, "requestKind": kind, "requestResource": resource,
            "name": meta.get("name", ""), "namespace": meta.get("namespace", ""), "operation": operation,
            "userInfo": {"username": user}, "object": new, "oldObject": old, "dryRun": dry_run,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": f"{operation.title()}Options"}}}
        context = ssl.create_default_context(cadata=self._ca_bundle(webhook) or None)  # none: the system's CAs
        address, server_name, port, path = self._target(webhook)
        timeout = webhook.get("timeoutSeconds") or DEFAULT_TIMEOUT_SECONDS
        self.calls += 1
        try:
            async with asyncio.timeout(timeout), aiohttp.ClientSession() as session:
                async with session.post(f"https://{_host(address)}:{port}{path}", json=review, ssl=context,
                                        server_hostname=server_name) as answer:
                    if answer.status != 200:
                        raise WebhookCallError(f"expected 200 from the webhook, got {answer.status}: "
                                               f"{(await answer.text())[:200]}")
                    body = await answer.read()
        except TimeoutError:
            raise WebhookCallError(f"context deadline exceeded ({timeout}s)") from None
        except aiohttp.ClientError as err:
            raise WebhookCallError(f'failed to call webhook: Post "https://{server_name}:{port}{path}": {err}') \
                from None
        try:
            response = json.loads(body)["response"]
        except (ValueError, KeyError, TypeError) as err:
            raise WebhookCallError(f"the webhook's answer is not an AdmissionReview: {err}") from None
        if response.get("uid") != uid:
            raise WebhookCallError(f"expected response.uid={uid!r}, got {response.get('uid')!r}")
        return response

    @staticmethod
    def _ca_bundle(webhook: Obj) -> str:
        bundle = (webhook.get("clientConfig") or {}).get("caBundle") or ""
        try:
            return base64.b64decode(bundle).decode()
        except ValueError:
            raise WebhookCallError("clientConfig.caBundle is not base64") from None


def _host(address: str) -> str:
    return f"[{address}]" if ":" in address else address

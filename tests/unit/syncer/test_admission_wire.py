"""AdmissionReview on the wire (services/syncer/admission/wire.py): what the API server gets back."""
from __future__ import annotations

import json
from typing import Any

import pytest

from services.syncer.admission.review import Verdict
from services.syncer.admission.wire import MAX_BODY_BYTES, BadReview, answer_body, decide, parse_review


def review(operation: str = "CREATE", kind: str = "Ingress", group: str = "networking.k8s.io",
           version: str = "admission.k8s.io/v1", obj: Any = None) -> bytes:
    return json.dumps({"apiVersion": version, "kind": "AdmissionReview", "request": {
        "uid": "705ab4f5-6393-11e8-b7cc-42010a800002", "kind": {"group": group, "version": "v1", "kind": kind},
        "operation": operation, "dryRun": True,
        "object": {"metadata": {"name": "web"}} if obj is None else obj}}).encode()


def deny_all(ingress: Any, operation: str) -> Verdict:
    return Verdict(allowed=False, message=f"{operation} {ingress['metadata']['name']}: no", warnings=("careful",))


def answered(body: bytes, reviewer: Any = deny_all) -> dict[str, Any]:
    request = parse_review(body)
    return json.loads(answer_body(request, decide(request, reviewer)))


@pytest.mark.parametrize("version", ["admission.k8s.io/v1", "admission.k8s.io/v1beta1"])
def test_a_denial_echoes_the_uid_in_the_version_asked_with_ingress_nginxs_status(version):
    answer = answered(review(version=version))
    assert answer == {"apiVersion": version, "kind": "AdmissionReview", "response": {
        "uid": "705ab4f5-6393-11e8-b7cc-42010a800002", "allowed": False, "warnings": ["careful"],
        "status": {"status": "Failure", "code": 400, "reason": "BadRequest", "message": "CREATE web: no"}}}


def test_an_allowed_review_carries_its_warnings_and_no_status():
    response = answered(review(operation="UPDATE"), lambda ingress, op: Verdict(True, warnings=("ignored: x",)))
    assert response["response"] == {"uid": "705ab4f5-6393-11e8-b7cc-42010a800002", "allowed": True,
                                    "warnings": ["ignored: x"]}


@pytest.mark.parametrize("body", [review(operation="DELETE"), review(kind="Service", group=""),
                                  review(group="extensions"), review(obj=[])], ids=["delete", "service",
                                                                                  "other-group", "no-object"])
def test_what_is_not_a_create_or_update_of_an_ingress_is_allowed_unreviewed(body):
    assert answered(body)["response"]["allowed"] is True


@pytest.mark.parametrize("body,complaint", [
    (b"not json", "not JSON"),
    (b"[]", "not an AdmissionReview"),
    (json.dumps({"apiVersion": "admission.k8s.io/v2", "kind": "AdmissionReview"}).encode(), "is not one of"),
    (json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {}}).encode(),
     "no request with a uid"),
    (b" " * (MAX_BODY_BYTES + 1), "over the 3145728"),
])
def test_a_body_that_is_no_admission_review_is_refused_saying_why(body, complaint):
    with pytest.raises(BadReview, match=complaint):
        parse_review(body)

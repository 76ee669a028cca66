"""AdmissionReview on the wire: the API server's request read and checked, the answer written; no I/O.

Bounds first: a body is at most MAX_BODY_BYTES (the API server sends nothing larger: it refuses a request body
over 3 MiB itself); it must be JSON, an AdmissionReview of a version in VERSIONS, with a request carrying a uid.
Anything else is a `BadReview` (the server answers 400 and decides nothing).

The answer is in the version asked (v1, or v1beta1 from an older API server), echoes request.uid, and carries
`allowed`, the Verdict's (review.py) warnings (kubectl prints them) and, when denied, a Status with the message, code 400
and reason BadRequest, as ingress-nginx's webhook answers (kubectl then prints "Error from server (BadRequest):
admission webhook ... denied the request: <message>", the line its users know).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

import orjson

from services.syncer.admission.gateway_review import REVIEWED_KINDS
from services.syncer.admission.review import ALLOWED, Verdict

MAX_BODY_BYTES = 3 * 1024 * 1024
VERSIONS = ("admission.k8s.io/v1", "admission.k8s.io/v1beta1")
INGRESS_GROUP = "networking.k8s.io"
GATEWAY_GROUP = "gateway.networking.k8s.io"
DENIED_CODE = 400


class BadReview(ValueError):
    """The body is not an AdmissionReview this webhook can answer; the message says what is wrong."""


@dataclass(frozen=True)
class ReviewRequest:
    api_version: str
    uid: str
    operation: str  # CREATE, UPDATE, DELETE, CONNECT
    group: str
    kind: str
    object: Mapping[str, Any] | None

    @property
    def is_reviewed(self) -> bool:
        """An Ingress, or a Gateway API kind review.py judges (routes and Gateways)."""
        return ((self.group, self.kind) == (INGRESS_GROUP, "Ingress")
                or self.group == GATEWAY_GROUP and self.kind in REVIEWED_KINDS)


def parse_review(body: bytes) -> ReviewRequest:
    if len(body) > MAX_BODY_BYTES:
        raise BadReview(f"the body is {len(body)} bytes, over the {MAX_BODY_BYTES} an AdmissionReview may have")
    try:
        review = orjson.loads(body)
    except orjson.JSONDecodeError as err:
        raise BadReview(f"the body is not JSON: {err}") from None
    if not isinstance(review, dict) or review.get("kind") != "AdmissionReview":
        raise BadReview("the body is not an AdmissionReview")
    api_version = review.get("apiVersion")
    if api_version not in VERSIONS:
        raise BadReview(f"AdmissionReview apiVersion {api_version!r} is not one of {', '.join(VERSIONS)}")
    request = review.get("request")
    if not isinstance(request, dict) or not isinstance(request.get("uid"), str) or not request["uid"]:
        raise BadReview("the AdmissionReview has no request with a uid")
    kind = request.get("kind")
    kind = kind if isinstance(kind, dict) else {}
    obj = request.get("object")
    return ReviewRequest(api_version=api_version, uid=request["uid"], operation=str(request.get("operation") or ""),
                         group=str(kind.get("group") or ""), kind=str(kind.get("kind") or ""),
                         object=obj if isinstance(obj, dict) else None)


def decide(request: ReviewRequest, review: Callable[[Mapping[str, Any], str], Verdict]) -> Verdict:
    """Only a create or update of an Ingress, a route or a Gateway is reviewed: a DELETE, another kind, a request
    without an object is allowed (the configuration may name this webhook for more than it decides). A dry run is
    answered as the real request would be. The review tells the kinds apart by the object's own apiVersion and kind,
    which the API server always sends."""
    if not request.is_reviewed or request.operation not in ("CREATE", "UPDATE") or request.object is None:
        return ALLOWED
    return review(request.object, request.operation)


def answer_body(request: ReviewRequest, answer: Verdict) -> bytes:
    response: dict[str, Any] = {"uid": request.uid, "allowed": answer.allowed}
    if not answer.allowed:
        response["status"] = {"status": "Failure", "code": DENIED_CODE, "reason": "BadRequest",
                              "message": answer.message or "denied by pyngress's admission webhook"}
    if answer.warnings:
        response["warnings"] = list(answer.warnings)
    return orjson.dumps({"apiVersion": request.api_version, "kind": "AdmissionReview", "response": response})

"""API errors as the real server reports them: an HTTP code and a `Status` object."""
from __future__ import annotations

from typing import Any

from .resources import ResourceType


class ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                "message": self.message, "reason": self.reason, "code": self.code}
        if self.details is not None:
            body["details"] = self.details
        return body


def _details(rtype: ResourceType, name: str) -> dict[str, Any]:
    details = {"name": name, "kind": rtype.plural}
    if rtype.group:
        details["group"] = rtype.group
    return details


def not_found(rtype: ResourceType, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{rtype.qualified} "{name}" not found', _details(rtype, name))


def already_exists(rtype: ResourceType, name: str) -> ApiError:
    return ApiError(409, "AlreadyExists", f'{rtype.qualified} "{name}" already exists', _details(rtype, name))


def conflict(rtype: ResourceType, name: str, why: str) -> ApiError:
    return ApiError(409, "Conflict", f'Operation cannot be fulfilled on {rtype.qualified} "{name}": {why}',
                    _details(rtype, name))


def invalid(rtype: ResourceType, name: str, field: str, value: Any, why: str) -> ApiError:
    cause = f'{field}: Invalid value: "{value}": {why}'
    details = {"name": name, "kind": rtype.kind,
               "causes": [{"reason": "FieldValueInvalid", "message": f'Invalid value: "{value}": {why}',
                           "field": field}]}
    if rtype.group:
        details["group"] = rtype.group
    return ApiError(422, "Invalid", f'{rtype.kind} "{name}" is invalid: {cause}', details)


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def expired(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def too_old(requested: int, oldest: int) -> ApiError:
    return expired(f"too old resource version: {requested} ({oldest})")


def unsupported_media_type(content_type: str) -> ApiError:
    return ApiError(415, "UnsupportedMediaType", f'the body of the request was in an unknown format - '
                    f'accepted media types include: application/json-patch+json, application/merge-patch+json, '
                    f'application/strategic-merge-patch+json (got "{content_type}")')


def method_not_allowed(method: str) -> ApiError:
    return ApiError(405, "MethodNotAllowed", f"the server does not allow this method on the requested resource "
                    f"({method})")


def page_not_found() -> ApiError:
    return ApiError(404, "NotFound", "the server could not find the requested resource")


def internal_error(message: str) -> ApiError:
    return ApiError(500, "InternalError", f"Internal error occurred: {message}")

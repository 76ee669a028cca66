"""Who is asking: bearer tokens → users, as the real API server authenticates them.

- ADMIN_TOKEN (what `write_kubeconfig` and `configuration()` send unless told otherwise) is the tests' own
  client: a member of system:masters, which the real server never subjects to authorization.
- A ServiceAccount token (TokenRequest: POST .../serviceaccounts/NAME/token, or the server's
  `service_account_token` hook) is `system:serviceaccount:NS:NAME` in the groups system:serviceaccounts,
  system:serviceaccounts:NS and system:authenticated, and is held to RBAC. It is valid while that
  ServiceAccount exists (same uid), as bound tokens are; it carries no expiry and is opaque, not a JWT.
- No token at all: by default the admin too, so that tests written before authentication existed keep
  working unchanged; with `anonymous_is_admin=False`, `system:anonymous` (group system:unauthenticated),
  held to RBAC like anyone else.
- Any other token, or an Authorization header that is not a bearer token: 401 Unauthorized.
"""
from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Callable

from .errors import ApiError

# (namespace, name) → the ServiceAccount's uid, or None when it does not exist.
UidLookup = Callable[[str, str], "str | None"]

ADMIN_TOKEN = "test-token"
MASTERS_GROUP = "system:masters"
AUTHENTICATED_GROUP = "system:authenticated"


@dataclass(frozen=True)
class UserInfo:
    name: str
    groups: tuple[str, ...]

    @property
    def is_admin(self) -> bool:
        return MASTERS_GROUP in self.groups

    @property
    def authenticated(self) -> bool:
        return AUTHENTICATED_GROUP in self.groups


ADMIN = UserInfo("test-admin", (MASTERS_GROUP, AUTHENTICATED_GROUP))
ANONYMOUS = UserInfo("system:anonymous", ("system:unauthenticated",))


def service_account_username(namespace: str, name: str) -> str:
    return f"system:serviceaccount:{namespace}:{name}"


def service_account_user(namespace: str, name: str) -> UserInfo:
    return UserInfo(service_account_username(namespace, name),
                    ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", AUTHENTICATED_GROUP))


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized", "Unauthorized")


@dataclass(frozen=True)
class _Binding:
    namespace: str
    name: str
    uid: str


class Tokens:
    """The tokens issued for ServiceAccounts, and what each one names."""

    def __init__(self) -> None:
        self._issued: dict[str, _Binding] = {}

    def issue(self, namespace: str, name: str, uid: str) -> str:
        token = "sa-" + secrets.token_urlsafe(24)
        self._issued[token] = _Binding(namespace, name, uid)
        return token

    def authenticate(self, authorization: str | None, service_account_uid: UidLookup, *,
                     anonymous_is_admin: bool) -> UserInfo:
        """The user an Authorization header names; ApiError 401 when it names nobody."""
        if not authorization:
            return ADMIN if anonymous_is_admin else ANONYMOUS
        scheme, _, token = authorization.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise unauthorized()
        if token == ADMIN_TOKEN:
            return ADMIN
        bound = self._issued.get(token)
        if bound is None or service_account_uid(bound.namespace, bound.name) != bound.uid:
            raise unauthorized()  # unknown, or its ServiceAccount was deleted (maybe re-created: new uid)
        return service_account_user(bound.namespace, bound.name)

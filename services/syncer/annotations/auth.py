"""auth-type, auth-secret, auth-secret-type, auth-realm: HTTP basic or digest authentication from a Secret.

What the annotations ask for is a BasicAuthRequest; the Secret it names is looked up per Ingress, when the
model is built (services/syncer/model/auth_secrets.py), because the annotations alone do not say which
namespace "name" means, and the Secret may come, change or go at any time.

Basic authentication is nginx's auth_basic with an htpasswd file; digest authentication (RFC 7616 with MD5
and qop=auth, an htdigest file) is checked in Lua, Debian's nginx having no digest module
(templates/lua/pyngress/digest_auth.lua). auth-secret without auth-type is refused: ingress-nginx ignores it
and serves the paths open, which is never what its author meant.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, Mapping

from .base import Annotation, IngressAnnotations, InvalidAnnotation, InvalidValue, Risk
from .validators import one_of

SecretType = Literal["auth-file", "auth-map"]

_LABEL = r"[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?"
_SECRET_NAME = rf"(?=[^/]{{1,253}}$){_LABEL}(?:\.{_LABEL})*"
_SECRET_REF = re.compile(rf"(?:{_LABEL}/)?{_SECRET_NAME}")
# ingress-nginx's characters for a realm; '"' and '$' can never reach the WWW-Authenticate header.
_REALM = re.compile(r"[-._~A-Za-z0-9/: ]{0,200}")


def _auth_type(value: str) -> str:
    lowered = value.lower()
    if lowered not in ("basic", "digest"):
        raise InvalidValue("must be basic or digest")
    return lowered


def _secret_ref(value: str) -> str:
    if not _SECRET_REF.fullmatch(value):
        raise InvalidValue("must name a Secret as NAME or NAMESPACE/NAME, in lower case (such as basic-auth "
                           "or team-a/basic-auth)")
    return value


def _realm(value: str) -> str:
    if not _REALM.fullmatch(value):
        raise InvalidValue("must be at most 200 letters, digits, spaces and -._~/: (such as Authentication "
                           "Required)")
    if value.lower() == "off":
        raise InvalidValue('"off" would turn authentication off in nginx; choose another realm')
    return value


ANNOTATIONS = (
    Annotation("auth-type", validate=_auth_type, risk=Risk.LOW,
               doc="basic or digest: ask for a user and password checked against auth-secret.",
               differs="digest is checked in Lua (Debian's nginx has no digest module): MD5 with qop=auth, nonces "
                       "that expire after 60 s (a right answer to an expired one gets stale=true), each "
                       "Authorization header accepted once."),
    Annotation("auth-secret", validate=_secret_ref, risk=Risk.MEDIUM,
               doc="The Opaque Secret (NAME or NAMESPACE/NAME) with the users and their password hashes.",
               differs="Without auth-type the paths answer 503 (ingress-nginx serves them open); every line of the "
                       "htpasswd Secret is checked, and a hash nginx could not check or a {PLAIN} password makes the"
                       " paths answer 503 naming the user."),
    Annotation("auth-secret-type", validate=one_of("auth-file", "auth-map"), risk=Risk.LOW,
               doc="auth-file (default): an htpasswd (htdigest for digest) file in the key `auth`; auth-map: one "
               "key per user, its value the password hash (realm:HA1 for digest)."),
    Annotation("auth-realm", validate=_realm, risk=Risk.MEDIUM,
               doc="The realm browsers show when they ask for the password."),
)


@dataclass(frozen=True, kw_only=True)
class BasicAuthRequest:
    """Basic or digest authentication as the annotations ask for it; `namespace` None means the Ingress's own."""
    namespace: str | None
    secret: str
    secret_type: SecretType
    realm: str
    digest: bool = False


def apply(values: Mapping[str, str], parsed: IngressAnnotations) -> None:
    if "auth-type" not in values:
        if "auth-secret" in values:
            raise InvalidAnnotation(f"{parsed.prefix}/auth-secret", value=values["auth-secret"], reason=(
                "needs auth-type: \"basic\" beside it: without it ingress-nginx serves the paths without "
                "authentication; add auth-type, or remove auth-secret"))
        for name in ("auth-secret-type", "auth-realm"):
            if name in values:
                parsed.warn(name, "has no effect without auth-type; ignored")
        return
    if "auth-secret" not in values:
        raise InvalidAnnotation(f"{parsed.prefix}/auth-type", value=values["auth-type"],
                                reason="needs auth-secret naming the Secret with the users and password hashes")
    namespace, _, name = values["auth-secret"].rpartition("/")
    parsed.basic_auth = BasicAuthRequest(
        namespace=namespace or None, secret=name,
        secret_type="auth-map" if values.get("auth-secret-type") == "auth-map" else "auth-file",
        realm=values.get("auth-realm", ""), digest=values["auth-type"] == "digest")

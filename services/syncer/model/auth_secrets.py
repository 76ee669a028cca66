"""The Secrets and ConfigMaps of an Ingress's location profile: its auth-secret → an htpasswd (htdigest) file,
its auth-proxy-set-headers → the headers of a ConfigMap, its proxy-ssl-secret → the backend's CA and client
certificate files (backend_tls.py), its fastcgi-params-configmap → FastCGI parameters (fastcgi_params.py), with
the ConfigMap's global-auth-url.

As in ingress-nginx, a location whose Secret cannot be used (missing, in another namespace without the
ConfigMap's allow-cross-namespace-resources, without the expected keys, or with a hash nginx cannot check),
or whose auth-proxy-set-headers ConfigMap cannot be used in full (missing, in another namespace, an entry that
is not a header or whose value is not plain text), is denied: its paths answer 503 and a problem says why, until the Secret is fixed. It is never served
without authentication. The same holds while the ConfigMap's global-auth-* keys are invalid, for every
Ingress that global authentication would cover.

The profile names the file by a digest of the Secret's reference, not of its content: a changed Secret
rewrites the file (nginx reads it on every request) without a new profile, so without a reload.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Mapping

from services.nginxconf.config import BasicAuth, ExternalAuth, LocationProfile
from services.nginxconf.render import AUTH_REQUEST_HEADERS

from ..annotations import IngressAnnotations
from .backend_tls import BackendTlsRejected, resolve_backend_tls
from .fastcgi_params import fastcgi_params
from .header_configmaps import headers_of
from .htdigest import htdigest_file
from .htpasswd import InvalidHtpasswd, SecretType, htpasswd_file

# What ingress-nginx renders for a denied location: `return 503`.
DENIED_PROFILE = LocationProfile.of((("return", "503"),))


@dataclass(frozen=True)
class AuthProfile:
    profile: LocationProfile
    problem: str | None = None  # why the location is denied (DENIED_PROFILE)


@dataclass(frozen=True)
class _Checked:
    user_file: str
    content: bytes = field(repr=False)  # password hashes: never in logs or reprs
    problem: str | None


class AuthResolver:
    """Resolves each Ingress's authentication against the Secrets and the ConfigMap's global auth; `files`
    collects the htpasswd files nginx reads."""

    def __init__(self, secrets: Mapping[tuple[str, str], Mapping[str, Any]], *, allow_cross_namespace: bool,
                 global_auth: ExternalAuth | None = None, global_auth_problem: str | None = None,
                 store: Mapping[str, dict[str, Any]] | None = None,
                 allowed_response_headers: tuple[str, ...] = ()) -> None:
        self._secrets = secrets
        self._store = store or {}  # the watcher's store, for ConfigMaps
        self._allowed_response_headers = frozenset(name.lower() for name in allowed_response_headers)
        self._allow_cross_namespace = allow_cross_namespace
        self._global_auth = global_auth
        self._global_auth_problem = global_auth_problem
        self._checked: dict[tuple[str, str, SecretType, str | None], _Checked] = {}
        # htpasswd file name (in NginxPaths.auth_dir) → content, for the Secrets that some profile uses.
        self.files: dict[str, bytes] = {}
        # proxy-ssl-secret files (in NginxPaths.ssl_dir) → content.
        self.ssl_files: dict[str, bytes] = {}

    def profile(self, annotations: IngressAnnotations, *, namespace: str, zone: str) -> AuthProfile:
        """The location profile of an Ingress in `namespace` with these annotations and rate-limit `zone`."""
        resolved = self._secured_profile(annotations, namespace=namespace, zone=zone)
        if annotations.fastcgi_params_configmap is None or resolved.problem:
            return resolved
        params, problem = fastcgi_params(self._store, annotations.fastcgi_params_configmap, namespace=namespace,
                                         allow_cross_namespace=self._allow_cross_namespace,
                                         annotation=f"annotation {annotations.prefix}/fastcgi-params-configmap")
        if problem:
            return AuthProfile(DENIED_PROFILE, problem)
        return AuthProfile(resolved.profile.with_settings(fastcgi_params=params))

    def _secured_profile(self, annotations: IngressAnnotations, *, namespace: str, zone: str) -> AuthProfile:
        """The profile with what its Secrets and ConfigMaps of headers give, or why its paths are denied."""
        if annotations.denial:  # an access-control annotation with an invalid value
            return AuthProfile(DENIED_PROFILE, annotations.denial)
        if (self._global_auth_problem and annotations.external_auth is None and annotations.enable_global_auth):
            return AuthProfile(DENIED_PROFILE, f"{self._global_auth_problem}; this Ingress's paths answer 503 until "
                                               "it is fixed (or set enable-global-auth: \"false\" on it)")
        auth_headers: tuple[tuple[str, str], ...] = ()
        if annotations.external_auth and annotations.auth_proxy_set_headers:
            auth_headers, problem = self._configmap_headers(
                annotations.auth_proxy_set_headers, annotation="auth-proxy-set-headers", namespace=namespace,
                prefix=annotations.prefix, reserved=AUTH_REQUEST_HEADERS)
            if problem:
                return AuthProfile(DENIED_PROFILE, problem)
        response_headers: tuple[tuple[str, str], ...] = ()
        if annotations.custom_headers:
            response_headers, problem = self._response_headers(annotations.custom_headers, namespace=namespace,
                                                               prefix=annotations.prefix)
            if problem:
                return AuthProfile(DENIED_PROFILE, problem)
        backend_tls = None
        if annotations.backend_tls is not None:
            try:
                backend_tls, files = resolve_backend_tls(annotations.backend_tls, namespace=namespace,
                                                         allow_cross_namespace=self._allow_cross_namespace,
                                                         secrets=self._secrets)
            except BackendTlsRejected as err:
                return AuthProfile(DENIED_PROFILE, f"{err}; its paths answer 503 until it is fixed")
            self.ssl_files.update(files)
        request = annotations.basic_auth
        if request is None:
            return AuthProfile(annotations.profile_for(zone, global_auth=self._global_auth, auth_headers=auth_headers,
                                                       backend_tls=backend_tls, response_headers=response_headers))
        secret_namespace = request.namespace or namespace
        ref = f"{secret_namespace}/{request.secret}"
        if secret_namespace != namespace and not self._allow_cross_namespace:
            return AuthProfile(DENIED_PROFILE, f"auth-secret {ref} is in another namespace, which the ConfigMap's "
                                               "allow-cross-namespace-resources does not allow; its paths answer "
                                               "503 until the Secret is in the Ingress's namespace")
        checked = self._check(secret_namespace, request.secret, request.secret_type,
                              digest_realm=request.realm if request.digest else None)
        if checked.problem:
            return AuthProfile(DENIED_PROFILE, f"auth-secret {ref} {checked.problem}; its paths answer 503 until "
                                               "the Secret is fixed")
        self.files[checked.user_file] = checked.content
        return AuthProfile(annotations.profile_for(
            zone, basic_auth=BasicAuth(realm=request.realm, user_file=checked.user_file, digest=request.digest),
            global_auth=self._global_auth, auth_headers=auth_headers, backend_tls=backend_tls,
            response_headers=response_headers))

    def _configmap_headers(self, reference: str, *, annotation: str, namespace: str, prefix: str,
                           reserved: frozenset[str], literal_dollar: bool = False
                           ) -> tuple[tuple[tuple[str, str], ...], str | None]:
        """The headers of the ConfigMap an annotation names (auth-proxy-set-headers, custom-headers), or why
        the Ingress's paths are denied."""
        configmap_namespace, _, name = reference.rpartition("/")
        configmap_namespace = configmap_namespace or namespace
        full = f"{configmap_namespace}/{name}"
        if configmap_namespace != namespace and not self._allow_cross_namespace:
            return (), (f"{annotation} {full} is in another namespace, which the ConfigMap's "
                        "allow-cross-namespace-resources does not allow; its paths answer 503 until the ConfigMap "
                        "is in the Ingress's namespace")
        headers, messages = headers_of(self._store, full, source=f"annotation {prefix}/{annotation}",
                                       where_kept="in a namespace the controller watches", reserved=reserved,
                                       literal_dollar=literal_dollar)
        if messages:
            return (), "; ".join(m.removesuffix("; skipped").removesuffix("; no headers from it") for m in messages) \
                + "; its paths answer 503 until the ConfigMap is fixed"
        return headers, None

    def _response_headers(self, reference: str, *, namespace: str,
                          prefix: str) -> tuple[tuple[tuple[str, str], ...], str | None]:
        """custom-headers: its ConfigMap's headers, each allowed by the ConfigMap's global-allowed-response-headers."""
        # As ingress-nginx, a `$` in a value is sent as written, never expanded.
        headers, problem = self._configmap_headers(reference, annotation="custom-headers", namespace=namespace,
                                                   prefix=prefix, reserved=frozenset(), literal_dollar=True)
        refused = [name for name, _ in headers if name.lower() not in self._allowed_response_headers]
        if refused and not problem:
            problem = (f"annotation {prefix}/custom-headers: {', '.join(refused)} not allowed: the controller "
                       "ConfigMap's global-allowed-response-headers must list it; its paths answer 503 until then")
        return headers, problem

    def _check(self, namespace: str, name: str, secret_type: SecretType, *, digest_realm: str | None) -> _Checked:
        """The Secret's htpasswd file, or its htdigest file for `digest_realm` (digest authentication)."""
        key = (namespace, name, secret_type, digest_realm)
        if key not in self._checked:
            kind = "htpasswd" if digest_realm is None else "htdigest"
            reference = f"{namespace}/{name}/{secret_type}" + ("" if digest_realm is None else f"/{digest_realm}")
            user_file = f"{hashlib.sha256(reference.encode()).hexdigest()[:24]}.{kind}"
            content, problem = b"", None
            secret = self._secrets.get((namespace, name))
            if secret is None:
                problem = "was not found (pyngress reads Opaque Secrets in the namespaces it watches)"
            else:
                try:
                    content = (htpasswd_file(secret, secret_type) if digest_realm is None
                               else htdigest_file(secret, secret_type, digest_realm))
                except InvalidHtpasswd as err:
                    problem = str(err)
            self._checked[key] = _Checked(user_file, content, problem)
        return self._checked[key]

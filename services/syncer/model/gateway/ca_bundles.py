"""CA certificate references → the PEM bundle they name, for a Gateway's client-certificate validation
(client_validation.py) and a BackendTLSPolicy's (backend_tls_policies.py).

Core support, as both fields have it: a ConfigMap whose `ca.crt` holds PEM certificates that OpenSSL loads. A reference
to another kind, to a missing or unusable ConfigMap, or (where the field allows a namespace) to another namespace
without a ReferenceGrant is refused with the spec's reason; the bundle is made of the references that resolve, and
none resolving is the caller's to refuse (fail closed: nothing is served as if unverified).
"""
from __future__ import annotations

import functools
import ssl
from dataclasses import dataclass
from typing import Any, Mapping

from .reasons import Reason
from .reference_grants import ReferenceGrants


@dataclass(frozen=True)
class CaRefProblem:
    reason: Reason  # the reference's ResolvedRefs reason (a listener's, a BackendTLSPolicy's)
    message: str  # says which reference and what to change, ending with "(reason X)"


@dataclass(frozen=True)
class CaBundle:
    pem: str | None  # the certificates of the references that resolve; None: none does
    problems: tuple[CaRefProblem, ...]


def ca_bundle(refs: Any, *, namespace: str, where: str, config_maps: Mapping[tuple[str, str], Mapping[str, Any]],
              source: tuple[str, str] | None = None, grants: ReferenceGrants | None = None,
              kind_reason: Reason = Reason.INVALID_CA_CERTIFICATE_KIND) -> CaBundle:
    """The bundle of `refs` (caCertificateRefs of an object in `namespace`). `source` (group, kind) and `grants`: the
    referring object's, when its references may name another namespace (else a namespace is refused); `kind_reason`:
    the reason for a reference to another kind than ConfigMap."""
    pems: list[str] = []
    problems: list[CaRefProblem] = []
    for index, ref in enumerate(refs if isinstance(refs, list) else ()):
        at = f"{where} caCertificateRefs[{index}]"
        ref = ref if isinstance(ref, dict) else {}
        group, kind, name = ref.get("group") or "", ref.get("kind") or "", ref.get("name")
        if (group, kind) != ("", "ConfigMap"):
            problems.append(CaRefProblem(kind_reason, f"{at}: kind {kind or '(none)'} of group {group or 'core'!r} is "
                                         f"not supported; name a ConfigMap with ca.crt (reason {kind_reason})"))
            continue
        target_namespace = ref.get("namespace") or namespace
        if target_namespace != namespace and (source is None or grants is None or not grants.allows(
                source=(*source, namespace), target=("", "ConfigMap", target_namespace, str(name)))):
            problems.append(CaRefProblem(Reason.REF_NOT_PERMITTED, f"{at}: ConfigMap {target_namespace}/{name} is in "
                                         f"another namespace and no ReferenceGrant in {target_namespace} allows it "
                                         "(reason RefNotPermitted)"))
            continue
        pem, problem = _config_map_ca(config_maps.get((target_namespace, str(name))))
        if problem is not None:
            problems.append(CaRefProblem(Reason.INVALID_CA_CERTIFICATE_REF, f"{at}: ConfigMap "
                                         f"{target_namespace}/{name} {problem} (reason InvalidCACertificateRef)"))
            continue
        pems.append(pem)
    return CaBundle("".join(pems) or None, tuple(problems))


def _config_map_ca(config_map: Mapping[str, Any] | None) -> tuple[str, str | None]:
    """(its ca.crt, None), or ("", what makes it unusable)."""
    if config_map is None:
        return "", "is not found; create it with the CA certificates in ca.crt"
    data = config_map.get("data")
    pem = data.get("ca.crt") if isinstance(data, dict) else None
    if not isinstance(pem, str) or not pem.strip():
        return "", "has no ca.crt; add the CA certificates (PEM) there"
    if problem := _pem_problem(pem):
        return "", f"has a ca.crt that does not load as PEM certificates ({problem}); fix it"
    return pem if pem.endswith("\n") else pem + "\n", None


@functools.lru_cache(maxsize=4096)  # keyed by content: every build reads every policy's CA (0.7 ms a load)
def _pem_problem(pem: str) -> str | None:
    try:
        ssl.create_default_context(cadata=pem)
    except (ssl.SSLError, ValueError) as err:
        return str(err)
    return None

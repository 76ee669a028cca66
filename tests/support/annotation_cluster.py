"""A model cluster where one Ingress holds annotations under test beside a good one: the Secrets, ConfigMaps and
companion annotations that give each annotation its meaning (tests/integration/nginx/test_fuzz_isolation.py,
tests/unit/syncer/test_annotation_table.py)."""
from __future__ import annotations

import base64
import functools

from services.nginxconf.prefix import make_self_signed
from services.syncer.annotations import ANNOTATIONS
from tests.support.htpasswd import basic_auth_secret
from tests.support.model_cluster import Cluster

GOOD, FUZZED = "default/good", "default/fuzz"
GOOD_HOST, FUZZED_HOST = "good.example.com", "fuzz.example.com"


# Annotations that mean nothing without another one: the fuzzed Ingress gets it too (unless fuzzed itself).
_NEEDS = {**{name: {"enable-cors": "true"} for name in ANNOTATIONS if name.startswith("cors-")},
          **{name: {"limit-rpm": "60"} for name in ("limit-burst-multiplier", "limit-allowlist", "limit-whitelist")},
          **{name: {"auth-tls-secret": "default/ca"} for name in ANNOTATIONS
             if name.startswith("auth-tls-") and name != "auth-tls-secret"},
          "permanent-redirect-code": {"permanent-redirect": "https://new.example.com/"},
          "temporal-redirect-code": {"temporal-redirect": "https://new.example.com/"},
          **{name: {"mirror-target": "http://127.0.0.1:9/copy"} for name in ("mirror-host", "mirror-request-body")},
          **{name: {"proxy-ssl-secret": "ca", "backend-protocol": "HTTPS"} for name in ANNOTATIONS
             if name.startswith("proxy-ssl-")},
          "proxy-redirect-to": {"proxy-redirect-from": "http://backend.internal/"},
          **{name: {"backend-protocol": "FCGI"} for name in ("fastcgi-index", "fastcgi-params-configmap")},
          **{name: {"enable-modsecurity": "true"} for name in ("enable-owasp-core-rules", "modsecurity-transaction-id",
                                                               "modsecurity-snippet")},
          **{name: {"canary": "true"} for name in ANNOTATIONS if name.startswith("canary-")},
          **{name: {"enable-opentelemetry": "true"} for name in ("opentelemetry-trust-incoming-span",
                                                                 "opentelemetry-operation-name")},
          **{name: {"affinity": "cookie"} for name in ANNOTATIONS if name.startswith(("session-cookie-", "affinity-"))},
          **{name: {"auth-type": "basic", "auth-secret": "basic-auth"} for name in ANNOTATIONS
             if name in ("auth-type", "auth-secret", "auth-secret-type", "auth-realm")},
          "auth-cache-duration": {"auth-url": "http://127.0.0.1:9/check", "auth-cache-key": "$remote_user"},
          **{name: {"auth-url": "http://127.0.0.1:9/check"} for name in ANNOTATIONS
             if name.startswith("auth-") and not name.startswith("auth-tls-")
             and name not in ("auth-type", "auth-secret", "auth-secret-type", "auth-realm", "auth-url",
                              "auth-snippet", "auth-cache-duration")}}


def with_companions(annotations: dict[str, str]) -> dict[str, str]:
    companions = {k: v for name in annotations for k, v in _NEEDS.get(name, {}).items()}
    return {**companions, **annotations}


@functools.lru_cache(maxsize=1)
def _client_ca() -> str:
    """Secret data for auth-tls-secret "default/ca": a real CA certificate, so that its Ingresses are served."""
    pem = make_self_signed("/CN=fuzz client CA", ("ca.fuzz.example",)).decode()
    return base64.b64encode(pem[:pem.index("-----END CERTIFICATE-----") + 26].encode()).decode()


def cluster_with_good_ingress() -> Cluster:
    cluster = Cluster()
    cluster.ingress_class()
    cluster.tls_secret("ca", type="Opaque", data={"ca.crt": _client_ca()})
    # The oldest Ingress: conflicts are won by it, so only a bug can take its host away.
    cluster.app("good", host=GOOD_HOST, created=cluster.timestamp(0))
    # What auth-secret names, so that basic authentication is rendered (and refused or not) for real.
    cluster.add(basic_auth_secret("basic-auth", {"alice": "s3cret"}, scheme="sha"))
    # What auth-proxy-set-headers names.
    cluster.add(headers_configmap("auth-headers", {"X-Tenant": "team-a"}))
    # What fastcgi-params-configmap names.
    cluster.add(headers_configmap("fastcgi-params", {"SCRIPT_FILENAME": "$document_root$fastcgi_script_name"}))
    return cluster


def headers_configmap(name: str, data: dict[str, str]) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"}, "data": data}

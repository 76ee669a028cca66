"""ingress-nginx's configuration-injection advisories, each as the object field it came through and a payload
of its kind, for the tests that show pyngress refuses each one or keeps it inert (tests/integration/nginx/
test_cve_corpus.py against the model and `nginx -t`, tests/e2e/security/test_cve_corpus.py against a running
controller).

Every payload tries to make nginx serve what it must not: the file LEAK_FILE (a stand-in for the controller's
ServiceAccount token) through `alias`, `root`, `include` or Lua's io.open, or to load code (`ssl_engine`,
`*_by_lua`). The payloads are ours, written from the advisories' descriptions of the field and the trick
(a newline, a quote, a brace, a `#` comment, a `;`), not copied exploits.
"""
from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

LEAK_DIR = "/tmp/pyngress-cve-corpus"
LEAK_FILE = f"{LEAK_DIR}/token"
LEAK_CONTENT = "PYNGRESS-CORPUS-SECRET-7f3a"
# Directives that serve, read or load a file: none may name LEAK_DIR.
FILE_DIRECTIVES = ("alias", "root", "include", "ssl_engine", "load_module", "log_format", "access_log")

_ALIAS = f"location /leak {{ alias {LEAK_DIR}/; }}"
_LUA = f'content_by_lua_block {{ ngx.say(io.open("{LEAK_FILE}"):read("*a")) }}'
# Closing the block a value lands in and opening a location of the attacker's, in the usual spellings.
BREAKOUTS = (
    f";\n}}\n{_ALIAS}\nlocation /x {{",
    f'";\n}}\n{_ALIAS}\nlocation /x {{ #',
    f"' }} {_ALIAS} location /y {{ '",
    f"; {_LUA} #",
    f" # comment out the rest\n{_ALIAS}",
    f"\\\";{_LUA}",
)


@dataclass(frozen=True)
class Payload:
    advisory: str
    what: str  # the field, as the advisory names it
    annotations: dict[str, str] = field(default_factory=dict)
    path: str | None = None  # the Ingress path instead of "/"
    tls_host: str | None = None
    configmap: dict[str, str] = field(default_factory=dict)
    secret: dict[str, str] = field(default_factory=dict)  # an Opaque Secret "auth" in the tenant's namespace
    headers_configmap: dict[str, str] = field(default_factory=dict)  # a ConfigMap "headers" there

    def supporting_objects(self, namespace: str) -> list[dict[str, Any]]:
        """The Secret and ConfigMap the payload names, in the tenant's `namespace`, as manifests."""
        objects: list[dict[str, Any]] = []
        if self.secret:
            objects.append({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                            "metadata": {"name": "auth", "namespace": namespace},
                            "data": {k: base64.b64encode(v.encode()).decode() for k, v in self.secret.items()}})
        if self.headers_configmap:
            objects.append({"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": "headers", "namespace": namespace}, "data": self.headers_configmap})
        return objects

    @property
    def tls(self) -> list[dict[str, Any]] | None:
        return [{"hosts": [self.tls_host], "secretName": "corpus-tls"}] if self.tls_host else None

    @property
    def id(self) -> str:
        return f"{self.advisory}-{self.what}".replace(" ", "_").replace("/", "_")


def _annotation(name: str, value: str) -> dict[str, str]:
    return {f"nginx.ingress.kubernetes.io/{name}": value}


def _each_breakout(advisory: str, what: str, make) -> list[Payload]:
    return [Payload(advisory, f"{what} #{i}", **make(b)) for i, b in enumerate(BREAKOUTS)]


PAYLOADS: list[Payload] = [
    # Snippets: Lua reading the token (CVE-2021-25742), with and without the words a blocklist looks for.
    Payload("CVE-2021-25742", "configuration-snippet", _annotation("configuration-snippet", _LUA)),
    Payload("CVE-2021-25742", "server-snippet", _annotation("server-snippet", _ALIAS)),
    Payload("CVE-2021-25742", "auth-snippet", _annotation("auth-snippet", f"alias {LEAK_DIR}/;")),
    # The path field (CVE-2021-25745, CVE-2021-25748's newline, CVE-2022-4886's log_format, CVE-2026-24512).
    *[Payload(advisory, f"path #{i}", path=path) for i, (advisory, path) in enumerate([
        ("CVE-2021-25745", f"/x {{ alias {LEAK_DIR}/; }} location /y"),
        ("CVE-2021-25748", f"/x\n}}\n{_ALIAS}\nlocation /y {{"),
        ("CVE-2022-4886", f"/x/ {{ }} log_format leak '$remote_addr'; {_ALIAS} location /y"),
        ("CVE-2026-24512", f"/x;{_LUA}"),
        ("CVE-2026-24512", "/x#\n" + _ALIAS),
    ])],
    # Annotation values (CVE-2021-25746, CVE-2023-5043, CVE-2023-5044's permanent-redirect).
    *_each_breakout("CVE-2021-25746", "upstream-vhost", lambda b: {"annotations": _annotation("upstream-vhost", "a.b" + b)}),
    *_each_breakout("CVE-2021-25746", "proxy-read-timeout",
                    lambda b: {"annotations": _annotation("proxy-read-timeout", "5" + b)}),
    *_each_breakout("CVE-2023-5043", "cors-allow-origin",
                    lambda b: {"annotations": {**_annotation("enable-cors", "true"),
                                               **_annotation("cors-allow-origin", "https://a.example.com" + b)}}),
    *_each_breakout("CVE-2023-5044", "permanent-redirect",
                    lambda b: {"annotations": _annotation("permanent-redirect", "https://a.example.com/" + b)}),
    *_each_breakout("CVE-2023-5044", "temporal-redirect",
                    lambda b: {"annotations": _annotation("temporal-redirect", "https://a.example.com/$1" + b)}),
    # Access-control annotations (CVE-2025-1097's auth-tls-match-cn, CVE-2025-24514's auth-url, CVE-2026-1580's
    # auth-method, CVE-2025-24513's auth-secret path).
    *_each_breakout("CVE-2025-1097", "auth-tls-match-cn",
                    lambda b: {"annotations": {**_annotation("auth-tls-secret", "tenant/ca"),
                                               **_annotation("auth-tls-match-cn", "CN=a" + b)}}),
    *_each_breakout("CVE-2025-24514", "auth-url",
                    lambda b: {"annotations": _annotation("auth-url", "http://auth.example.com/verify" + b)}),
    *_each_breakout("CVE-2026-1580", "auth-method",
                    lambda b: {"annotations": {**_annotation("auth-url", "http://auth.example.com/verify"),
                                               **_annotation("auth-method", "GET" + b)}}),
    Payload("CVE-2025-24513", "auth-secret traversal",
            {**_annotation("auth-type", "basic"), **_annotation("auth-secret", "../../../../tmp/pyngress-cve-corpus")}),
    Payload("CVE-2025-24513", "auth-secret file", {**_annotation("auth-type", "basic"),
                                                   **_annotation("auth-secret", "auth")},
            secret={"auth": f"user:$apr1$x$y\n}}\n{_ALIAS}"}),
    # auth-type digest: the realm and the Secret's lines reach a Lua call's arguments and the file it reads.
    *_each_breakout("CVE-2025-24513", "digest auth-realm",
                    lambda b: {"annotations": {**_annotation("auth-type", "digest"),
                                               **_annotation("auth-secret", "auth"),
                                               **_annotation("auth-realm", "r" + b)},
                               "secret": {"auth": "user:r" + b + ":" + "a" * 32 + "\n"}}),
    Payload("CVE-2025-24513", "digest auth-secret file", {**_annotation("auth-type", "digest"),
                                                          **_annotation("auth-secret", "auth"),
                                                          **_annotation("auth-realm", "r")},
            secret={"auth": f"user:r:{'a' * 32}\n\")}}\n{_ALIAS}\n{_LUA}"}),
    # Mirror annotations (CVE-2025-1098).
    *_each_breakout("CVE-2025-1098", "mirror-target",
                    lambda b: {"annotations": _annotation("mirror-target", "http://mirror.example.com/$request_uri" + b)}),
    *_each_breakout("CVE-2025-1098", "mirror-host",
                    lambda b: {"annotations": {**_annotation("mirror-target", "http://mirror.example.com/"),
                                               **_annotation("mirror-host", "mirror.example.com" + b)}}),
    # CVE-2025-1974 made `nginx -t` load a shared object (ssl_engine) from a value; pyngress runs no admission
    # webhook, so the way in would be a value reaching nginx.conf.
    Payload("CVE-2025-1974", "ssl-ciphers", _annotation("ssl-ciphers", f"HIGH;\nssl_engine {LEAK_FILE};")),
    Payload("CVE-2025-1974", "auth-tls-secret", _annotation("auth-tls-secret", f"tenant/ca;\nssl_engine {LEAK_FILE};")),
    # auth-proxy-set-headers names a ConfigMap of headers (CVE-2025-15566).
    Payload("CVE-2025-15566", "auth-proxy-set-headers",
            {**_annotation("auth-url", "http://auth.example.com/verify"),
             **_annotation("auth-proxy-set-headers", "tenant/headers")},
            headers_configmap={"X-Leak": f'x";\n}}\n{_ALIAS}\nlocation /z {{ #'}),
    # rewrite-target (CVE-2026-3288), and the comment trick across two annotations (CVE-2026-4342): a `#`
    # in one value that would comment out the rest of a rendered line, a newline in the next.
    *_each_breakout("CVE-2026-3288", "rewrite-target",
                    lambda b: {"annotations": _annotation("rewrite-target", "/$1" + b)}),
    Payload("CVE-2026-4342", "comment across annotations",
            {**_annotation("proxy-read-timeout", "5 #"), **_annotation("proxy-send-timeout", f"5\n{_ALIAS}"),
             **_annotation("x-forwarded-prefix", f"/p #\n{_ALIAS}")}),
    # The TLS section's host and the ConfigMap: the same tricks through the other ways values arrive.
    Payload("CVE-2021-25746", "tls host", tls_host=f"corpus.tenant.example;\n{_ALIAS}"),
    Payload("CVE-2021-25746", "configmap ssl-ciphers", configmap={"ssl-ciphers": f"HIGH;\nssl_engine {LEAK_FILE};"}),
    Payload("CVE-2021-25746", "configmap log-format-upstream",
            configmap={"log-format-upstream": f"$remote_addr';\n{_ALIAS}\n#"}),
    Payload("CVE-2021-25746", "configmap proxy-read-timeout", configmap={"proxy-read-timeout": "5;\n" + _ALIAS}),
]

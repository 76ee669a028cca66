"""ModSecurity with the OWASP Core Rule Set (Debian's packages) through a real nginx, its profiles made from the
annotations a user writes: attacks answered 403 where the snippet says SecRuleEngine On, only logged (with the
transaction id) in detection-only mode, ordinary requests passed, and an Ingress without the WAF beside them
untouched.

The attacks are modelled on the CRS project's regression cases (coreruleset tests/regression/tests: 942100,
941100, 930100/930120, 932160, 913100, 920270), written here as our own requests."""
from __future__ import annotations

import secrets
from pathlib import Path
from urllib.parse import quote

import pytest

from services.nginxconf.modsecurity import AUDIT_LOG
from services.syncer.annotations import Risk, parse_annotations
from services.syncer.model.types import HostRoutes

from .conftest import eventually, route

PREFIX = "nginx.ingress.kubernetes.io"
BROWSER = {"User-Agent": "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0",
           "Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
           "Accept-Language": "en-GB,en;q=0.5"}
FORM = {"Content-Type": "application/x-www-form-urlencoded"}


def waf_profile(**annotations: str):
    parsed = parse_annotations({f"{PREFIX}/{name}": value for name, value in annotations.items()}, prefix=PREFIX,
                               max_risk=Risk.CRITICAL, allow_snippets=True)
    assert not parsed.warnings and parsed.denial is None
    return parsed.profile


# Enforcement: ingress-nginx's recommended rules included by the snippet, which turns the engine on.
ENFORCING = waf_profile(**{"enable-modsecurity": "true", "enable-owasp-core-rules": "true",
                           "modsecurity-transaction-id": "$req_id",
                           "modsecurity-snippet": "Include /etc/nginx/modsecurity/modsecurity.conf\n"
                                                  "SecRuleEngine On\n"})
# The defaults: recommended rules in detection-only mode, with the CRS.
DETECTING = waf_profile(**{"enable-modsecurity": "true", "enable-owasp-core-rules": "true",
                           "modsecurity-transaction-id": "$req_id"})

# (name, path, method, body, extra headers, the CRS rule that must see it)
ATTACKS = [
    ("sql injection", "/login", "POST", b"user=admin&pass=-1839' or '1'='1", FORM, "942100"),
    ("xss", "/search?q=" + quote("<script>alert(document.cookie)</script>"), "GET", None, {}, "941100"),
    ("path traversal", "/download?file=" + quote("../../../../etc/passwd"), "GET", None, {}, "930100"),
    ("command injection", "/ping?host=" + quote("127.0.0.1;cat /etc/passwd"), "GET", None, {}, "932160"),
    ("scanner user agent", "/", "GET", None, {"User-Agent": "Mozilla/5.0 zgrab/0.x"}, "913100"),
    ("protocol violation", "/?lang=en%00", "GET", None, {}, "920270"),
]

_BOUNDARY = "----pyngressFormBoundary7MA4YWxkTrZu0gW"
ORDINARY = [
    ("a page", "/products/42?ref=home", "GET", None, {}),
    ("a form post", "/contact", "POST", b"name=Alice+Smith&email=alice%40example.com&message=Hello%2C+see+you+at+3pm%21",
     FORM),
    ("a json api body", "/api/v1/orders", "POST",
     b'{"customer": {"name": "Alice", "tags": ["vip", "eu"]}, "items": [{"sku": "A-42", "qty": 2}], "note": "by noon"}',
     {"Content-Type": "application/json"}),
    ("a file upload", "/upload", "POST",
     (f"--{_BOUNDARY}\r\nContent-Disposition: form-data; name=\"title\"\r\n\r\nQuarterly report\r\n"
      f"--{_BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"report.csv\"\r\n"
      "Content-Type: text/csv\r\n\r\nregion,sales\r\nnorth,1200\r\nsouth,950\r\n"
      f"--{_BOUNDARY}--\r\n").encode(),
     {"Content-Type": f"multipart/form-data; boundary={_BOUNDARY}"}),
    ("a long query string", "/report?" + "&".join(f"field{i}=value{i}" for i in range(150)) + "&q=" + "a" * 2000,
     "GET", None, {}),
]


@pytest.fixture(scope="module")
def nginx(shared_nginx, echo):
    backend = echo("waf-app")
    shared_nginx.apply(shared_nginx.config(profiles=[ENFORCING, DETECTING]))
    shared_nginx.push({"waf.test": HostRoutes(prefix={"/": route("app", profile=ENFORCING.name)}),
                       "detect.test": HostRoutes(prefix={"/": route("app", profile=DETECTING.name)}),
                       "plain.test": HostRoutes(prefix={"/": route("app")})},
                      {"app": [backend.endpoint]})
    return shared_nginx


def _send(nginx, host: str, path: str, method: str, body: bytes | None, headers: dict[str, str],
          request_id: str | None = None):
    return nginx.get(path, host=host, method=method, body=body,
                     headers={**BROWSER, **headers, **({"X-Request-ID": request_id} if request_id else {})})


def _audit_log_after(offset: int) -> str:
    return Path(AUDIT_LOG).read_bytes()[offset:].decode(errors="replace")


def _audit_log_size() -> int:
    return Path(AUDIT_LOG).stat().st_size if Path(AUDIT_LOG).exists() else 0


@pytest.mark.parametrize("name, path, method, body, headers, rule", ATTACKS, ids=[a[0] for a in ATTACKS])
def test_an_attack_is_refused_where_the_snippet_turns_the_engine_on(nginx, name, path, method, body, headers, rule):
    request_id = secrets.token_hex(16)
    start = _audit_log_size()
    response = _send(nginx, "waf.test", path, method, body, headers, request_id)
    assert response.status == 403, (name, response.status, response.body[:200])
    entry = eventually(lambda: request_id in _audit_log_after(start) and _audit_log_after(start))
    assert f'[id "{rule}"]' in entry and "Access denied with code 403" in entry


@pytest.mark.parametrize("name, path, method, body, headers, rule", ATTACKS, ids=[a[0] for a in ATTACKS])
def test_an_attack_is_only_logged_in_detection_only_mode(nginx, name, path, method, body, headers, rule):
    request_id = secrets.token_hex(16)
    start = _audit_log_size()
    response = _send(nginx, "detect.test", path, method, body, headers, request_id)
    assert response.status == 200 and response.backend == "waf-app", (name, response.status)
    # Section A of the transaction's audit entry names it by modsecurity-transaction-id ($req_id: the X-Request-ID).
    entry = eventually(lambda: request_id in _audit_log_after(start) and _audit_log_after(start))
    assert f'[id "{rule}"]' in entry and f'[unique_id "{request_id}"]' in entry


@pytest.mark.parametrize("name, path, method, body, headers", ORDINARY, ids=[o[0] for o in ORDINARY])
def test_ordinary_requests_pass_without_a_false_positive(nginx, name, path, method, body, headers):
    request_id = secrets.token_hex(16)
    start = _audit_log_size()
    response = _send(nginx, "waf.test", path, method, body, headers, request_id)
    assert response.status == 200 and response.backend == "waf-app", (name, response.status, response.body[:200])
    assert response.json["body_length"] == len(body or b"")
    # Nothing the CRS or the recommended rules matched was logged for it (RelevantOnly audit logging).
    nginx.get("/", host="detect.test", headers=BROWSER)  # a later request flushes nothing of ours either
    assert request_id not in _audit_log_after(start)


@pytest.mark.parametrize("name, path, method, body, headers, rule", ATTACKS, ids=[a[0] for a in ATTACKS])
def test_an_ingress_without_the_waf_beside_one_with_it_is_untouched(nginx, name, path, method, body, headers, rule):
    response = _send(nginx, "plain.test", path, method, body, headers)
    assert response.status == 200 and response.backend == "waf-app"


def test_the_module_is_loaded_only_while_a_profile_uses_it(nginx):
    conf = nginx.paths.conf.read_text()
    assert "ngx_http_modsecurity_module.so" in conf
    assert conf.count("modsecurity on;") == 2  # the two WAF profiles' locations, nothing else

"""ModSecurity v3 in nginx.conf: Debian's connector module (libnginx-mod-http-modsecurity), its recommended
configuration and the OWASP Core Rule Set (modsecurity-crs), as ingress-nginx writes them.

The module is loaded only while something uses it: the ConfigMap's enable-modsecurity, or a profile whose
Ingress enables it (load_module is main-context, so the reload that brings the first such profile loads it).
ModSecurity runs only in the profiles' named locations, never in `location /` where the router runs: turning it
on or off for one Ingress changes that Ingress's profile and nothing else.

What is loaded, as ingress-nginx's buildModSecurityForLocation decides it:
- the *recommended* rules (ingress-nginx's /etc/nginx/modsecurity/modsecurity.conf): Debian's
  /etc/nginx/modsecurity.conf, which is ModSecurity's modsecurity.conf-recommended (SecRuleEngine DetectionOnly:
  attacks are logged, not blocked; request bodies inspected; audit log of relevant transactions), with the audit
  log at ingress-nginx's /var/log/modsec_audit.log (Serial: one file that nginx's root master opens and its
  workers append to). They are loaded unless a modsecurity-snippet replaces them (the ConfigMap's for the
  ConfigMap's setting, the Ingress's for its own); a snippet starts from SecRuleEngine DetectionOnly too, so it
  blocks only when it says `SecRuleEngine On`.
- the *OWASP CRS* (ingress-nginx's nginx-modsecurity.conf) with enable-owasp-core-rules or
  enable-owasp-modsecurity-crs: Debian's crs-setup.conf (anomaly scoring, paranoia level 1), its
  REQUEST-900 and RESPONSE-999 exclusion files and every rule file of /usr/share/modsecurity-crs/rules.
The ConfigMap's rules are loaded once at the http level; a profile's own rules are parsed per profile (each
distinct profile with the CRS holds its own copy of it in memory: BENCHMARKS.md).
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Sequence

from services.nginxconf.config import LocationProfile, ModSecurity, NginxConfig, ServerSettings
from services.nginxconf.modsecurity_rules import (OWASP_CRS_INCLUDE, RECOMMENDED_INCLUDE, RulesError, check_rules,
                                                  with_includes)

MODULE = "/usr/lib/nginx/modules/ngx_http_modsecurity_module.so"
AUDIT_LOG = "/var/log/modsec_audit.log"
RECOMMENDED_RULES = f"Include /etc/nginx/modsecurity.conf\nSecAuditLog {AUDIT_LOG}"
OWASP_CRS_RULES = "\n".join(f"Include {path}" for path in (
    "/etc/modsecurity/crs/crs-setup.conf", "/etc/modsecurity/crs/REQUEST-900-EXCLUSION-RULES-BEFORE-CRS.conf",
    "/usr/share/modsecurity-crs/rules/*.conf", "/etc/modsecurity/crs/RESPONSE-999-EXCLUSION-RULES-AFTER-CRS.conf"))
_INCLUDES = {RECOMMENDED_INCLUDE: RECOMMENDED_RULES, OWASP_CRS_INCLUDE: OWASP_CRS_RULES}
# What a snippet starts from: it blocks only when it says so.
_DETECTION_ONLY = "SecRuleEngine DetectionOnly"
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_LOG_FILE = re.compile(r"^[ \t]*Sec(?:Audit|Debug)Log[ \t]+[\"']?([^\"'\s]+)", re.IGNORECASE | re.MULTILINE)

# The nginx variables modsecurity-transaction-id may name: the request's id (nginx's, or ingress-nginx's $req_id,
# which is also what the backend gets as X-Request-ID and what the access log shows).
TRANSACTION_ID_VARIABLES = ("$request_id", "$req_id")


class ModSecurityRenderError(ValueError):
    """A ModSecurity setting that cannot be written into nginx.conf safely."""


def rules_argument(text: str) -> str:
    """`text` (ModSecurity rules) as one double-quoted nginx argument: its line ends as nginx's "\\n" escape, so
    that nginx.conf gets one line whatever the rules hold."""
    if bad := _CONTROL.search(text):
        raise ModSecurityRenderError(f"ModSecurity rules hold the control character {bad.group()!r}")
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    return f'"{escaped}"'


def _snippet_rules(snippet: str, *, inherited: bool = False) -> str:
    """A snippet's rules, its Includes replaced; unless it adds to `inherited` rules (the ConfigMap's, whose engine
    state stays theirs unless it sets its own), it starts from detection-only."""
    try:
        check_rules(snippet)
    except RulesError as err:
        raise ModSecurityRenderError(f"modsecurity-snippet: {err}") from None
    rules = with_includes(snippet, _INCLUDES)
    return rules if inherited else _DETECTION_ONLY + "\n" + rules


@dataclass(frozen=True)
class RenderedModSecurity:
    """What the template writes: the module, the ConfigMap's rules at the http level, each profile's lines."""
    module: bool
    http_rules: str | None  # a quoted modsecurity_rules argument
    locations: dict[str, list[str]]  # profile name → its directives, each a whole line


def _http_rules(server: ServerSettings) -> str | None:
    """The ConfigMap's rules (enable-modsecurity), loaded once for every location that turns ModSecurity on."""
    if not server.modsecurity:
        return None
    parts = [_snippet_rules(server.modsecurity_snippet) if server.modsecurity_snippet else RECOMMENDED_RULES]
    if server.owasp_modsecurity_crs:
        parts.append(OWASP_CRS_RULES)
    return "\n".join(parts)


def _enabled(waf: ModSecurity | None, everywhere: bool) -> bool:
    return everywhere if waf is None or waf.enabled is None else waf.enabled


@functools.lru_cache(maxsize=1024)
def _location_rules(waf: ModSecurity, *, everywhere: bool, everywhere_crs: bool) -> str | None:
    """The rules a profile loads itself, beside those it inherits from the http level (None: only those)."""
    parts = []
    if waf.snippet:
        parts.append(_snippet_rules(waf.snippet, inherited=everywhere))
    elif not everywhere:
        parts.append(RECOMMENDED_RULES)
    if waf.owasp_core_rules and not everywhere_crs:
        parts.append(OWASP_CRS_RULES)
    return "\n".join(parts) if parts else None


@functools.lru_cache(maxsize=1024)
def location_lines(waf: ModSecurity | None, *, everywhere: bool, everywhere_crs: bool) -> tuple[str, ...]:
    """A profile's directives: `everywhere` is the ConfigMap's enable-modsecurity, `everywhere_crs` its
    enable-owasp-modsecurity-crs (whose rules the http level holds already)."""
    if not _enabled(waf, everywhere):
        return ()
    lines = ["modsecurity on;"]
    if waf is None:
        return tuple(lines)
    if rules := _location_rules(waf, everywhere=everywhere, everywhere_crs=everywhere_crs):
        lines.append(f"modsecurity_rules {rules_argument(rules)};")
    if waf.transaction_id:
        if waf.transaction_id not in TRANSACTION_ID_VARIABLES:
            raise ModSecurityRenderError(f"modsecurity-transaction-id {waf.transaction_id!r} must be one of "
                                         f"{', '.join(TRANSACTION_ID_VARIABLES)}")
        lines.append(f'modsecurity_transaction_id "{waf.transaction_id}";')
    return tuple(lines)


def check_profile_modsecurity(waf: ModSecurity) -> None:
    """Raise ModSecurityRenderError when the profile's settings cannot be written (whatever the ConfigMap says)."""
    for everywhere in (False, True):
        location_lines(waf, everywhere=everywhere, everywhere_crs=False)


def rendered_modsecurity(server: ServerSettings, profiles: Sequence[LocationProfile]) -> RenderedModSecurity:
    locations = {profile.name: list(location_lines(profile.modsecurity, everywhere=server.modsecurity,
                                                   everywhere_crs=server.modsecurity and server.owasp_modsecurity_crs))
                 for profile in profiles}
    rules = _http_rules(server)
    return RenderedModSecurity(module=server.modsecurity or any(locations.values()),
                               http_rules=rules_argument(rules) if rules else None,
                               locations={name: lines for name, lines in locations.items() if lines})


def log_files(config: NginxConfig) -> set[str]:
    """The audit and debug logs the ModSecurity rules of `config` name (what nginx's master opens at each load)."""
    server = config.server
    texts = [_http_rules(server)] + [
        _location_rules(p.modsecurity, everywhere=server.modsecurity,
                        everywhere_crs=server.modsecurity and server.owasp_modsecurity_crs)
        for p in config.profiles if p.modsecurity and _enabled(p.modsecurity, server.modsecurity)]
    return {match[1] for text in texts if text for match in _LOG_FILE.finditer(text)}

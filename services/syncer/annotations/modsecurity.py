"""enable-modsecurity, enable-owasp-core-rules, modsecurity-transaction-id, modsecurity-snippet: ModSecurity with the
OWASP Core Rule Set on one Ingress, as ingress-nginx's modsecurity annotations (what is loaded:
services/nginxconf/modsecurity.py). They make the Ingress's location profile, so turning the WAF on or off for
one Ingress reloads nginx for that profile only.

As in ingress-nginx, the other three apply only where ModSecurity is on (this annotation, or the ConfigMap's
enable-modsecurity), and a modsecurity-snippet replaces the recommended rules. The snippet is raw ModSecurity
configuration, so it is a snippet annotation (allow-snippet-annotations, risk Critical); it must also stay a list
of ModSecurity directives (services/nginxconf/modsecurity_rules.py). These annotations control access: a value
outside its allow-list makes the Ingress's paths answer 503 with the reason, never served without its WAF.
"""
from __future__ import annotations

from typing import Mapping

from services.nginxconf.config import ModSecurity
from services.nginxconf.modsecurity import TRANSACTION_ID_VARIABLES
from services.nginxconf.modsecurity_rules import RulesError, check_rules

from .base import Annotation, IngressAnnotations, InvalidValue, Risk
from .validators import boolean, is_true, one_of


def _rules(value: str) -> str:
    try:
        return check_rules(value)
    except RulesError as err:
        raise InvalidValue(str(err)) from None


ANNOTATIONS = (
    Annotation("enable-modsecurity", validate=boolean, risk=Risk.LOW, default="false",
               doc="ModSecurity on this Ingress (\"true\") or not (\"false\", also when the ConfigMap enables it "
                   "everywhere); alone it loads ModSecurity's recommended rules in detection-only mode: attacks "
                   "are logged to /var/log/modsec_audit.log, not blocked.",
               differs="Debian's ModSecurity writes its audit log Serial to /var/log/modsec_audit.log "
                       "(ingress-nginx's, Concurrent files under /var/log/audit/), and requests no Ingress takes "
                       "(the default backend's 404) are not inspected."),
    Annotation("enable-owasp-core-rules", validate=boolean, risk=Risk.LOW, default="false",
               doc="Also load the OWASP Core Rule Set (Debian's modsecurity-crs, paranoia level 1, anomaly "
                   "scoring), with enable-modsecurity; it blocks only where SecRuleEngine is On."),
    Annotation("modsecurity-transaction-id", validate=one_of(*TRANSACTION_ID_VARIABLES), risk=Risk.HIGH,
               doc="The nginx variable that names each request's ModSecurity transaction (its unique id in the "
                   "audit log): $request_id or $req_id."),
    Annotation("modsecurity-snippet", validate=_rules, risk=Risk.CRITICAL,
               doc="ModSecurity directives for this Ingress, in place of the recommended rules (SecRuleEngine On "
                   "blocks; Include takes only ingress-nginx's two rule files); needs allow-snippet-annotations "
                   "and annotations-risk-level Critical; directives that read files, fetch rules or run "
                   "programs are refused (the Ingress's paths answer 503).",
               differs="Checked line by line: Include takes only ingress-nginx's two rule files, and directives or "
                       "operators that read files or run programs, SecAuditLogType Concurrent and audit logs outside"
                       " /var/log/ are refused (the paths answer 503)."),
)
_NAMES = tuple(annotation.name for annotation in ANNOTATIONS)


def apply(values: Mapping[str, str], parsed: IngressAnnotations) -> None:
    if not any(name in values for name in _NAMES):
        return
    enabled = values.get("enable-modsecurity")
    parsed.modsecurity = ModSecurity(
        enabled=None if enabled is None else is_true(enabled),
        owasp_core_rules=is_true(values.get("enable-owasp-core-rules", "false")),
        transaction_id=values.get("modsecurity-transaction-id"), snippet=values.get("modsecurity-snippet"))

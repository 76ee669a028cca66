"""The controller ConfigMap's ModSecurity keys: enable-modsecurity (ModSecurity in every Ingress's location that
does not set the annotation to "false"), enable-owasp-modsecurity-crs (the OWASP Core Rule Set with it) and
modsecurity-snippet (the administrator's ModSecurity directives in place of the recommended rules). What each
loads: services/nginxconf/modsecurity.py. The snippet is checked as the annotation's is
(services/nginxconf/modsecurity_rules.py); ModSecurity's own syntax is checked by `nginx -t`, and a snippet it
refuses is reported while the previous one keeps applying, as for the ConfigMap's other snippets
(configmap_snippets.NGINX_TESTED_KEYS).
"""
from __future__ import annotations

from typing import Any, Callable

from services.nginxconf.modsecurity_rules import RulesError, check_rules

from ..annotations.base import InvalidValue
from ..annotations.validators import boolean, is_true


def _flag(value: str) -> bool:
    return is_true(boolean(value))


def modsecurity_rules(value: str) -> str:
    try:
        return check_rules(value)
    except RulesError as err:
        raise InvalidValue(str(err)) from None


# ConfigMap key → (ServerSettings field, parser to its type).
MODSECURITY_KEYS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "enable-modsecurity": ("modsecurity", _flag),
    "enable-owasp-modsecurity-crs": ("owasp_modsecurity_crs", _flag),
    "modsecurity-snippet": ("modsecurity_snippet", modsecurity_rules),
}

# What each key does, for docs/configmap.md.
MODSECURITY_MEANING: dict[str, str] = {
    "enable-modsecurity": "ModSecurity (Debian's libnginx-mod-http-modsecurity) in every Ingress's location that does "
                          "not set the enable-modsecurity annotation to \"false\": ModSecurity's recommended rules "
                          "(Debian's /etc/nginx/modsecurity.conf, SecRuleEngine DetectionOnly: attacks are logged to "
                          "/var/log/modsec_audit.log, not blocked), unless modsecurity-snippet replaces them. The "
                          "module is loaded only while this or an Ingress enables it.",
    "enable-owasp-modsecurity-crs": "With enable-modsecurity: also the OWASP Core Rule Set (Debian's modsecurity-crs: "
                                    "crs-setup.conf, paranoia level 1, anomaly scoring); it blocks only where "
                                    "SecRuleEngine is On.",
    "modsecurity-snippet": "With enable-modsecurity: ModSecurity directives in place of the recommended rules, from "
                           "SecRuleEngine DetectionOnly (`SecRuleEngine On` blocks). Only ModSecurity's rule and "
                           "setting directives; `Include` takes only ingress-nginx's "
                           "/etc/nginx/modsecurity/modsecurity.conf and "
                           "/etc/nginx/owasp-modsecurity-crs/nginx-modsecurity.conf; logs only under /var/log/. "
                           "One that nginx -t refuses is reported and the previous value keeps applying.",
}

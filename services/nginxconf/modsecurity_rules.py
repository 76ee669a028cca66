"""Proof that a modsecurity-snippet (the annotation's or the ConfigMap's) stays a list of ModSecurity directives
that read, write and run nothing but the rules themselves.

ingress-nginx writes the snippet into `modsecurity_rules '...'` as it is: a quote in it ends the string and the
rest is nginx configuration, and its directives may Include any file, fetch rules over the network
(SecRemoteRules), run scripts (`exec`, @inspectFile) or read files (@pmFromFile, SecUnicodeMapFile). Here each
logical line (continuation lines joined, as ModSecurity reads them) must be a comment or a directive of
`DIRECTIVES`, and the template writes the whole text as one quoted nginx argument (modsecurity.py), so no line
can become nginx configuration. What is left is ModSecurity's own syntax, which `nginx -t` checks (a profile it
refuses rejects only its Ingresses).

The few files a snippet may still name: `Include` of ingress-nginx's two rule files (its users' snippets name
them; modsecurity.py puts Debian's same rules in their place), and the audit and debug logs, which nginx's root
master opens and appends request contents to: only files under /var/log/, never nginx's stdout or stderr (the
access log's pipe), nor a path outside the log directory a tenant could choose to grow or corrupt.
"""
from __future__ import annotations

import re

# A snippet is the administrator's few directives and exceptions; this bounds what one Ingress adds to nginx -t.
MAX_RULES = 16 * 1024

# ingress-nginx's rule files, as its documentation tells users to Include them.
RECOMMENDED_INCLUDE = "/etc/nginx/modsecurity/modsecurity.conf"  # ModSecurity's modsecurity.conf-recommended
OWASP_CRS_INCLUDE = "/etc/nginx/owasp-modsecurity-crs/nginx-modsecurity.conf"  # the OWASP Core Rule Set
KNOWN_INCLUDES = (RECOMMENDED_INCLUDE, OWASP_CRS_INCLUDE)

# ModSecurity v3 directives, lowercased (ModSecurity reads their names without case).
DIRECTIVES = frozenset(name.lower() for name in (
    "SecRule", "SecAction", "SecMarker", "SecDefaultAction", "SecRuleRemoveById", "SecRuleRemoveByMsg",
    "SecRuleRemoveByTag", "SecRuleUpdateActionById", "SecRuleUpdateTargetById", "SecRuleUpdateTargetByMsg",
    "SecRuleUpdateTargetByTag", "SecRuleEngine", "SecRequestBodyAccess", "SecResponseBodyAccess",
    "SecRequestBodyLimit", "SecRequestBodyNoFilesLimit", "SecRequestBodyLimitAction", "SecRequestBodyJsonDepthLimit",
    "SecResponseBodyLimit", "SecResponseBodyLimitAction", "SecResponseBodyMimeType", "SecResponseBodyMimeTypesClear",
    "SecArgumentsLimit", "SecArgumentSeparator", "SecCookieFormat", "SecPcreMatchLimit", "SecPcreMatchLimitRecursion",
    "SecCollectionTimeout", "SecComponentSignature", "SecWebAppId", "SecUploadFileLimit", "SecAuditEngine",
    "SecAuditLogParts", "SecAuditLogRelevantStatus", "SecAuditLogFormat", "SecAuditLogType", "SecAuditLog",
    "SecDebugLog", "SecDebugLogLevel", "Include"))
_LOG_FILES = frozenset({"secauditlog", "secdebuglog"})
_LOG_FILE = re.compile(r"/var/log/(?:[A-Za-z0-9_][A-Za-z0-9._-]*/)*[A-Za-z0-9_][A-Za-z0-9._-]*")
# Operators and actions that read files, query the network or run programs.
_FORBIDDEN = re.compile(r"@(?:inspectFile|pmFromFile|pmf|ipMatchFromFile|ipMatchF|fuzzyHash|rbl|geoLookup)\b"
                        r"|\bexec\s*:", re.IGNORECASE)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_DIRECTIVE = re.compile(r"([A-Za-z][A-Za-z0-9]*)(?:[ \t]+(.*))?", re.DOTALL)


class RulesError(ValueError):
    """A snippet that is not a plain list of ModSecurity directives; the message says what to change."""


def logical_lines(text: str) -> list[str]:
    """The directives of `text` as ModSecurity reads them: a line ending in a backslash continues on the next."""
    lines: list[str] = []
    pending = ""
    for line in text.split("\n"):
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        lines.append((pending + line).strip())
        pending = ""
    if pending:
        lines.append(pending.strip())
    return [line for line in lines if line and not line.startswith("#")]


def _unquoted(argument: str) -> str:
    if len(argument) >= 2 and argument[0] == argument[-1] and argument[0] in "\"'":
        return argument[1:-1]
    return argument


def check_rules(text: str) -> str:
    """`text` with its line ends made "\\n" when every directive is one ModSecurity may run from a snippet;
    RulesError naming the first that is not, and what to write instead."""
    if len(text) > MAX_RULES:
        raise RulesError(f"is {len(text)} characters long, more than {MAX_RULES}; shorten it")
    text = text.replace("\r\n", "\n")
    if bad := _CONTROL.search(text):
        raise RulesError(f"holds the control character {bad.group()!r}; remove it")
    for line in logical_lines(text):
        match = _DIRECTIVE.fullmatch(line)
        name = match[1].lower() if match else ""
        if name not in DIRECTIVES:
            raise RulesError(f"{line[:60]!r} is not a ModSecurity directive a snippet may use (SecRule, SecAction, "
                             "SecRuleEngine, SecRuleRemoveById, ... : nginx directives and directives that read "
                             "files or fetch rules are refused)")
        argument = _unquoted((match[2] or "").strip()) if match else ""
        if name == "include" and argument not in KNOWN_INCLUDES:
            raise RulesError(f"Include {argument!r}: a snippet may include only ingress-nginx's rule files "
                             f"{' and '.join(KNOWN_INCLUDES)}; write the rules themselves instead")
        if name in _LOG_FILES and not (_LOG_FILE.fullmatch(argument) and "/../" not in argument + "/"):
            raise RulesError(f"{match[1] if match else name} {argument!r}: nginx's master opens this log as root "
                             "and appends request contents to it, so it must be a file under /var/log/ (such as "
                             "/var/log/modsec_audit.log), never nginx's stdout or stderr")
        if name == "secauditlogtype" and argument.lower() != "serial":
            raise RulesError(f"SecAuditLogType {argument!r}: only Serial is taken (one file, opened by nginx's "
                             "master); Concurrent would need a directory nginx's workers may write to")
        if forbidden := _FORBIDDEN.search(line):
            raise RulesError(f"{forbidden.group()!r} reads files, queries the network or runs a program; remove it")
    return text


def with_includes(text: str, replacements: dict[str, str]) -> str:
    """`text` with each `Include` of a known file (KNOWN_INCLUDES) replaced by the rules that stand for it."""
    lines, continued = [], False
    for line in text.split("\n"):
        match = None if continued else _DIRECTIVE.fullmatch(line.strip())
        if match and match[1].lower() == "include":
            lines.append(replacements[_unquoted((match[2] or "").strip())])
        else:
            lines.append(line)
        continued = line.endswith("\\")
    return "\n".join(lines)

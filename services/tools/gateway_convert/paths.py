"""An Ingress path (with its host's use-regex and its rewrite-target) → an HTTPRoute path match and URL rewrite.

On a host where use-regex or rewrite-target is on, ingress-nginx and pyngress match every non-Exact path as a
case-insensitive regular expression from the start of the URI: that is the RegularExpression `(?i)(?:PATH).*`
(pyngress anchors RegularExpression paths at both ends). A rewrite-target without captures is a ReplaceFullPath.
A rewrite-target with captures maps only in the form the ingress-nginx docs teach, PATH `/app(/|$)(.*)` with
`/$2` (or `/other/$2`): that strips a prefix, a PathPrefix `/app` with ReplacePrefixMatch `/` (`/other`); the
PathPrefix is then matched with its letters' case. Any other capture has no Gateway API form (NotMappable).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

# The prefix-stripping form: a literal prefix, then "(/|$)(.*)"; the target keeps only the second group.
_STRIP_PREFIX = re.compile(r"(?P<prefix>/[^.^$*+?()\[\]{}|\\]*?)/?\(/\|\$\)\(\.\*\)")
_TARGET_KEEPS_REST = re.compile(r"(?P<base>/(?:[^$]*/)?)\$2")


class NotMappable(ValueError):
    """The path or its rewrite has no HTTPRoute form; the message says why, for the report."""


@dataclass(frozen=True)
class PathMapping:
    match: dict[str, Any]  # an HTTPRouteMatch's `path`
    rewrite: dict[str, Any] | None = None  # a URLRewrite filter's `path`, if any


def map_path(path: str, path_type: str, *, regex_host: bool, rewrite_target: str | None) -> PathMapping:
    """The match and rewrite of one Ingress path; raises NotMappable."""
    captures = rewrite_target is not None and "$" in rewrite_target
    full_rewrite = None if rewrite_target is None or captures else {"type": "ReplaceFullPath",
                                                                   "replaceFullPath": rewrite_target}
    if path_type == "Exact":
        if captures:
            # An Exact path is not a regular expression: every $N is empty, as pyngress (rewrite.lua) makes it.
            assert rewrite_target is not None
            empty_captures = re.sub(r"\$[0-9]", "", rewrite_target) or "/"
            full_rewrite = {"type": "ReplaceFullPath", "replaceFullPath": empty_captures}
        return PathMapping({"type": "Exact", "value": path}, full_rewrite)
    if not regex_host:
        return PathMapping({"type": "PathPrefix", "value": path})
    if not captures:
        return PathMapping({"type": "RegularExpression", "value": f"(?i)(?:{path}).*"}, full_rewrite)
    assert rewrite_target is not None
    strip = _STRIP_PREFIX.fullmatch(path)
    keep = _TARGET_KEEPS_REST.fullmatch(rewrite_target)
    if strip is None or keep is None:
        raise NotMappable(f"rewrite-target {rewrite_target} takes capture groups of path {path}: an HTTPRoute "
                          "rewrites a path prefix or the whole path only (the prefix form is path "
                          "/app(/|$)(.*) with rewrite-target /$2)")
    prefix = strip.group("prefix").rstrip("/") or "/"
    replacement = keep.group("base").rstrip("/") or "/"
    return PathMapping({"type": "PathPrefix", "value": prefix},
                       {"type": "ReplacePrefixMatch", "replacePrefixMatch": replacement})

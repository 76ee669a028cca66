"""fastcgi-index and fastcgi-params-configmap: FastCGI settings of an Ingress with backend-protocol FCGI.

fastcgi-index is nginx's fastcgi_index (a file name such as index.php). fastcgi-params-configmap names a
ConfigMap of the Ingress's namespace (NAME, or NAMESPACE/NAME where the ConfigMap's
allow-cross-namespace-resources allows it) whose entries are FastCGI parameters, read per Ingress when the
model is built (services/syncer/model/fastcgi_params.py). Without backend-protocol FCGI they have no effect
and are ignored with a warning.
"""
from __future__ import annotations

import re
from typing import Mapping

from .base import Annotation, IngressAnnotations, InvalidValue, Risk

# ingress-nginx's characters for an index file name (and a parameter's name).
_FILE_NAME = re.compile(r"[A-Za-z0-9._-]{1,255}")
_LABEL = r"[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?"
_CONFIGMAP = re.compile(rf"(?:{_LABEL}/)?{_LABEL}(?:\.{_LABEL})*")


def _file_name(value: str) -> str:
    if not _FILE_NAME.fullmatch(value.strip()):
        raise InvalidValue("must be a file name of letters, digits, '.', '_' and '-', such as index.php")
    return value.strip()


def _configmap(value: str) -> str:
    if not _CONFIGMAP.fullmatch(value.strip()):
        raise InvalidValue("must name a ConfigMap as NAME or NAMESPACE/NAME, in lower case (such as fastcgi-params)")
    return value.strip()


ANNOTATIONS = (
    Annotation("fastcgi-index", validate=_file_name, risk=Risk.MEDIUM, directive="fastcgi_index",
               doc="With backend-protocol FCGI: the file appended to a URI ending in / (fastcgi_index).",
               differs="Without backend-protocol: FCGI it is ignored with a warning (ingress-nginx writes it into a "
                       "proxy location, where it does nothing)."),
    Annotation("fastcgi-params-configmap", validate=_configmap, risk=Risk.MEDIUM,
               doc="With backend-protocol FCGI: a ConfigMap (NAME or NAMESPACE/NAME) whose entries are FastCGI "
                   "parameters; values may hold nginx's FastCGI variables such as $document_root.",
               differs="Values may hold only nginx's FastCGI variables (FASTCGI_VARIABLES in "
                       "services/nginxconf/render.py; ingress-nginx takes any), and a missing ConfigMap or another "
                       "variable makes the paths answer 503; without backend-protocol: FCGI it is ignored with a "
                       "warning."),
)


def apply(values: Mapping[str, str], parsed: IngressAnnotations) -> None:
    if parsed.backend_scheme != "fcgi":
        for name in ("fastcgi-index", "fastcgi-params-configmap"):
            if name in values:
                parsed.warn(name, "has no effect without backend-protocol: FCGI; ignored")
        parsed.directives = [d for d in parsed.directives if d.source != "fastcgi-index"]
        return
    parsed.fastcgi_params_configmap = values.get("fastcgi-params-configmap")

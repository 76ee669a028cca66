"""The controller ConfigMap's GeoIP2 keys, with ingress-nginx's names and defaults: use-geoip2 loads Debian's nginx
GeoIP2 module and the MaxMind databases of --maxmind-edition-ids found in --maxmind-mmdb-dir (the syncer looks for
the files: services/syncer/nginx_apply/geoip2_databases.py). geoip2-autoreload-in-minutes is checked and accepted:
the syncer serves a replaced database within seconds, after checking it, so the module's auto_reload, which would
read a file nobody checked, is not used.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from services.nginxconf.geoip2 import MODULE

from ..annotations.base import InvalidValue
from ..annotations.validators import boolean, integer, is_true


def use_geoip2(value: str) -> bool:
    wanted = is_true(boolean(value))
    if wanted and not Path(MODULE).is_file():
        raise InvalidValue("Debian's nginx GeoIP2 module is not installed on this node (apt-get install "
                           "libnginx-mod-http-geoip2)")
    return wanted


def autoreload_minutes(value: str) -> int:
    # At most a week: MaxMind publishes its databases twice a week.
    return int(integer(0, 7 * 24 * 60)(value))


# What each key does, for docs/configmap.md.
GEOIP2_MEANING: dict[str, str] = {
    "use-geoip2": "Load Debian's nginx GeoIP2 module with the MaxMind databases `<edition>.mmdb` of "
                  "--maxmind-edition-ids (default GeoLite2-City,GeoLite2-ASN) found in --maxmind-mmdb-dir (default "
                  "/etc/ingress-controller/geoip). Defines ingress-nginx's `$geoip2_*` variables (client: `$remote_addr` "
                  "after the real-ip rules) for log-format-upstream and snippets. A missing file is reported; a "
                  "replaced one is checked, copied and served within seconds (one reload); one cut short is "
                  "reported and the last good copy keeps serving.",
    "geoip2-autoreload-in-minutes": "How often ingress-nginx reloads the databases, in minutes (0 to 10080).",
}
# How those keys differ from ingress-nginx's (docs/configmap.md, `pyngress lint`).
GEOIP2_DIFFERS: dict[str, str] = {
    "use-geoip2": "pyngress downloads nothing (--maxmind-license-key is ignored): mount the .mmdb files at "
                  "--maxmind-mmdb-dir, or run MaxMind's geoipupdate as a sidecar writing there.",
    "geoip2-autoreload-in-minutes": "Accepted and has no effect: a replaced database file is checked and served "
                                    "within seconds (one reload).",
}

# ConfigMap key → (ControllerConfig field, parser to its type).
GEOIP2_KEYS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "use-geoip2": ("use_geoip2", use_geoip2),
    "geoip2-autoreload-in-minutes": ("geoip2_autoreload_minutes", autoreload_minutes),
}

"""GeoIP2 (ConfigMap use-geoip2): the MaxMind databases that Debian's nginx GeoIP2 module reads, and the
`$geoip2_*` variables each edition defines, under ingress-nginx's names so that log formats and snippets written
for it keep working.

pyngress downloads nothing: the databases are files `<edition>.mmdb` in --maxmind-mmdb-dir (ingress-nginx's
/etc/ingress-controller/geoip by default), put there by a volume or a sidecar such as geoipupdate. The syncer
finds them (services/syncer/nginx_apply/geoip2_databases.py); this module is the facts and the typed result.
"""
from __future__ import annotations

from dataclasses import dataclass

MODULE = "/usr/lib/nginx/modules/ngx_http_geoip2_module.so"
DEFAULT_DIRECTORY = "/etc/ingress-controller/geoip"
DEFAULT_EDITIONS = "GeoLite2-City,GeoLite2-ASN"  # ingress-nginx's --maxmind-edition-ids default

# (variable, what the module looks up: a path into the record, with default=... where ingress-nginx gives one).
_COUNTRY = (
    ("geoip2_country_code", "country iso_code"),
    ("geoip2_country_name", "country names en"),
    ("geoip2_country_geoname_id", "country geoname_id"),
    ("geoip2_continent_code", "continent code"),
    ("geoip2_continent_name", "continent names en"),
    ("geoip2_continent_geoname_id", "continent geoname_id"),
)
_CITY = (
    ("geoip2_city_country_code", "country iso_code"),
    ("geoip2_city_country_name", "country names en"),
    ("geoip2_city_country_geoname_id", "country geoname_id"),
    ("geoip2_city", "city names en"),
    ("geoip2_city_geoname_id", "city geoname_id"),
    ("geoip2_postal_code", "postal code"),
    ("geoip2_dma_code", "location metro_code"),
    ("geoip2_latitude", "location latitude"),
    ("geoip2_longitude", "location longitude"),
    ("geoip2_time_zone", "location time_zone"),
    ("geoip2_region_code", "subdivisions 0 iso_code"),
    ("geoip2_region_name", "subdivisions 0 names en"),
    ("geoip2_region_geoname_id", "subdivisions 0 geoname_id"),
    ("geoip2_subregion_code", "subdivisions 1 iso_code"),
    ("geoip2_subregion_name", "subdivisions 1 names en"),
    ("geoip2_subregion_geoname_id", "subdivisions 1 geoname_id"),
    ("geoip2_city_continent_code", "continent code"),
    ("geoip2_city_continent_name", "continent names en"),
)
_ASN = (
    ("geoip2_asn", "autonomous_system_number"),
    ("geoip2_org", "autonomous_system_organization"),
)
_ISP = (
    ("geoip2_isp", "isp"),
    ("geoip2_isp_org", "organization"),
    ("geoip2_asn", "default=0 autonomous_system_number"),
)
_CONNECTION_TYPE = (("geoip2_connection_type", "connection_type"),)
_ANONYMOUS_IP = (
    ("geoip2_is_anon", "is_anonymous"),
    ("geoip2_is_anonymous", "default=0 is_anonymous"),
    ("geoip2_is_anonymous_vpn", "default=0 is_anonymous_vpn"),
    ("geoip2_is_hosting_provider", "default=0 is_hosting_provider"),
    ("geoip2_is_public_proxy", "default=0 is_public_proxy"),
    ("geoip2_is_tor_exit_node", "default=0 is_tor_exit_node"),
)
# The editions ingress-nginx's --maxmind-edition-ids takes, and the variables each defines (GeoIP2-Domain: none,
# as in ingress-nginx).
EDITION_VARIABLES: dict[str, tuple[tuple[str, str], ...]] = {
    "GeoLite2-Country": _COUNTRY, "GeoIP2-Country": _COUNTRY,
    "GeoLite2-City": _CITY, "GeoIP2-City": _CITY,
    "GeoLite2-ASN": _ASN, "GeoIP2-ASN": _ASN,
    "GeoIP2-ISP": _ISP,
    "GeoIP2-Connection-Type": _CONNECTION_TYPE,
    "GeoIP2-Anonymous-IP": _ANONYMOUS_IP,
    "GeoIP2-Domain": (),
}
VARIABLES = frozenset(name for variables in EDITION_VARIABLES.values() for name, _ in variables)


def edition_ids(text: str) -> tuple[str, ...]:
    """--maxmind-edition-ids: editions separated by commas ("GeoLite2-City,GeoLite2-ASN"); ValueError names an
    unknown one."""
    editions = tuple(dict.fromkeys(word.strip() for word in text.split(",") if word.strip()))
    unknown = [edition for edition in editions if edition not in EDITION_VARIABLES]
    if unknown:
        raise ValueError(f"unknown MaxMind edition {', '.join(unknown)}; known: {', '.join(EDITION_VARIABLES)}")
    return editions


@dataclass(frozen=True, kw_only=True)
class Database:
    """One database nginx loads: `variables` as (name, lookup) pairs, those no database before it defines."""
    edition: str
    path: str
    # What changes when the file is replaced (its modification time, size and inode), written into nginx.conf so
    # that a new file makes a new configuration: nginx -t opens it, and the reload serves it.
    version: str
    variables: tuple[tuple[str, str], ...]


@dataclass(frozen=True, kw_only=True)
class GeoIP2:
    """ConfigMap use-geoip2, and the databases found for it."""
    enabled: bool = False
    databases: tuple[Database, ...] = ()
    # $geoip2_* variables log-format-upstream names that no loaded database defines: set empty, so that nginx
    # accepts the format (a snippet naming one still fails nginx -t, as it would in ingress-nginx).
    empty_variables: tuple[str, ...] = ()


def loaded(found: list[tuple[str, str, str]]) -> tuple[Database, ...]:
    """The databases for (edition, path, version) found, in order; a variable two editions define (the ASN in
    GeoIP2-ISP and GeoLite2-ASN) comes from the first, so that each has one definition."""
    defined: set[str] = set()
    databases = []
    for edition, path, version in found:
        variables = tuple((name, lookup) for name, lookup in EDITION_VARIABLES[edition] if name not in defined)
        defined.update(name for name, _ in variables)
        if variables:
            databases.append(Database(edition=edition, path=path, version=version, variables=variables))
    return tuple(databases)


def defined_variables(geoip2: GeoIP2) -> frozenset[str]:
    return frozenset(name for database in geoip2.databases for name, _ in database.variables)

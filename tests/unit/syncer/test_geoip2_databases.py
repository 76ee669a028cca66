"""use-geoip2's databases: which files nginx reads (copies of the last good ones), which $geoip2_* variables each
defines, and what is reported when a file is missing, cut short, or named by the log format without a database."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from services.common.settings import GeoIP2Settings, parse
from services.nginxconf.config import AccessLog, NginxConfig
from services.nginxconf.geoip2 import GeoIP2
from services.syncer.model.configmap import parse_controller_config
from services.syncer.nginx_apply.geoip2_databases import GeoIP2Databases
from tests.support import mmdb_writer as mmdb

CONFIG = NginxConfig(http_port=80, https_port=443, state_dir="/s", run_dir="/r", geoip2=GeoIP2(enabled=True))


def databases(tmp_path: Path, editions: str = "GeoLite2-City,GeoLite2-ASN") -> GeoIP2Databases:
    (tmp_path / "geoip").mkdir(exist_ok=True)
    return GeoIP2Databases(GeoIP2Settings(mmdb_dir=str(tmp_path / "geoip"), edition_ids=editions), tmp_path / "copies")


def turned_on(files: GeoIP2Databases) -> GeoIP2Databases:
    files.complete(CONFIG)  # a configuration with use-geoip2 on: from now on poll() reads the files
    return files


def write(tmp_path: Path, edition: str, country: str) -> Path:
    (tmp_path / "geoip").mkdir(exist_ok=True)
    return mmdb.write(tmp_path / "geoip" / f"{edition}.mmdb", {"127.0.0.0/8": mmdb.city(country)})


def test_a_missing_database_is_reported_with_how_to_provide_it(tmp_path):
    config, problems = databases(tmp_path).complete(CONFIG)
    assert config.geoip2.databases == ()
    assert [p.split(" not found: ")[0] for p in problems] == [str(tmp_path / "geoip" / "GeoLite2-City.mmdb"),
                                                              str(tmp_path / "geoip" / "GeoLite2-ASN.mmdb")]
    assert all("geoipupdate" in p for p in problems)


def test_nginx_reads_a_copy_with_the_editions_variables(tmp_path):
    source = write(tmp_path, "GeoLite2-City", "AU")
    config, problems = databases(tmp_path).complete(CONFIG)
    [database] = config.geoip2.databases
    assert Path(database.path).parent == tmp_path / "copies" and Path(database.path).read_bytes() == source.read_bytes()
    assert ("geoip2_city_country_code", "country iso_code") in database.variables
    assert [p for p in problems if "GeoLite2-City" in p] == []


def test_a_replaced_file_is_a_new_copy_and_the_one_before_is_kept(tmp_path):
    files = turned_on(databases(tmp_path, "GeoLite2-City"))
    paths = []
    for country in ("AU", "CN", "NZ"):
        write(tmp_path, "GeoLite2-City", country)
        assert files.poll()
        paths.append(files.complete(CONFIG)[0].geoip2.databases[0].path)
    assert len(set(paths)) == 3
    assert sorted(p.name for p in (tmp_path / "copies").iterdir()) == sorted(Path(p).name for p in paths[1:])
    assert not files.poll()  # nothing changed since


def test_a_file_cut_short_leaves_the_last_good_copy(tmp_path):
    files = turned_on(databases(tmp_path, "GeoLite2-City"))
    write(tmp_path, "GeoLite2-City", "AU")
    files.poll()
    good = files.complete(CONFIG)[0].geoip2.databases
    whole = mmdb.build({"127.0.0.0/8": mmdb.city("CN")})
    (tmp_path / "geoip" / "GeoLite2-City.mmdb").write_bytes(whole[:len(whole) // 2])
    assert files.poll()
    config, [problem] = files.complete(CONFIG)
    assert config.geoip2.databases == good
    assert "is not a MaxMind DB file" in problem and "the last good copy keeps serving" in problem


def test_a_variable_two_editions_define_comes_from_the_first(tmp_path):
    write(tmp_path, "GeoIP2-ISP", "AU")
    write(tmp_path, "GeoLite2-ASN", "AU")
    config, problems = databases(tmp_path, "GeoIP2-ISP,GeoLite2-ASN").complete(CONFIG)
    isp, asn = config.geoip2.databases
    assert ("geoip2_asn", "default=0 autonomous_system_number") in isp.variables
    assert asn.variables == (("geoip2_org", "autonomous_system_organization"),) and problems == []


@pytest.mark.parametrize("enabled,why", [(False, 'use-geoip2 is not "true"'),
                                         (True, "no database of --maxmind-edition-ids defines them")])
def test_logged_variables_no_database_defines_are_empty(tmp_path, enabled, why):
    write(tmp_path, "GeoLite2-City", "AU")
    logged = replace(CONFIG, geoip2=GeoIP2(enabled=enabled),
                     access_log=AccessLog(format="$remote_addr ${geoip2_city} $geoip2_org"),
                     server=replace(CONFIG.server, proxy_set_headers=(("X-Country", "$geoip2_city_country_code"),)))
    config, problems = databases(tmp_path, "GeoLite2-City").complete(logged)
    assert config.geoip2.empty_variables == (("geoip2_org",) if enabled else
                                             ("geoip2_city", "geoip2_city_country_code", "geoip2_org"))
    assert problems[-1].endswith(f"which are empty: {why}")
    assert bool(config.geoip2.databases) is enabled


def test_nothing_is_read_or_copied_while_use_geoip2_is_off(tmp_path):
    write(tmp_path, "GeoLite2-City", "AU")
    files = databases(tmp_path, "GeoLite2-City")
    off = replace(CONFIG, geoip2=GeoIP2())
    assert files.complete(off) == (off, []) and not files.poll() and not (tmp_path / "copies").exists()
    assert len(files.complete(CONFIG)[0].geoip2.databases) == 1


def test_an_unknown_edition_stops_the_start():
    with pytest.raises(SystemExit):
        parse(["--maxmind-edition-ids=GeoLite2-City,GeoLite2-Cty"])


def test_the_configmap_keys(tmp_path):
    config, problems = parse_controller_config({"use-geoip2": "true", "geoip2-autoreload-in-minutes": "5"}, "CM")
    assert config.use_geoip2 and problems == []
    _, [problem] = parse_controller_config({"use-geoip": "true"}, "CM")
    assert "discontinued the legacy GeoIP databases" in str(problem) and "use-geoip2" in str(problem)

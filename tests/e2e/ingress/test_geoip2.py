"""GeoIP2 (ConfigMap use-geoip2) through a running controller and real nginx with Debian's GeoIP2 module, against
a database this test writes in MaxMind DB format: the country in the access log (ingress-nginx's
$geoip2_city_country_code in log-format-upstream), a country denied the way ingress-nginx users do it (an
http-snippet map and a server-snippet `if`), and a replaced database served without a restart.

Clients connect from different loopback addresses (127.0.0.1, 127.0.0.66), so that each is its own $remote_addr.
"""
from __future__ import annotations

import http.client
import time
from pathlib import Path
from typing import Iterator

import pytest

from tests.e2e.ingress.scenarios import Stage
from tests.support import k8s
from tests.support import mmdb_writer as mmdb
from tests.support.controller import start_manifests_controller
from tests.support.net import wait_for

CONFIGMAP = "ingress/controller"
HOST = "geo.example.com"
HOME, VISITOR = "127.0.0.1", "127.0.0.66"
LOG_FORMAT = "$remote_addr country=$geoip2_city_country_code city=$geoip2_city asn=$geoip2_asn $status $request_uri"
DENY_MAP = "map $geoip2_city_country_code $blocked_country {\n    default 0;\n    CN 1;\n}"
DENY = "if ($blocked_country) {\n    return 403;\n}"


def configmap(**data: str) -> dict:
    namespace, name = CONFIGMAP.split("/")
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace}, "data": data}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    # nginx's master reads the syncer's copy of the database (in the state directory); no worker opens it.
    base = tmp_path_factory.mktemp("geoip2")
    (base / "geoip").mkdir()
    return base


@pytest.fixture(scope="module")
def stage(workdir: Path, echo) -> Iterator[Stage]:
    controller, cluster = start_manifests_controller(workdir / "controller", extra_args=[
        f"--configmap={CONFIGMAP}", f"--maxmind-mmdb-dir={workdir / 'geoip'}", "--maxmind-edition-ids=GeoLite2-City"])
    stage = Stage(controller, cluster, echo)
    cluster.apply(*stage.backend("GEO", "geo"), k8s.ingress("geo", [k8s.rule(HOST, ("/", "Prefix", "geo", 80))]))
    stage.expect(HOST, "/", "GEO")
    yield stage
    controller.stop()


def status_from(stage: Stage, client: str, path: str = "/", host: str = HOST) -> int:
    """The status of a request to the controller sent from the loopback address `client`."""
    connection = http.client.HTTPConnection("127.0.0.1", stage.controller.http_port, timeout=5,
                                            source_address=(client, 0))
    try:
        connection.request("GET", path, headers={"Host": host})
        return connection.getresponse().status
    finally:
        connection.close()


def database(workdir: Path, records: dict) -> None:
    mmdb.write(workdir / "geoip" / "GeoLite2-City.mmdb", records)


def logged(stage: Stage, log: Path, client: str, path: str) -> str:
    """The access log line of a request for `path` from `client`, sent again until one is in the log (just after a
    reload, an old worker may still take it and log it where the old configuration said)."""
    def line() -> str:
        status_from(stage, client, path)
        return next((entry for entry in (log.read_text() if log.exists() else "").splitlines()
                     if entry.endswith(f" {path}")), "")
    return wait_for(line, 15, what=f"the access log line of {path}")


def test_a_missing_database_is_reported_and_its_variables_log_empty(stage: Stage, workdir: Path) -> None:
    log = workdir / "access.log"
    stage.cluster.apply(configmap(**{"use-geoip2": "true", "log-format-upstream": LOG_FORMAT,
                                     "access-log-path": str(log), "access-log-params": ""}))
    wait_for(lambda: any("GeoLite2-City.mmdb not found" in p for p in stage.controller.problems()), 15,
             what="the missing database reported")
    assert any("geoipupdate" in p for p in stage.controller.problems())
    assert logged(stage, log, HOME, "/before-the-database").startswith(f"{HOME} country= city= asn= 200 ")
    assert b"geoip2_module" not in stage.controller.nginx_conf()  # no database: the module is not even loaded


def test_the_country_is_in_the_access_log(stage: Stage, workdir: Path) -> None:
    log = workdir / "access.log"
    database(workdir, {"127.0.0.0/8": mmdb.city("AU", "Sydney"), f"{VISITOR}/32": mmdb.city("CN", "Beijing")})
    stage.cluster.apply(configmap(**{"use-geoip2": "true", "log-format-upstream": LOG_FORMAT,
                                     "access-log-path": str(log), "access-log-params": "",
                                     "geoip2-autoreload-in-minutes": "60"}))
    wait_for(lambda: b"geoip2_module" in stage.controller.nginx_conf(), 15, what="the database loaded")

    wait_for(lambda: "country=AU" in logged(stage, log, HOME, f"/from-home-{time.monotonic()}"), 15,
             what="the database's countries logged")
    assert logged(stage, log, HOME, "/from-home").startswith(f"{HOME} country=AU city=Sydney asn= 200 ")
    assert logged(stage, log, VISITOR, "/from-visitor").startswith(f"{VISITOR} country=CN city=Beijing asn= 200 ")
    # GeoLite2-ASN is not among --maxmind-edition-ids here: $geoip2_asn is logged empty, and that is said.
    assert any("$geoip2_asn" in p and "which are empty" in p for p in stage.controller.problems())
    # geoip2-autoreload-in-minutes is taken (the syncer's watch serves a replaced file): nothing reported for it.
    assert not any("not found" in p or "autoreload" in p for p in stage.controller.problems())


def test_a_country_denied_by_snippets_and_a_replaced_database(stage: Stage, workdir: Path) -> None:
    database(workdir, {"127.0.0.0/8": mmdb.city("AU"), f"{VISITOR}/32": mmdb.city("CN")})
    stage.cluster.apply(configmap(**{"use-geoip2": "true", "http-snippet": DENY_MAP, "server-snippet": DENY}))
    wait_for(lambda: status_from(stage, VISITOR) == 403, 15, what="the denied country refused")
    assert status_from(stage, HOME) == 200
    assert stage.controller.get("/", HOST).status_code == 200  # requests' own client: 127.0.0.1
    reloads = stage.controller.settled_reloads()

    # A new database (written beside and renamed over, as geoipupdate does): the home address is now in CN.
    database(workdir, {"127.0.0.0/8": mmdb.city("CN"), f"{VISITOR}/32": mmdb.city("NZ")})
    wait_for(lambda: status_from(stage, HOME) == 403 and status_from(stage, VISITOR) == 200, 15,
             what="the replaced database served")
    wait_for(lambda: stage.controller.metric("nginx_ingress_controller_success") > reloads, 10,
             what="the reload counted")


def test_one_ingress_denies_a_country_with_a_configuration_snippet(stage: Stage, workdir: Path) -> None:
    guarded = "guarded.geo.example.com"
    database(workdir, {"127.0.0.0/8": mmdb.city("AU"), f"{VISITOR}/32": mmdb.city("CN")})
    stage.cluster.apply(configmap(**{"use-geoip2": "true", "http-snippet": DENY_MAP,
                                     "allow-snippet-annotations": "true", "annotations-risk-level": "Critical"}),
                        k8s.ingress("guarded", [k8s.rule(guarded, ("/", "Prefix", "geo", 80))],
                                    annotations={"nginx.ingress.kubernetes.io/configuration-snippet": DENY}))
    wait_for(lambda: status_from(stage, VISITOR, host=guarded) == 403 and status_from(stage, VISITOR) == 200, 15,
             what="the guarded Ingress denying the country, the other serving it")
    assert status_from(stage, HOME, host=guarded) == 200
    stage.cluster.delete(k8s.ingress("guarded"))


def test_a_file_cut_short_leaves_the_last_good_database_serving(stage: Stage, workdir: Path) -> None:
    database(workdir, {"127.0.0.0/8": mmdb.city("CN")})
    stage.cluster.apply(configmap(**{"use-geoip2": "true", "http-snippet": DENY_MAP, "server-snippet": DENY}))
    wait_for(lambda: status_from(stage, HOME) == 403 and status_from(stage, VISITOR) == 403, 15,
             what="the database loaded")
    good = mmdb.build({"127.0.0.0/8": mmdb.city("AU")})
    # Rewritten in place and cut short (a copy that failed half-way): nginx reads its own copy of the last good one.
    (workdir / "geoip" / "GeoLite2-City.mmdb").write_bytes(good[:len(good) // 2])
    wait_for(lambda: any("is not a MaxMind DB file" in p and "the last good copy keeps serving" in p
                         for p in stage.controller.problems()), 15, what="the broken file reported")
    assert status_from(stage, HOME) == 403 and status_from(stage, VISITOR) == 403
    (workdir / "geoip" / "GeoLite2-City.mmdb").write_bytes(good)
    wait_for(lambda: status_from(stage, HOME) == 200, 15, what="the whole file served")
    assert not any("MaxMind DB" in p for p in stage.controller.problems())

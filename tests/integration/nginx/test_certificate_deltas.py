"""The certificates table changes by deltas too: a certificate added, rotated or removed moves that certificate and the
hosts naming it, not every certificate (about 25 MB at 10,000 of them); what nginx serves by SNI follows, and a host
refused for naming a certificate nginx does not hold is served once that certificate comes."""
from __future__ import annotations

import json

import pytest

from services.nginxconf.prefix import FAKE_CERTIFICATE_CN as FAKE
from services.nginxconf.tables import TablePusher

from .conftest import eventually, trust

CERTIFICATES = 20


@pytest.fixture
def posts(monkeypatch) -> list[tuple[str, dict]]:
    """Every POST the pushers send to nginx: its path and body."""
    sent: list[tuple[str, dict]] = []
    real_post = TablePusher._post

    async def recorded(self, session, name, path, *, body, **kwargs):
        sent.append((path, json.loads(body)))
        return await real_post(self, session, name, path, body=body, **kwargs)
    monkeypatch.setattr(TablePusher, "_post", recorded)
    return sent


def served(nginx, sni: str) -> str | None:
    trust(nginx.paths.default_certificate)  # the fake certificate, for a host without one
    return nginx.get("/", https=True, sni=sni).peer_subject


def test_a_rotated_certificate_moves_alone_and_is_served(nginx_factory, echo, make_certificate, posts):
    nginx = nginx_factory()
    app = echo("app")
    pairs = {f"t/c{i}": make_certificate(f"c{i}.certs.test") for i in range(CERTIFICATES)}
    certificates = {"certs": dict(pairs), "hosts": {f"c{i}.certs.test": f"t/c{i}" for i in range(CERTIFICATES)},
                    "default": None}
    backends = {"app": [app.endpoint]}
    nginx.push({}, backends, certificates)
    assert [path for path, _ in posts] == ["/configuration/backends", "/configuration/certificates",
                                           "/configuration/routes"]
    del posts[:]

    # One certificate rotated (the model makes the table anew: new dicts, the kept pairs the same objects).
    rotated = make_certificate("rotated.certs.test", ("c7.certs.test",))
    certificates = {**certificates, "certs": {**pairs, "t/c7": rotated}, "hosts": dict(certificates["hosts"])}
    assert nginx.push({}, backends, certificates) == ["certificates"]
    [(path, body)] = posts
    assert path == "/configuration/certificates/delta"
    assert body["set"] == {"certs/t/c7": rotated} and body["delete"] == []
    eventually(lambda: served(nginx, "c7.certs.test") == "rotated.certs.test")
    assert served(nginx, "c3.certs.test") == "c3.certs.test"
    del posts[:]

    # A host and its certificate added, another removed with its certificate: those entries only.
    added = make_certificate("new.certs.test")
    certs = {**certificates["certs"], "t/new": added}
    del certs["t/c3"]
    hosts = {**certificates["hosts"], "new.certs.test": "t/new"}
    del hosts["c3.certs.test"]
    assert nginx.push({}, backends, {"certs": certs, "hosts": hosts, "default": None}) == ["certificates"]
    [(_, body)] = posts
    assert set(body["set"]) == {"certs/t/new", "hosts/new.certs.test"}
    assert body["delete"] == ["certs/t/c3", "hosts/c3.certs.test"]
    assert served(nginx, "new.certs.test") == "new.certs.test"
    assert served(nginx, "c3.certs.test") == FAKE
    assert served(nginx, "c5.certs.test") == "c5.certs.test"


def test_a_host_naming_a_missing_certificate_is_served_once_it_comes(nginx_factory, echo, make_certificate, posts):
    nginx = nginx_factory()
    app = echo("app")
    backends = {"app": [app.endpoint]}
    first = make_certificate("first.certs.test")
    nginx.push({}, backends, {"certs": {"t/first": first}, "hosts": {"first.certs.test": "t/first"}, "default": None})
    hosts = {"first.certs.test": "t/first", "late.certs.test": "t/late"}
    nginx.push({}, backends, {"certs": {"t/first": first}, "hosts": hosts, "default": "t/late"})
    assert set(nginx.pusher.refused["certificates"]) == {"hosts/late.certs.test", "default"}
    assert served(nginx, "late.certs.test") == FAKE

    late = make_certificate("late.certs.test")
    del posts[:]
    nginx.push({}, backends, {"certs": {"t/first": first, "t/late": late}, "hosts": hosts, "default": "t/late"})
    [(path, body)] = posts
    assert path == "/configuration/certificates/delta" and list(body["set"]) == ["certs/t/late"]
    assert nginx.pusher.refused["certificates"] == {}
    assert served(nginx, "late.certs.test") == "late.certs.test"
    assert served(nginx, "unknown.certs.test") == "late.certs.test"  # the default now

    # A certificate that goes while a host still names it: the host is refused again and falls back.
    nginx.push({}, backends, {"certs": {"t/first": first}, "hosts": hosts, "default": None})
    assert set(nginx.pusher.refused["certificates"]) == {"hosts/late.certs.test"}
    assert served(nginx, "late.certs.test") == FAKE and served(nginx, "first.certs.test") == "first.certs.test"


def test_a_master_killed_after_a_certificate_delta_starts_again_with_it(nginx_factory, echo, make_certificate):
    nginx = nginx_factory()
    app = echo("app")
    backends = {"app": [app.endpoint]}
    pairs = {f"t/c{i}": make_certificate(f"c{i}.certs.test") for i in range(5)}  # the delta: smaller than these
    hosts = {f"c{i}.certs.test": f"t/c{i}" for i in range(5)}
    nginx.push({}, backends, {"certs": pairs, "hosts": hosts, "default": None})
    late = make_certificate("late.certs.test")
    nginx.push({}, backends, {"certs": {**pairs, "t/late": late}, "hosts": {**hosts, "late.certs.test": "t/late"},
                              "default": None})
    assert len(nginx.paths.table_journal("certificates").read_bytes().splitlines()) == 1

    nginx.kill_master()
    nginx.start()
    eventually(lambda: served(nginx, "late.certs.test") == "late.certs.test")
    assert nginx.run(nginx.pusher.needs_push()) is False
    assert served(nginx, "c1.certs.test") == "c1.certs.test"

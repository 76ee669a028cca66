"""The certificates table is made again at every change of the model: from the Secrets that changed only (made whole,
it cost each change 45-90 ms at 10,000 certificates)."""
from __future__ import annotations

import base64

from services.syncer.model import tls

CERTIFICATES = 300


def secret(text: str) -> dict:
    encoded = base64.b64encode(text.encode()).decode()
    return {"data": {"tls.crt": encoded, "tls.key": encoded}}


def test_only_the_replaced_secrets_are_read_again(monkeypatch):
    secrets = {("ns", f"tls-{i}"): secret(f"certificate {i}") for i in range(CERTIFICATES)}
    hosts = {f"h{i}.example": f"ns/tls-{i}" for i in range(CERTIFICATES)}
    made = []
    real_pems = tls._pems
    monkeypatch.setattr(tls, "_pems", lambda crt, key: made.append(crt) or real_pems(crt, key))
    table = tls.CertificatesTable()
    first = table.whole(secrets, hosts, default_certificate=None)
    assert len(made) == CERTIFICATES

    del made[:]
    again, changed = table.step(secrets, hosts=hosts, before=hosts, looked=(), default_certificate=None)
    assert made == [] and again == first and changed == frozenset()

    secrets[("ns", "tls-7")] = secret("certificate 7, renewed")
    rotated, changed = table.step(secrets, hosts=hosts, before=hosts, looked=["h7.example"], default_certificate=None)
    assert len(made) == 1 and rotated["certs"]["ns/tls-7"]["cert"] == "certificate 7, renewed"
    assert rotated["certs"]["ns/tls-8"] is first["certs"]["ns/tls-8"] and changed == {"certs/ns/tls-7"}

    del made[:]
    secrets[("ns", "added")] = secret("added")
    more = {**hosts, "added.example": "ns/added"}
    added, changed = table.step(secrets, hosts=more, before=hosts, looked=["added.example"], default_certificate=None)
    assert set(added["certs"]) == set(first["certs"]) | {"ns/added"} and added["hosts"]["added.example"] == "ns/added"
    assert len(made) == 1 and changed == {"certs/ns/added", "hosts/added.example"}

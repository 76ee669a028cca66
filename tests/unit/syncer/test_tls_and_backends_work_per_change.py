"""One change costs the model's backends, TLS hosts and certificates table, and their push, the entries it touches:
counted (entries looked at, certificates made, entries read), not timed, at two sizes, the model equal to a whole
build after each change. Before, every change copied every backend, merged and sorted every TLS host, and made and
compared the certificates table from every TLS Secret: 35 ms a change at 100,000 Ingresses, a tenth of them with TLS
(BENCHMARKS.md, section Scale)."""
from __future__ import annotations

import base64
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from services.common.settings import Settings
from services.nginxconf.config import NginxConfig
from services.nginxconf.prefix import make_self_signed
from services.nginxconf.tables import certificates_delta
from services.syncer.model.build import build_model
from services.syncer.model.incremental import IncrementalModel
from services.syncer.model.types import Model, TableChanges
from services.syncer.nginx_apply.applier import NginxApplier
from services.syncer.observability.metrics import SyncerMetrics

PEM = make_self_signed("/CN=tls.example", ("*.tls.example",)).decode()
CERT_END = PEM.index("-----END CERTIFICATE-----") + len("-----END CERTIFICATE-----\n")
FALLBACK = "default/fallback-tls"  # --default-ssl-certificate


def tls_data(version: int) -> dict[str, str]:
    """A Secret's data, each version its own text (as each Secret holds its own certificate)."""
    return {"tls.crt": base64.b64encode(PEM[:CERT_END].encode()).decode(),
            "tls.key": base64.b64encode((PEM[CERT_END:] + "\n" * version).encode()).decode()}


def tls_app(cluster, name: str, version: int) -> None:
    host = f"{name}.tls.example"
    cluster.tls_secret(f"{name}-tls", data=tls_data(version))
    cluster.app(name, host=host, tls=[{"hosts": [host], "secretName": f"{name}-tls"}])


def counted(cluster, incremental: IncrementalModel, change) -> tuple[int, int, int, frozenset[str] | None]:
    """(backends looked at, TLS hosts looked at, certificates made, the certificates table's keys marked changed) by
    the update after `change` (which changes the store), the model checked against a whole build."""
    kept = incremental.kept
    before = kept.backends_looked_at, kept.tls_hosts_looked_at, kept.certificates.entries_made
    objects = dict(cluster.store)
    change()
    keys = {key for key in objects.keys() | cluster.store.keys() if objects.get(key) is not cluster.store.get(key)}
    model = incremental.update(cluster.store, keys)
    assert model == build_model(cluster.store, settings=cluster.settings)
    assert kept is incremental.kept  # followed, not built afresh
    return (kept.backends_looked_at - before[0], kept.tls_hosts_looked_at - before[1],
            kept.certificates.entries_made - before[2], model.changed.certificates)


@pytest.mark.parametrize("n", [40, 160])
def test_a_change_costs_the_entries_it_touches_whatever_the_number_of_ingresses(cluster, n):
    cluster.settings = cluster.settings.replace_flags(default_ssl_certificate=FALLBACK)
    cluster.tls_secret("fallback-tls", data=tls_data(0))
    for i in range(n):
        if i % 4 == 0:
            tls_app(cluster, f"app{i}", version=i)
        else:
            cluster.app(f"app{i}", host=f"app{i}.plain.example")
    incremental = IncrementalModel(cluster.settings)
    first = incremental.update(cluster.store, None)
    assert len(first.backends) == n and len(first.tls_secrets) == n // 4 and len(first.certificates["certs"]) == n // 4 + 1

    # A new Ingress without TLS: its backend and its host, no certificate.
    assert counted(cluster, incremental, lambda: cluster.app("new", host="new.plain.example")) == (1, 1, 0, set())
    # One more EndpointSlice of a Service: its backend, and the host of the Ingress merged again.
    assert counted(cluster, incremental, lambda: cluster.endpoint_slice("app1", addresses=("10.0.0.7",))) == (
        1, 1, 0, set())
    # A new Ingress with TLS and its Secret: its certificate made, its host and certificate marked.
    assert counted(cluster, incremental, lambda: tls_app(cluster, "fresh", version=1)) == (
        1, 1, 1, {"hosts/fresh.tls.example", "certs/default/fresh-tls"})
    # A Secret renewed: its Ingress merged again, its certificate made again.
    assert counted(cluster, incremental, lambda: cluster.tls_secret("app0-tls", data=tls_data(7))) == (
        1, 1, 1, {"certs/default/app0-tls"})
    # A TLS Ingress deleted: its host and its certificate go.
    assert counted(cluster, incremental, lambda: cluster.store.pop("Ingress/default/app4")) == (
        1, 1, 0, {"hosts/app4.tls.example", "certs/default/app4-tls"})
    # The default certificate's Secret renewed: no Ingress reads it; its certificate is made again.
    assert counted(cluster, incremental, lambda: cluster.tls_secret("fallback-tls", data=tls_data(1))) == (
        0, 0, 1, {"certs/default/fallback-tls"})


class ReadCounting(Mapping[str, Any]):
    """A mapping that counts the entries read from it (looked up or listed)."""

    def __init__(self, entries: dict[str, Any]) -> None:
        self.entries, self.reads = entries, 0

    def __getitem__(self, key: str) -> Any:
        self.reads += 1
        return self.entries[key]

    def __iter__(self) -> Iterator[str]:
        for key in self.entries:
            self.reads += 1
            yield key

    def __len__(self) -> int:
        return len(self.entries)


def certificates(n: int, renewed: int | None = None) -> dict[str, Any]:
    certs = {f"ns/c{i}": {"cert": f"cert {i}", "key": f"key {i}"} for i in range(n)}
    if renewed is not None:
        certs[f"ns/c{renewed}"] = {"cert": f"cert {renewed} renewed", "key": f"key {renewed}"}
    return {"certs": ReadCounting(certs), "hosts": ReadCounting({f"h{i}.example": f"ns/c{i}" for i in range(n)}),
            "default": None}


def reads(*tables: dict[str, Any]) -> int:
    return sum(table[part].reads for table in tables for part in ("certs", "hosts"))


@pytest.mark.parametrize("n", [100, 1000])
def test_a_certificate_renewed_is_compared_alone_before_the_push(tmp_path, n):
    last, new = certificates(n), certificates(n, renewed=7)
    assert certificates_delta(last, new, {"certs/ns/c7"}) == {"set": {"certs/ns/c7": new["certs"].entries["ns/c7"]},
                                                              "delete": []}
    assert reads(last, new) <= 4

    # The applier decides whether to push from the same keys.
    settings = Settings.from_flags(state_dir=str(tmp_path / "state"), run_dir=str(tmp_path / "run"))
    applier = NginxApplier(settings, SyncerMetrics(settings))
    config = NginxConfig(http_port=18080, https_port=18443, state_dir=str(tmp_path), run_dir=str(tmp_path))
    applier.tables = {"routes": {}, "backends": {}, "certificates": last}
    for table, keys, differs in ((certificates(n), frozenset({"certs/ns/c7"}), False),
                                 (new, frozenset({"certs/ns/c7"}), True)):
        for part in ("certs", "hosts"):
            last[part].reads = table[part].reads = 0
        model = Model(config=config, certificates=table, changed=TableChanges(frozenset(), frozenset(),
                                                                               certificates=keys))
        applier._unseen = model.changed
        tables, changed, _ = applier._tables(model)
        assert applier._differs(tables, changed) is differs and reads(last, table) <= 4

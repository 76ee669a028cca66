"""The model's backends, TLS hosts and certificates table, carried from one model to the next.

Made whole at each change, these cost a change O(N) at 100,000 Ingresses: a copy of every backend (about 3 ms), and
with 10,000 TLS hosts their merge, their sort and the certificates table's comparisons (about 20 ms). Kept here, each
is changed at the keys a change touched, and each model takes a snapshot of it (layered.py), since the syncer builds
the next model in a thread while the event loop reads the last one. A whole step (no changed keys: the first model,
one built afresh, build_model) makes them whole and hands the model plain dicts.
"""
from __future__ import annotations

from typing import Any, Mapping

from services.common.changed_keys import ChangedKeys

from .layered import Layered
from .tls import CertificatesTable

_ABSENT = object()


class KeptTables:
    """The tables of the last model built from this object, and the work each step did (counted, not timed)."""

    def __init__(self) -> None:
        self.backends: Layered[str, list[str]] = Layered()
        self.tls_hosts: Layered[str, str] = Layered()
        self.certificates = CertificatesTable()
        self._gateway_tls: Mapping[str, str] = {}  # the Gateway API part's TLS hosts the last step took
        self.backends_looked_at = 0  # backend entries looked at (all of them in a whole step)
        self.tls_hosts_looked_at = 0  # TLS host entries looked at (all of them in a whole step)

    def backends_of(self, routed: Mapping[str, list[str]], beside: Mapping[str, list[str]],
                    changed: ChangedKeys) -> Mapping[str, list[str]]:
        """The model's backends: the routes' (`routed`) with `beside` (those no route names) over them. `changed`:
        the keys at which they may differ from the last step's, `beside`'s among them (None: any key)."""
        if changed is None:
            whole = {**routed, **beside}
            self.backends = Layered(dict(whole))
            self.backends_looked_at += len(whole)
            return whole
        self.backends_looked_at += len(changed)
        self.backends = self.backends.changed(_entries(self.backends, changed, beside, routed))
        return self.backends

    def tls_of(self, secrets: Mapping[tuple[str, str], Mapping[str, Any]], *, ingress_tls: Mapping[str, str],
               gateway_tls: Mapping[str, str], touched: ChangedKeys,
               default_certificate: str | None) -> tuple[Mapping[str, str], dict[str, Any], ChangedKeys]:
        """(TLS host → its Secret, the certificates table, the keys of that table that changed: None when any may).

        A host's Ingress certificate comes before a Gateway listener's. `touched`: the hosts whose Ingress entries may
        have changed since the last step (None: any); the Gateway API part's are compared when it is not the last
        step's. A Secret replaced in the store re-merges the Ingresses that read it, which touches their hosts: those
        are where its certificate is looked at again (tls.py CertificatesTable)."""
        if touched is None:
            whole = {**gateway_tls, **ingress_tls}
            self.tls_hosts, self._gateway_tls = Layered(dict(whole)), gateway_tls
            self.tls_hosts_looked_at += len(whole)
            return whole, self.certificates.whole(secrets, whole, default_certificate=default_certificate), None
        looked = touched
        if gateway_tls is not self._gateway_tls:
            looked = looked | self._gateway_tls.keys() | gateway_tls.keys()
            self._gateway_tls = gateway_tls
        self.tls_hosts_looked_at += len(looked)
        before = self.tls_hosts
        entries = _entries(before, looked, ingress_tls, gateway_tls)
        self.tls_hosts = before.changed(entries)
        table, changed = self.certificates.step(secrets, hosts=self.tls_hosts, before=before, looked=looked,
                                                default_certificate=default_certificate)
        return self.tls_hosts, table, changed


def _entries(table: Layered[str, Any], keys: frozenset[str], first: Mapping[str, Any],
             then: Mapping[str, Any]) -> dict[str, Any]:
    """The entries of `keys` whose value (`first`'s, else `then`'s, else None: gone) is not `table`'s."""
    entries = {}
    for key in keys:
        value = first.get(key, _ABSENT)
        if value is _ABSENT:
            value = then.get(key)
        old = table.get(key)
        if old is not value and old != value:
            entries[key] = value
    return entries

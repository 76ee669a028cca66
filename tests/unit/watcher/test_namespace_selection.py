"""--watch-namespace-selector (the label selector, the store filter) and --disable-catch-all (filters.keep)."""
from __future__ import annotations

import asyncio
from typing import Any, Iterable

import pytest

from services.common import settings as settings_mod
from services.common.label_selector import LabelSelectorError, parse_label_selector
from services.common.settings import Settings
from services.watcher.filters import keep
from services.watcher.namespace_selection import NamespaceSelection


@pytest.mark.parametrize("selector,labels,matches", [
    ("team=web", {"team": "web"}, True),
    ("team==web", {"team": "shop"}, False),
    ("team!=web", {}, True),  # != also selects namespaces without the key
    ("team in (web, shop)", {"team": "shop"}, True),
    ("team notin (web,shop)", {"team": "shop"}, False),
    ("team notin (web,shop)", {}, True),
    ("team", {"team": ""}, True),
    ("!team", {"team": "web"}, False),
    ("team in (web),env!=test,example.com/tier", {"team": "web", "example.com/tier": "1"}, True),
    ("team in (web),env!=test", {"team": "web", "env": "test"}, False),
    ("team=", {"team": ""}, True),  # an empty value is a value
    ("", {}, True),
])
def test_label_selectors_match_as_the_api_server_does(selector, labels, matches):
    assert parse_label_selector(selector).matches(labels) is matches


@pytest.mark.parametrize("selector", ["team in ()", "team in (a b)", "=web", "team=web,", "a b"])
def test_a_bad_selector_is_refused(selector):
    with pytest.raises(LabelSelectorError):
        parse_label_selector(selector)


def test_the_flag_refuses_a_bad_selector_at_start(capsys):
    with pytest.raises(SystemExit):
        settings_mod.parse(["--watch-namespace-selector=team in web"])
    assert "is not a label requirement" in capsys.readouterr().err


class DictStore:
    """The store as subscribers see it."""

    def __init__(self) -> None:
        self.objects: dict[str, Any] = {}

    async def set_many(self, changes: Iterable[tuple[str, Any]]) -> None:
        for key, value in changes:
            if value is None:
                self.objects.pop(key, None)
            else:
                self.objects[key] = value


def namespace(name: str, **labels: str) -> dict[str, Any]:
    return {"kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def ingress(name: str, ns: str) -> tuple[str, dict[str, Any]]:
    return f"Ingress/{ns}/{name}", {"kind": "Ingress", "metadata": {"name": name, "namespace": ns}}


def test_ingresses_follow_their_namespace_labels_whatever_comes_first():
    store = DictStore()
    selection = NamespaceSelection(store, parse_label_selector("team=web"))
    write = lambda *changes: asyncio.run(selection.set_many(changes))  # noqa: E731
    service = ("Service/other/svc", {"kind": "Service"})
    write(ingress("a", "web"), ingress("b", "other"), service)
    assert set(store.objects) == {"Service/other/svc"}  # namespaces not known yet: held back
    write(("Namespace//web", namespace("web", team="web")), ("Namespace//other", namespace("other", team="x")))
    namespaces = {"Namespace//web", "Namespace//other"}  # published, with their labels
    assert set(store.objects) == {"Service/other/svc", "Ingress/web/a", *namespaces}
    write(("Namespace//other", namespace("other", team="web")))
    assert set(store.objects) == {"Service/other/svc", "Ingress/web/a", "Ingress/other/b", *namespaces}
    write(("Namespace//web", None))
    assert set(store.objects) == {"Service/other/svc", "Ingress/other/b", "Namespace//other"}
    write(("Ingress/other/b", None))
    write(("Namespace//other", namespace("other", team="x")), ("Namespace//other", namespace("other", team="web")))
    assert set(store.objects) == {"Service/other/svc", "Namespace//other"}  # a deleted Ingress does not come back


def test_disable_catch_all_drops_every_ingress_with_a_default_backend():
    settings = Settings.from_flags(disable_catch_all=True)
    backend = {"service": {"name": "s", "port": {"number": 80}}}
    catch_all = {"kind": "Ingress", "metadata": {"name": "a"}, "spec": {"defaultBackend": backend}}
    with_rules = {"kind": "Ingress", "metadata": {"name": "b"},
                  "spec": {"defaultBackend": backend, "rules": [{"host": "a.example.com"}]}}
    plain = {"kind": "Ingress", "metadata": {"name": "c"}, "spec": {"rules": [{"host": "a.example.com"}]}}
    assert [keep(i, settings) for i in (catch_all, with_rules, plain)] == [False, False, True]
    assert all(keep(i, Settings()) for i in (catch_all, with_rules, plain))


def test_namespaces_are_kept_only_for_the_selector():
    assert not keep(namespace("web"), Settings())
    assert keep(namespace("web"), Settings.from_flags(watch_namespace_selector="team=web"))


def test_in_a_manifests_directory_namespace_objects_carry_the_labels(manifests_with):
    m = manifests_with(Settings.from_flags(watch_namespace_selector="team=web"))
    m.write("a.yaml", """apiVersion: v1
kind: Namespace
metadata: {name: web, labels: {team: web}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: a, namespace: web}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: b, namespace: no-namespace-object}
""")
    published = m.apply()
    assert published is not None and "Namespace//web" in published
    store = DictStore()
    asyncio.run(NamespaceSelection(store, parse_label_selector("team=web")).set_many(published.items()))
    assert set(store.objects) == {"Ingress/web/a", "Namespace//web"}

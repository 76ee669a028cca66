"""KubeSource keeps the published store equal to the API's objects, through changes and through faults:
dropped watches, refused connections, 500s and bursts of 410 Gone; and publishes nothing when nothing
changed."""
from __future__ import annotations

import asyncio
import base64
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from services.common.settings import Settings
from services.common.kube import KubeConfigError, kube_configuration
from services.watcher.kube_source import KubeSource, WatchTarget, watch_targets

TLS = {"tls.crt": base64.b64encode(b"cert").decode(), "tls.key": base64.b64encode(b"key").decode()}


def ingress(name: str, host: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "annotations": {
                "kubectl.kubernetes.io/last-applied-configuration": "{}", "team": "web"}},
            "spec": {"ingressClassName": "nginx", "rules": [{"host": host, "http": {"paths": [
                {"path": "/", "pathType": "Prefix",
                 "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]}}


async def populate(h) -> None:
    """One of each kind, plus objects the filters leave out."""
    await h.call(h.networking.create_ingress_class, {"metadata": {"name": "nginx"},
                                                     "spec": {"controller": "k8s.io/ingress-nginx"}})
    await h.call(h.networking.create_namespaced_ingress, "default", ingress("web", "web.example"))
    await h.call(h.core.create_namespaced_service, "default", {"metadata": {"name": "web"},
                                                               "spec": {"ports": [{"port": 80}]}})
    await h.call(h.discovery.create_namespaced_endpoint_slice, "default", {
        "metadata": {"name": "web-1", "labels": {"kubernetes.io/service-name": "web"}}, "addressType": "IPv4",
        "endpoints": [{"addresses": ["10.1.0.5"]}], "ports": [{"port": 8080}]})
    await h.call(h.core.create_namespaced_secret, "default", {"metadata": {"name": "web-tls"},
                                                              "type": "kubernetes.io/tls", "data": TLS})
    # A Secret of a type an ingress controller never reads (Opaque ones are kept: auth-secret names them).
    await h.call(h.core.create_namespaced_secret, "default", {"metadata": {"name": "release"},
                                                              "type": "helm.sh/release.v1", "data": {}})
    await h.call(h.core.create_namespaced_config_map, "default", {"metadata": {"name": "pyngress"},
                                                                  "data": {"ssl-redirect": "false"}})
    await h.call(h.core.create_namespaced_config_map, "default", {"metadata": {"name": "unrelated"}})
    await h.call(h.core.create_namespaced_config_map, "kube-system", {"metadata": {"name": "elsewhere"}})
    await h.call(h.core.create_node, {"metadata": {"name": "node-a"}, "spec": {"podCIDR": "10.244.1.0/24"}})
    await h.call(h.core.create_node, {"metadata": {"name": "node-b"}, "spec": {"podCIDR": "10.244.2.0/24"}})


def test_initial_lists_fill_the_store_with_kept_objects_as_the_api_serves_them(harness):
    async def scenario():
        h = harness()
        await populate(h)
        async with h:
            await h.converged()
            await asyncio.wait_for(h.source.synced.wait(), 10)
            store = h.mirror
            # Every ConfigMap of a watched namespace is kept: add-headers, proxy-set-headers and
            # auth-proxy-set-headers name them.
            assert set(store) == {"IngressClass//nginx", "Ingress/default/web", "Service/default/web",
                                  "EndpointSlice/default/web-1", "Secret/default/web-tls",
                                  "ConfigMap/default/pyngress", "ConfigMap/default/unrelated",
                                  "ConfigMap/kube-system/elsewhere", "Node//node-a"}
            web = store["Ingress/default/web"]
            assert web["kind"] == "Ingress" and web["apiVersion"] == "networking.k8s.io/v1"  # added to list items
            assert web["metadata"]["annotations"] == {"team": "web"}  # slimmed: no last-applied copy
            assert "managedFields" not in web["metadata"]
            assert web["metadata"]["uid"] and web["metadata"]["resourceVersion"]
            assert store["Node//node-a"]["spec"]["podCIDR"] == "10.244.1.0/24"
            last_event, last_sync = h.source.freshness()
            assert last_sync is not None
    asyncio.run(scenario())


def test_creates_updates_and_deletes_are_followed_across_watch_timeouts(harness):
    async def scenario():
        async with harness(watch_timeout=1) as h:
            await h.converged()
            await h.call(h.networking.create_namespaced_ingress, "default", ingress("a", "a.example"))
            await h.until(lambda: "Ingress/default/a" in h.mirror, "the new Ingress")
            await asyncio.sleep(1.5)  # let the watches time out and be re-opened from their resourceVersion
            await h.call(h.networking.patch_namespaced_ingress, "a", "default",
                         {"spec": {"rules": [{"host": "b.example"}]}})
            await h.until(lambda: h.mirror["Ingress/default/a"]["spec"]["rules"][0]["host"] == "b.example",
                          "the changed host")
            await h.call(h.core.create_namespaced_secret, "default", {"metadata": {"name": "t"},
                                                                      "type": "kubernetes.io/tls", "data": TLS})
            await h.call(h.networking.delete_namespaced_ingress, "a", "default")
            await h.until(lambda: "Ingress/default/a" not in h.mirror, "the Ingress to go")
            await h.converged()
            assert h.source.last_event is not None
    asyncio.run(scenario())


def test_status_changes_reach_the_store_too(harness):
    async def scenario():
        async with harness() as h:
            await h.call(h.networking.create_namespaced_ingress, "default", ingress("a", "a.example"))
            await h.call(h.networking.patch_namespaced_ingress_status, "a", "default",
                         {"status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}]}}})
            await h.converged()
            assert h.mirror["Ingress/default/a"]["status"]["loadBalancer"]["ingress"] == [{"ip": "192.0.2.1"}]
    asyncio.run(scenario())


def test_watch_namespace_limits_namespaced_kinds_but_not_objects_named_by_flags(api, settings, harness):
    settings = settings.replace_flags(watch_namespace="team", default_ssl_certificate="certs/default")
    assert WatchTarget("Secret", namespace="certs") in watch_targets(settings)
    backend = watch_targets(settings.replace_flags(default_backend_service="system/fallback"))
    assert {WatchTarget("Service", namespace="system"), WatchTarget("EndpointSlice", namespace="system")} <= set(backend)

    async def scenario():
        h = harness(settings=settings)
        for namespace in ("team", "certs"):
            await h.call(h.core.create_namespace, {"metadata": {"name": namespace}})
        for namespace in ("team", "default"):
            await h.call(h.networking.create_namespaced_ingress, namespace, ingress("web", "web.example"))
        await h.call(h.core.create_namespaced_secret, "certs", {"metadata": {"name": "default"},
                                                                "type": "kubernetes.io/tls", "data": TLS})
        await h.call(h.core.create_namespaced_config_map, "default", {"metadata": {"name": "pyngress"}})
        async with h:
            await h.converged()
            assert {"Ingress/team/web", "Secret/certs/default", "ConfigMap/default/pyngress"} <= set(h.mirror)
            assert "Ingress/default/web" not in h.mirror
    asyncio.run(scenario())


def test_without_node_name_nodes_are_not_watched(settings):
    assert all(t.kind != "Node" for t in watch_targets(settings.replace_flags(node_name=None)))
    # ConfigMaps are watched where Ingresses are (auth-proxy-set-headers names them).
    assert [t.namespace for t in watch_targets(Settings()) if t.kind == "ConfigMap"] == [None]


def test_dropped_watches_resume_from_their_resource_version_without_loss_or_duplicates(api, harness):
    async def scenario():
        h = harness()
        await populate(h)
        async with h:
            await h.converged()
            await h.watching()
            relists = h.source.relist_count
            before = h.publisher.seq
            for round_ in range(3):
                api.drop_watches()
                await h.call(h.core.patch_namespaced_service, "web", "default",
                             {"metadata": {"labels": {"round": str(round_)}}})
                await h.converged()
            assert h.publisher.seq - before == 3  # one update per change, nothing republished
            assert h.source.relist_count == relists  # resumed, not relisted
    asyncio.run(scenario())


def test_refused_connections_are_retried_with_backoff_and_nothing_is_republished(api, harness):
    async def scenario():
        h = harness(backoff_cap=2.0)
        await populate(h)
        async with h:
            await h.converged()
            await h.watching()
            before = h.publisher.seq
            api.refuse_connections(3.0)
            await h.until(lambda: not api.refusing, "the API server to listen again")
            await h.call(h.networking.create_namespaced_ingress, "default", ingress("after", "after.example"))
            await h.converged()
            await h.watching()
            assert h.publisher.seq - before == 1
            assert h.source.reconnect_count > 0
            assert h.source.errors == []  # recovered
    asyncio.run(scenario())


def test_internal_errors_are_retried(api, harness):
    async def scenario():
        h = harness(backoff_cap=1.0)
        await populate(h)
        api.fail_next_requests(12)  # the first lists fail
        async with h:
            await h.converged()
            await h.watching()
            cut = h.source.reconnect_count + len(h.source.targets)
            api.fail_next_requests(5)
            api.drop_watches()  # the re-watches fail too, then succeed
            await h.until(lambda: h.source.reconnect_count >= cut, "every watch to notice the cut")
            await h.watching()  # every target made a request since: the 5 failures are used up
            await h.call(h.core.delete_namespaced_secret, "web-tls", "default")
            await h.converged()
    asyncio.run(scenario())


def test_a_burst_of_410s_relists_and_publishes_exactly_the_difference(api, harness):
    async def scenario():
        h = harness(backoff_cap=1.0)
        await populate(h)
        async with h:
            await h.converged()
            await h.watching()
            relists = h.source.relist_count
            for round_ in range(5):
                await h.call(h.networking.create_namespaced_ingress, "default",
                             ingress(f"burst-{round_}", f"{round_}.example"))
                await h.call(h.core.patch_namespaced_config_map, "pyngress", "default",
                             {"data": {"round": str(round_)}})
                if round_:
                    await h.call(h.networking.delete_namespaced_ingress, f"burst-{round_ - 1}", "default")
                if round_ % 2:
                    api.expire_history(end_watches=True)  # open watches end with a 410 ERROR event
                else:
                    api.expire_history()  # watches resuming after the cut get 410 instead
                    api.drop_watches()
            await h.converged()
            assert h.source.relist_count > relists

            # Nothing changes now: more 410s and relists must publish nothing.
            await h.watching()
            quiet_from, relists = h.publisher.seq, h.source.relist_count
            for _ in range(3):
                opened = api.watches_opened
                api.expire_history(end_watches=True)
                await h.until(lambda: h.source.relist_count >= relists + len(h.source.targets), "the relists")
                # A target that lists again only after the next expiry has nothing to resume: wait for
                # every target's new watch before expiring again.
                await h.until(lambda: api.watches_opened >= opened + len(h.source.targets), "the new watches")
                relists = h.source.relist_count
            await h.call(h.networking.create_namespaced_ingress, "default", ingress("sentinel", "s.example"))
            await h.until(lambda: "Ingress/default/sentinel" in h.mirror, "the sentinel Ingress")
            assert h.publisher.seq - quiet_from == 1  # only the sentinel
            await h.converged()
    asyncio.run(scenario())


def test_bookmarks_count_as_activity(api, harness):
    async def scenario():
        async with harness() as h:
            await h.converged()
            await h.watching()
            _, synced_at = h.source.freshness()
            await h.until(lambda: h.source.freshness()[1] > synced_at, "a bookmark")
            assert h.source.last_event is None  # nothing changed: only bookmarks
    asyncio.run(scenario())


def test_no_reachable_configuration_is_a_clear_error(run_dir):
    for settings in (Settings.from_flags(kubeconfig=str(run_dir / "missing")), Settings()):
        with pytest.raises(KubeConfigError, match="--kubeconfig"):
            kube_configuration(settings)


class _CountingSource(KubeSource):
    """A KubeSource that counts its list requests, by kind."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.list_requests: Counter[str] = Counter()

    def _read_list(self, target: WatchTarget, *, token: str | None, limit: int | None) -> dict[str, Any]:
        self.list_requests[target.kind] += 1
        return super()._read_list(target, token=token, limit=limit)


def test_a_first_list_of_many_small_objects_takes_few_requests(api, settings, harness):
    """EndpointSlices (Ingresses, Services) are small: 1,200 come in one page, not three of client-go's 500 (a first
    list of 100,000 in 20 requests, not 200); Secrets, often large, keep pages of 500."""
    async def scenario():
        h = harness()
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(lambda i: h.discovery.create_namespaced_endpoint_slice("default", {
                "metadata": {"name": f"s{i}", "labels": {"kubernetes.io/service-name": f"s{i}"}},
                "addressType": "IPv4", "endpoints": [{"addresses": ["10.0.0.1"]}]}), range(1200)))
            list(pool.map(lambda i: h.core.create_namespaced_secret("default", {
                "metadata": {"name": f"tls{i}"}, "type": "kubernetes.io/tls", "data": TLS}), range(600)))
        h.source = _CountingSource(settings)
        async with h:
            await asyncio.wait_for(h.source.synced.wait(), 30)
            await h.converged()
        assert sum(1 for key in h.mirror if key.startswith("EndpointSlice/")) == 1200
        assert h.source.list_requests["EndpointSlice"] == 1
        assert h.source.list_requests["Secret"] == 2
    asyncio.run(scenario())

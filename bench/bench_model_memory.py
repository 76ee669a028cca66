"""Memory of the syncer's and the webhook's copies of the store at N Ingresses: RSS of this process, step by step.

The objects are bench_scale.py's (each Ingress with its Service and EndpointSlice, every 10th with TLS and a certificate
of its own), stored by the Kubernetes API test server (uid, resourceVersion, a Service's defaults) and slimmed as the
watcher slims them, ordered by kind as the watcher publishes them. `syncer`: they come as the syncer gets them (packed,
in snapshot parts, assembled), then the incremental model, then the applier's JSON of the routes and the pusher's
copy. `webhook`: the admission reviewer indexes them. The objects are made by a child process, which hands over the
snapshot's messages: this one holds only what a subscriber holds. `--root DIR` measures the code of another checkout
(a worktree of the baseline revision) with this script.
Run: .venv/bin/python bench/bench_model_memory.py --n 100000 --part syncer [--root DIR]
"""
from __future__ import annotations

import argparse
import gc
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--n", type=int, required=True)
parser.add_argument("--part", choices=("syncer", "webhook"), required=True)
parser.add_argument("--root", default=str(Path(__file__).resolve().parents[1]))
parser.add_argument("--messages", help=argparse.SUPPRESS)  # the child: write the snapshot's messages there
args = parser.parse_args()
sys.path.insert(0, args.root)
sys.path.insert(1, str(Path(__file__).resolve().parent))

from services.common.settings import Settings  # noqa: E402


def rss_mib() -> float:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:")) / 1024


def api_objects(n: int) -> dict[str, dict]:
    """The store the watcher would publish, by kind. (In the child only: bench_scale puts this checkout first.)"""
    import bench_scale
    import scale_certificates
    from services.common.objects import object_key
    from services.watcher.filters import slim
    from tests.kube_api.resources import by_kind
    from tests.kube_api.storage import Storage
    from tests.support import k8s
    storage = Storage()
    certs = scale_certificates.make([bench_scale.host(i) for i in range(0, n, bench_scale.TLS_EVERY)])
    objects = [k8s.ingress_class("nginx")]
    for i in range(n):
        objects += bench_scale.scale_objects(i, "10.200.0.1", 8080, certs)
    store = {}
    for obj in objects:
        stored = slim(storage.create(by_kind(obj["kind"]), obj["metadata"].get("namespace"), obj, "bench"))
        store[object_key(stored)] = stored
    return dict(sorted(store.items()))


def write_messages(path: str) -> None:
    """(The child.) The snapshot's messages as the watcher's publisher sends them, each after its length."""
    from proto import pack_value
    from proto.limits import CLONE_MAX_MESSAGE_BYTES
    from services.common.clone_parts import snapshot_messages
    items = [(key, pack_value(obj)) for key, obj in api_objects(args.n).items()]
    with open(path, "wb") as out:
        for message in snapshot_messages("bench", 1, items, max_message_bytes=CLONE_MAX_MESSAGE_BYTES):
            out.write(struct.pack("<Q", len(message)) + message)


def as_a_subscriber_gets_it() -> dict[str, dict]:
    """The store as the syncer and the webhook get it: the snapshot's messages decoded and assembled."""
    from services.common.clone import _decode_kept
    from services.common.clone_parts import SnapshotAssembly
    with tempfile.NamedTemporaryFile() as file:
        subprocess.run([sys.executable, __file__, "--n", str(args.n), "--part", args.part, "--root", args.root,
                        "--messages", file.name], check=True)
        assembly, state = SnapshotAssembly(), None
        while header := file.read(8):
            state = assembly.add(_decode_kept(file.read(struct.unpack("<Q", header)[0])))
    assert state is not None
    return state


def syncer(settings: Settings) -> None:
    from services.nginxconf.tables import TablePusher
    from services.syncer.model.incremental import IncrementalModel
    from services.syncer.nginx_apply.applier import NginxApplier
    from services.syncer.observability.metrics import SyncerMetrics
    state = as_a_subscriber_gets_it()
    before = rss_mib()
    print(f"store ({len(state)} objects): {before:.0f} MiB")
    started, cpu = time.perf_counter(), time.process_time()
    model = IncrementalModel(settings).update(state, None)
    after = rss_mib()
    print(f"the model: {after:.0f} MiB (+{after - before:.0f}), built in {time.perf_counter() - started:.1f} s, "
          f"{time.process_time() - cpu:.1f} s of CPU")
    applier = NginxApplier(settings, SyncerMetrics(settings))
    applier.applied_profiles = {profile.name for profile in model.config.profiles}
    tables, _, _ = applier._tables(model)  # noqa: SLF001 - the routes' JSON the applier keeps
    sent = dict(tables["routes"])  # the pusher's copy of what it sent
    body = TablePusher._whole("routes", tables["routes"])[1]  # noqa: SLF001 - a whole push's body, then let go of
    del body
    gc.collect()
    print(f"with the applier's JSON of {len(sent)} hosts and the pusher's copy: {rss_mib():.0f} MiB")


def webhook(settings: Settings) -> None:
    from services.syncer.admission import review
    from services.syncer.admission.review import Reviewer
    state = as_a_subscriber_gets_it()
    before = rss_mib()
    print(f"store ({len(state)} objects): {before:.0f} MiB")
    reviewer = Reviewer(settings)
    if drop_unread := getattr(review, "drop_unread", None):  # as the webhook's main does with a snapshot
        drop_unread(state)
    reviewer.replace_store(state)
    del state
    gc.collect()
    print(f"with the reviewer's index (the snapshot let go of): {rss_mib():.0f} MiB (+{rss_mib() - before:.0f})")


def main() -> None:
    if args.messages:
        write_messages(args.messages)
        return
    import services.syncer.model.incremental as incremental
    print(f"{args.part}, {args.n} Ingresses, code of {Path(incremental.__file__).parents[3]}")
    (syncer if args.part == "syncer" else webhook)(Settings())


if __name__ == "__main__":
    main()

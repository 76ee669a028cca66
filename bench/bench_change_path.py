"""The path of one Ingress change, counted: from the syncer's model update to the nginx.conf the applier renders.

A small cluster (20 Ingresses) is built once as the syncer builds it (IncrementalModel, then the applier's
template render); then one Ingress changes and that one sync is followed with sys.setprofile:
- calls: calls of functions of the project (services/, proto/; the compiled Jinja2 template counts as
  templates/nginx.conf.j2), whatever calls them;
- hops: those calls that go from one of the project's files to another;
- re-entries: each time the path comes back (by a call or a return) to a file it had already left.
Library code in between (Jinja2, the standard library) is transparent: it belongs to no file here. A generator
(the compiled template is one, each `{% for %}` body a step) counts once, when it starts: its later steps
and yields move along the path without counting as calls or entries.

Two changes: one that gives its Ingress a new location profile (nginx.conf changes: the applier renders it),
and one that only moves its path (the tables change, nginx.conf does not).

Then the time of a whole model build and render at 1,000 and 10,000 Ingresses, for three shapes: one location
profile for all (bench_profile_scale.py's Ingresses), 500 profiles (its combinations), and a profile per
Ingress (limit-rps: each Ingress its own rate-limit zone). With `--baseline REV`, the same timings of the
code at git revision REV (a temporary worktree, in a subprocess) in the same run, and the ratios.
Run: .venv/bin/python bench/bench_change_path.py [--baseline REV]
"""
from __future__ import annotations

import argparse
import gc
import inspect
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any, Callable

# --root: time the code of another checkout (the baseline's worktree) with this script.
ROOT = Path(sys.argv[sys.argv.index("--root") + 1] if "--root" in sys.argv else Path(__file__).resolve().parents[1])
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))  # bench_profile_scale, which puts its own checkout first on the path

from bench_profile_scale import cluster_of as combinations_cluster  # noqa: E402
from services.nginxconf.render import render  # noqa: E402

from services.syncer.model.incremental import IncrementalModel  # noqa: E402
from services.syncer.nginx_apply.template_watch import TemplateTracker  # noqa: E402
from tests.support.model_cluster import PREFIX, Cluster  # noqa: E402

INGRESSES = 20
PROJECT = tuple(str(ROOT / part) + "/" for part in ("services", "proto"))
TEMPLATE = "<template>"  # what Jinja2 names the code compiled from a template loaded from memory


class PathCount:
    """What sys.setprofile sees of the project's files during one call."""

    def __init__(self) -> None:
        self.calls = 0
        self.hops = 0
        self.entries: Counter[str] = Counter()  # file → times the path came into it
        self._stack: list[str | None] = []  # per frame: its project file, or None
        self._current: str | None = None  # the innermost project file on the stack
        self._generators: set[FrameType] = set()  # started generator frames: a "call" of one is a resumption

    def _file(self, frame: FrameType) -> str | None:
        name = frame.f_code.co_filename
        if name == TEMPLATE:
            return "templates/nginx.conf.j2"
        return str(Path(name).relative_to(ROOT)) if name.startswith(PROJECT) else None

    def _switch(self, to: str | None, *, counted: bool) -> None:
        if to is None or to == self._current:
            return
        if counted:
            self.entries[to] += 1
        self._current = to

    def _profile(self, frame: FrameType, event: str, _arg: Any) -> None:
        generator = bool(frame.f_code.co_flags & inspect.CO_GENERATOR)
        if event == "call":
            file = self._file(frame)
            self._stack.append(file)
            resumed = generator and frame in self._generators
            if generator:
                self._generators.add(frame)
            if file is not None and not resumed:
                self.calls += 1
                if self._current is not None and file != self._current:
                    self.hops += 1
            self._switch(file, counted=not resumed)
        elif event == "return" and self._stack:
            self._stack.pop()
            self._switch(next((f for f in reversed(self._stack) if f is not None), None), counted=not generator)

    def run(self, action: Callable[[], Any]) -> Any:
        sys.setprofile(self._profile)
        try:
            return action()
        finally:
            sys.setprofile(None)

    @property
    def re_entries(self) -> int:
        return sum(count - 1 for count in self.entries.values())


def cluster_of(ingresses: int) -> Cluster:
    cluster = Cluster()
    cluster.ingress_class()
    for i in range(ingresses):
        cluster.app(f"app{i}", host=f"h{i}.path.example.com",
                    annotations={f"{PREFIX}/proxy-read-timeout": f"{10 + i % 3}s"})
    return cluster


def follow(change: Callable[[dict[str, Any]], None]) -> tuple[PathCount, bool]:
    """One sync after `change` to one Ingress, counted; and whether nginx.conf changed."""
    cluster = cluster_of(INGRESSES)
    model = IncrementalModel(cluster.settings)
    with tempfile.TemporaryDirectory() as snapshots:
        templates = TemplateTracker(None, Path(snapshots))
        before, _ = templates.render(model.update(cluster.store, None).config)
        key = next(key for key in cluster.store if key.startswith("Ingress/") and key.endswith("/app7"))
        change(cluster.store[key])
        count = PathCount()
        after, _ = count.run(lambda: templates.render(model.update(cluster.store, {key}).config))
    return count, after != before


def new_profile(ingress: dict[str, Any]) -> None:
    ingress["metadata"]["annotations"][f"{PREFIX}/proxy-read-timeout"] = "99s"


def moved_path(ingress: dict[str, Any]) -> None:
    ingress["spec"]["rules"][0]["http"]["paths"][0]["path"] = "/moved"


SIZES = (1_000, 10_000)
SHAPES = ("1 profile", "500 profiles", "profile per Ingress")
ROUNDS = 2
TURNS = 3  # processes per checkout with --baseline


def shape_cluster(shape: str, ingresses: int) -> Cluster:
    if shape != "profile per Ingress":
        return combinations_cluster(ingresses, 1 if shape == "1 profile" else 500)
    cluster = Cluster()
    cluster.ingress_class()
    for i in range(ingresses):
        cluster.app(f"app{i}", host=f"h{i}.scale.example.com", annotations={f"{PREFIX}/limit-rps": "10"})
    return cluster


def build_and_render_seconds() -> dict[str, list[float]]:
    """"shape/size" → the best of ROUNDS [build, render] seconds, the template compiled before (as in the syncer)."""
    render(cluster_of(1).build().config)
    times = {}
    for shape in SHAPES:
        for size in SIZES:
            cluster, best = shape_cluster(shape, size), [float("inf")] * 2
            for _ in range(ROUNDS):
                gc.collect()
                started = time.perf_counter()
                config = cluster.build().config
                built = time.perf_counter()
                render(config)
                best = [min(best[0], built - started), min(best[1], time.perf_counter() - built)]
            times[f"{shape}/{size}"] = best
    return times


def timed_in(root: Path) -> dict[str, list[float]]:
    out = subprocess.run([sys.executable, __file__, "--times-only", "--root", str(root)], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)


def best_of(runs: list[dict[str, list[float]]]) -> dict[str, list[float]]:
    return {key: [min(run[key][i] for run in runs) for i in range(2)] for key in runs[0]}


def timings(baseline: str | None) -> tuple[dict[str, list[float]], dict[str, list[float]] | None]:
    """This checkout's times, and the baseline revision's (a temporary worktree), in processes taking turns so
    that a busy moment of the machine weighs on both."""
    if baseline is None:
        return build_and_render_seconds(), None
    with tempfile.TemporaryDirectory(prefix="pyngress-baseline-") as worktree:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", worktree, baseline], check=True,
                       capture_output=True)
        try:
            now, before = [], []
            for _ in range(TURNS):
                before.append(timed_in(Path(worktree)))
                now.append(timed_in(ROOT))
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", worktree], check=True)
    return best_of(now), best_of(before)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--baseline", metavar="REV", help="git revision to time beside this checkout")
    parser.add_argument("--times-only", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--root", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.times_only:
        print(json.dumps(build_and_render_seconds()))
        return
    for name, change in (("new location profile", new_profile), ("path moved", moved_path)):
        count, conf_changed = follow(change)
        files = ", ".join(f"{file} {n}" for file, n in count.entries.most_common() if n > 1)
        print(f"{name} (nginx.conf {'changes' if conf_changed else 'unchanged'}): {count.calls} calls, "
              f"{count.hops} hops between files, {len(count.entries)} files, {count.re_entries} re-entries")
        print(f"  entered more than once: {files}")
    now, before = timings(args.baseline)
    print(f"\nmodel build, render: the best of {ROUNDS * (TURNS if before else 1)}"
          + (f" (baseline {args.baseline}, same run, processes taking turns)" if before else ""))
    for key, (build, rendered) in now.items():
        line = f"{key:>26}: build {build:6.3f}s render {rendered:6.3f}s"
        if before:
            old_build, old_render = before[key]
            line += (f" | baseline {old_build:6.3f}s {old_render:6.3f}s | ratio build {build / old_build:.2f} "
                     f"render {rendered / old_render:.2f} both {(build + rendered) / (old_build + old_render):.2f}")
        print(line)

if __name__ == "__main__":
    main()

"""A /metrics scrape at 10,000 Ingresses with traffic on all of them, and what /healthz takes meanwhile.

The syncer's healthz server (services/syncer/observability/healthz_server.py) runs in this process on its own event
loop, as in the syncer, with the request collector fed the batches nginx's workers would hand over for that traffic:
every Ingress answered GET 200, every tenth also GET 404 and POST 201 (12,000 label sets, with bucket counts of
made-up but plausible times and sizes). A client reads /metrics as fast as it can while another asks /healthz again
and again; a probe inside the server's loop records its longest stall (what the syncer's own work would wait for).

Baseline, same run: /healthz with no scrape under way. Figures: the scrape's time and size, /healthz's median and
worst time during it and their ratio to the baseline's, the loop's longest stall; then the CPU time of writing the
request metrics alone (no server, no client: the figure that moves least with the machine's load). With --gzip the
client asks for gzip, as Prometheus does (Accept-Encoding), and inflates it as it reads; without, for the text as it
is (identity).
Run: .venv/bin/python bench/bench_metrics_scrape.py [--ingresses N] [--rounds N] [--gzip]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import random
import requests
import statistics
import sys
import tempfile
import threading
import time
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from services.common.settings import Settings  # noqa: E402
from services.nginxconf.config import NginxConfig  # noqa: E402
from services.syncer.model.types import HostRoutes, Model, Route  # noqa: E402
from services.syncer.observability.metrics import SyncerMetrics  # noqa: E402
from services.syncer.observability.healthz_server import start_healthz_server  # noqa: E402
from tests.support.net import free_port, wait_for  # noqa: E402

WORKERS = 2  # batches per collection: one per nginx worker


def numbers_for(layout, requests_count: int, rng: random.Random) -> list[float]:
    """One label set's numbers in a batch (request_metrics.py): the count, then per histogram its bucket counts
    and sum, for `requests_count` observations."""
    numbers: list[float] = [requests_count]
    for spec, bounds in layout.histograms:
        counts = [0] * (len(bounds) + 1)
        total = 0.0
        for _ in range(requests_count):
            value = rng.lognormvariate(-4, 1.5) if spec.bucket_kind == "time" else rng.lognormvariate(6, 1.5)
            slot = next((i for i, bound in enumerate(bounds) if value <= bound), len(bounds))
            counts[slot] += 1
            total += value
        numbers += counts + [total]
    return numbers


def serving(ingresses: int) -> Model:
    """The model the batches' Ingresses come from (the collector counts only the Ingresses the routes name)."""
    routes = {f"h{i}.scale.example.com": HostRoutes(prefix={"/": Route(f"ns{i % 500}-app{i}-80", ingress=f"ns{i % 500}/app{i}",
                                                                         service=f"app{i}")}) for i in range(ingresses)}
    return Model(config=NginxConfig(http_port=80, https_port=443, state_dir="", run_dir=""), routes=routes,
                 backends={f"ns{i % 500}-app{i}-80": ["10.0.0.1:80"] for i in range(ingresses)})


def batches(layout, ingresses: int, seed: int) -> bytes:
    """The JSON array GET /configuration/metrics answers: WORKERS batches covering every Ingress."""
    rng = random.Random(seed)
    per_worker: list[dict[str, list[float]]] = [{} for _ in range(WORKERS)]
    for i in range(ingresses):
        labels = f"h{i}.scale.example.com\tns{i % 500}\tapp{i}\tapp{i}\t/\t"
        kinds = [("200", "GET")] + ([("404", "GET"), ("201", "POST")] if i % 10 == 0 else [])
        for status, method in kinds:
            per_worker[i % WORKERS][f"{labels}\t{status}\t{method}"] = numbers_for(layout, rng.randint(1, 8), rng)
    return json.dumps(per_worker).encode()


class Server:
    """The healthz server on a loop of its own, with a probe of that loop's longest stall."""

    def __init__(self, settings: Settings, metrics: SyncerMetrics) -> None:
        self.loop = asyncio.new_event_loop()
        self.worst_stall = 0.0
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(settings, metrics), daemon=True)
        self._thread.start()
        self._ready.wait()

    def _run(self, settings: Settings, metrics: SyncerMetrics) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(start_healthz_server(settings, healthy=lambda: (True, {}), metrics=metrics))
        self.loop.create_task(self._probe())
        self._ready.set()
        self.loop.run_forever()

    async def _probe(self) -> None:
        while True:
            start = time.perf_counter()
            await asyncio.sleep(0.001)
            self.worst_stall = max(self.worst_stall, time.perf_counter() - start - 0.001)


def healthz_times(port: int, until: threading.Event | None, count: int = 0) -> list[float]:
    """Seconds per /healthz, one after the other: `count` of them, or until `until` is set."""
    times = []
    with requests.Session() as session:
        while (until is not None and not until.is_set()) or len(times) < count:
            start = time.perf_counter()
            assert session.get(f"http://127.0.0.1:{port}/healthz", timeout=120).status_code == 200
            times.append(time.perf_counter() - start)
    return times


def scrape(port: int) -> tuple[float, int]:
    """Seconds and bytes of one /metrics, asked for as it is (identity)."""
    seconds, size, _ = scrape_sizes(port, gzip=False)
    return seconds, size


def scrape_sizes(port: int, gzip: bool) -> tuple[float, int, int]:
    """Seconds, bytes of text and bytes on the wire of one /metrics."""
    start = time.perf_counter()
    size = wire = 0
    headers = {"Accept-Encoding": "gzip" if gzip else "identity"}
    with requests.get(f"http://127.0.0.1:{port}/metrics", stream=True, timeout=300, headers=headers) as response:
        assert (response.headers.get("Content-Encoding") == "gzip") == gzip
        inflate = zlib.decompressobj(16 + zlib.MAX_WBITS) if gzip else None
        for chunk in response.raw.stream(1 << 20, decode_content=False):
            wire += len(chunk)
            size += len(inflate.decompress(chunk)) if inflate else len(chunk)
    return time.perf_counter() - start, size, wire


def write_seconds(metrics: SyncerMetrics) -> float:
    """CPU seconds to write the request metrics once, in this thread, with nothing else running: the cost of the
    text itself, steadier than a scrape's time on a busy machine."""
    assert metrics.requests is not None
    start = time.process_time()
    for _ in metrics.requests.chunks(metrics.const_labels):
        pass
    return time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ingresses", type=int, default=10000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--gzip", action="store_true", help="ask for gzip, as Prometheus does")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        settings = Settings.from_flags(run_dir=f"{tmp}/run", state_dir=f"{tmp}/state", healthz_port=port,
                                       healthz_host="127.0.0.1")
        metrics = SyncerMetrics(settings)
        assert metrics.requests is not None
        metrics.note_routes(serving(args.ingresses))
        for seed in range(2):  # two collections: running totals, not one batch
            metrics.requests.add_batches(batches(metrics.requests.layout, args.ingresses, seed))
        server = Server(settings, metrics)
        wait_for(lambda: requests.get(f"http://127.0.0.1:{port}/healthz", timeout=2).ok, 10, what="/healthz")
        idle = healthz_times(port, None, 200)
        scrapes, during, stalls = [], [], []
        for _ in range(args.rounds):
            server.worst_stall = 0.0
            done = threading.Event()
            result: list[float] = []
            poller = threading.Thread(target=lambda: result.extend(healthz_times(port, done)))
            poller.start()
            time.sleep(0.05)
            scrapes.append(scrape_sizes(port, args.gzip))
            done.set()
            poller.join()
            during += result
            stalls.append(server.worst_stall)
        cpu = [write_seconds(metrics) for _ in range(args.rounds)]
    idle_median, idle_max = statistics.median(idle), max(idle)
    seconds = statistics.median(s for s, _, _ in scrapes)
    print(f"{args.ingresses} Ingresses with traffic ({len(metrics.requests.totals)} label sets), {args.rounds} scrapes")
    text, wire = scrapes[0][1], scrapes[0][2]
    print(f"/metrics: {text / 1e6:.0f} MB in {seconds:.2f} s (median; rounds "
          f"{', '.join(f'{s:.2f}' for s, _, _ in scrapes)}), {text / 1e6 / seconds:.0f} MB/s; "
          f"{wire / 1e6:.1f} MB on the wire ({'gzip' if args.gzip else 'identity'})")
    print(f"writing the request metrics, CPU: {statistics.median(cpu):.3f} s (median; rounds "
          f"{', '.join(f'{c:.3f}' for c in cpu)})")
    print(f"{'/healthz':28} {'median':>10} {'max':>10} {'answers':>8}")
    print(f"{'no scrape (baseline)':28} {idle_median * 1000:>8.2f}ms {idle_max * 1000:>8.2f}ms {len(idle):>8}")
    print(f"{'during the scrapes':28} {statistics.median(during) * 1000:>8.2f}ms {max(during) * 1000:>8.2f}ms "
          f"{len(during):>8}")
    print(f"{'ratio to baseline':28} {statistics.median(during) / idle_median:>9.1f}x {max(during) / idle_max:>9.1f}x")
    print(f"server loop's longest stall during a scrape: {statistics.median(stalls) * 1000:.1f} ms (median of "
          f"rounds), {max(stalls) * 1000:.1f} ms (max)")


if __name__ == "__main__":
    main()

"""Parsing 30,000 manifest documents (10,000 each of Service, EndpointSlice and Ingress, 300 per file) as the
watcher does (yaml-rs where it reads as the exact reader, services/watcher/yaml_fast.py, and the exact reader
alone), beside PyYAML's own C loader (`yaml.load_all(..., CSafeLoader)`, the baseline: what any
Python tool reading manifests pays) and the same documents as JSON, in the same run; best of 5 rounds."""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from services.watcher.manifest_parser import parse_manifest  # noqa: E402
from services.watcher.manifests import read_objects  # noqa: E402
from tests.support import k8s  # noqa: E402

FILES, PER_FILE = 100, 100


def documents() -> list[dict]:
    docs = []
    for i in range(PER_FILE):
        docs += [k8s.service(f"s{i}"), k8s.endpoint_slice(f"s{i}", ["10.0.0.1"], 8080),
                 k8s.ingress(f"i{i}", [k8s.rule(f"h{i}.example.com", ("/", "Prefix", f"s{i}", 80))])]
    return docs


def best_of(rounds: int, run) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    docs = documents()
    yaml_text = yaml.safe_dump_all(docs).encode()
    json_text = "\n".join(json.dumps(d) for d in docs).encode()
    watcher = best_of(5, lambda: [read_objects("f.yaml", yaml_text, "f.yaml") for _ in range(FILES)])
    ours = best_of(5, lambda: [parse_manifest("f.yaml", yaml_text) for _ in range(FILES)])
    pyyaml = best_of(5, lambda: [list(yaml.load_all(yaml_text, Loader=yaml.CSafeLoader)) for _ in range(FILES)])
    ours_json = best_of(5, lambda: [parse_manifest("f.json", json_text) for _ in range(FILES)])
    print(f"{FILES * len(docs)} documents in {FILES} files")
    print(f"{'':24} {'seconds':>8} {'vs CSafeLoader':>15}")
    for name, seconds in (("watcher (objects)", watcher), ("exact YAML reader", ours), ("PyYAML CSafeLoader", pyyaml),
                          ("exact JSON reader", ours_json)):
        print(f"{name:24} {seconds:>8.2f} {seconds / pyyaml:>14.2f}x")


if __name__ == "__main__":
    main()

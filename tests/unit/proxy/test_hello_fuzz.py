"""The ClientHello parser (relay/hello.c) under libFuzzer with AddressSanitizer and UndefinedBehaviorSanitizer, for a
bounded time on every run: relay/fuzz_hello.c reads each input whole and cut in two, from a seed corpus of real
ClientHellos (OpenSSL's, through Python's ssl module) and hand-built ones. `make setup` installs clang and its
libFuzzer runtime."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tests.unit.proxy.hello_bytes import (as_records, built_hello, client_hello, long_hello, reframe,
                                          server_name_extension)

RELAY = Path(__file__).resolve().parents[3] / "relay"
FUZZ_SECONDS = 20


def seeds() -> list[bytes]:
    """Hellos that reach every part of the parser: with and without SNI, fragmented over records, names of other
    types, no extensions block."""
    return [client_hello("seed.example"), client_hello(None), reframe(client_hello("pieces.example"), [3, 50, 2]),
            as_records(built_hello(server_name_extension((7, b"\x00\x01"), (0, b"typed.example"))), 40),
            as_records(built_hello(None)), as_records(long_hello("long.example", 300), 200)]


def build_fuzzer(out: Path) -> Path:
    clang = shutil.which("clang")
    assert clang, "clang is missing: `make setup` installs it (the Makefile's APT_PACKAGES)"
    binary = out / "fuzz_hello"
    subprocess.run([clang, "-g", "-O1", "-fsanitize=fuzzer,address,undefined", "-fno-sanitize-recover=all",
                    "-fno-omit-frame-pointer", "-Werror", "-Wall", "-Wextra", f"-I{RELAY}", "-o", str(binary),
                    str(RELAY / "fuzz_hello.c"), str(RELAY / "hello.c")], check=True, timeout=120)
    return binary


def test_the_parser_survives_libfuzzer_under_sanitizers(tmp_path):
    fuzzer = build_fuzzer(tmp_path)
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for number, seed in enumerate(seeds()):
        (corpus / f"seed-{number}").write_bytes(seed)
    result = subprocess.run(
        [str(fuzzer), f"-max_total_time={FUZZ_SECONDS}", "-max_len=4096", "-timeout=10", "-rss_limit_mb=1024",
         f"-artifact_prefix={tmp_path}/", "-print_final_stats=1", str(corpus)],
        capture_output=True, text=True, timeout=FUZZ_SECONDS + 60)
    crashes = sorted(path.name for path in tmp_path.iterdir() if path.name.startswith(("crash-", "leak-", "timeout-",
                                                                                       "oom-")))
    # The fuzzer's report, with the input that failed (its bytes in hex, to reproduce: write them to a file and run
    # the fuzzer binary on it).
    failing = [(name, (tmp_path / name).read_bytes().hex()) for name in crashes]
    assert result.returncode == 0 and not crashes, f"{failing}\n{result.stderr[-6000:]}"
    assert "Done " in result.stderr and "stat::number_of_executed_units" in result.stderr, result.stderr[-3000:]

"""The relay module (relay/: the ClientHello parser and the relay) built with AddressSanitizer and
UndefinedBehaviorSanitizer, and test_hello.py's random, mutated and cut hellos, with a few relay tests, run against
that build in a Python of their own: the parser reads what any client sends before anything is known of it, so a read
out of bounds there must fail the suite, not wait for a crash in production.

The interpreter is not instrumented: the sanitizer's runtime is preloaded, with CPython's allocator off (each object an
allocation of its own) and leak detection off (the interpreter keeps what it allocates until exit). The hellos reach
the parser in buffers of their exact size (exact_buffers.py)."""
from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

from services.proxy.relay import LIBRARY_ENV

REPO = Path(__file__).resolve().parents[3]
SANITIZE = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"]
# The tests of test_hello.py that feed the parser many inputs, and relay tests that are quick.
HELLO_TESTS = "random or bounds or one_read or split or fragmented or malformed or host_names"
RELAY_TESTS = ["test_first_bytes_reach_the_backend_before_the_clients_and_answers_come_back",
               "test_a_backend_reset_closes_the_clients_connection",
               "test_an_upstream_reset_before_the_first_bytes_closes_the_pair",
               "test_many_pairs_at_once_each_get_their_own_bytes"]
SANITIZER_REPORTS = ("ERROR: AddressSanitizer", "runtime error:", "ERROR: UndefinedBehaviorSanitizer")


def build_sanitized(out: Path, relay_dir: Path = REPO / "relay") -> Path:
    """The relay module as the Makefile builds it, with the sanitizers."""
    library = out / "pyngress-relay-sanitized.so"
    sources = sorted(str(path) for path in relay_dir.glob("*.c") if path.name != "fuzz_hello.c")
    subprocess.run(["gcc", "-std=c11", "-g", "-O1", "-fPIC", "-shared", "-Wall", "-Wextra", "-Werror", *SANITIZE,
                    f"-I{sysconfig.get_paths()['include']}", "-o", str(library), *sources], check=True, timeout=120)
    return library


def sanitized_environment(library: Path) -> dict[str, str]:
    runtime = subprocess.run(["gcc", "-print-file-name=libasan.so"], capture_output=True, text=True,
                             check=True).stdout.strip()
    assert os.path.isabs(runtime), f"gcc has no AddressSanitizer runtime ({runtime!r}): install libasan"
    return {**os.environ, LIBRARY_ENV: str(library), "LD_PRELOAD": runtime, "PYTHONMALLOC": "malloc",
            "ASAN_OPTIONS": "detect_leaks=0:halt_on_error=1", "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1"}


def run_sanitized(library: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """The tests, their output not captured by pytest: a sanitizer's report ends the process at once, and would be lost
    in pytest's capture file."""
    relay_tests = [f"tests/integration/proxy/test_relay.py::{name}" for name in RELAY_TESTS]
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "-p",
         "tests.unit.proxy.exact_buffers", "-q", "--capture=no", f"--basetemp={tmp_path / 'inner'}", "-k", f"{HELLO_TESTS} or relay",
         "tests/unit/proxy/test_hello.py", *relay_tests],
        cwd=REPO, env=sanitized_environment(library), capture_output=True, text=True, timeout=600)


def test_the_parser_and_relay_tests_pass_under_address_and_undefined_behavior_sanitizers(tmp_path):
    result = run_sanitized(build_sanitized(tmp_path), tmp_path)
    output = result.stdout + result.stderr
    reports = [marker for marker in SANITIZER_REPORTS if marker in output]
    assert result.returncode == 0 and not reports, f"{reports}\n{output[-8000:]}"
    # The run did test something: the selected tests all ran (a selection that matched nothing would pass).
    assert " passed" in result.stdout and " deselected" in result.stdout, result.stdout[-2000:]

"""`make bench`: run every benchmark in bench/ one after the other and print their figures.

Each benchmark measures its own baseline in the same run (the machine is shared; absolute times are not
stable). Results worth keeping go into BENCHMARKS.md by hand, beside their baselines.
Run one alone with `.venv/bin/python bench/<name>.py`.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    failed = []
    for script in sorted(HERE.glob("bench_*.py")):
        print(f"\n=== {script.name} ===", flush=True)
        if subprocess.run([sys.executable, str(script)], cwd=HERE.parent).returncode != 0:
            failed.append(script.name)
    if failed:
        print(f"\nfailed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

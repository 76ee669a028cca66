"""How a pyngress process ends (services/common/runner.py), seen from outside as supervisord sees it."""
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

# A component whose main hands a long computation to a worker thread, as the syncer does a model build.
BUSY_THREAD_PROCESS = """
import asyncio, sys, time
sys.path.insert(0, {root!r})
from services.common.runner import run_process
from services.common.settings import Settings

async def main():
    print("ready", flush=True)
    await asyncio.to_thread(time.sleep, 60)

run_process("busy", settings=Settings(), main=main)
"""


def test_sigterm_ends_the_process_without_waiting_for_its_worker_threads():
    proc = subprocess.Popen([sys.executable, "-c", BUSY_THREAD_PROCESS.format(root=str(ROOT))],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(0.2)  # the thread is sleeping
        proc.send_signal(signal.SIGTERM)
        # The thread has 60 s left: a process that waited for it would not have exited in 20.
        assert proc.wait(20) == 0
        assert "busy stopped" in proc.stderr.read()  # the last line is flushed before the quick exit
    finally:
        proc.kill()
        proc.wait()

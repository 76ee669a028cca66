"""`make run`: the whole controller serving examples/manifests, with its echo backends under the same supervisord.

Ports and directories can be changed with the usual PYNGRESS_* variables (PYNGRESS_HTTP_PORT, ...).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BACKENDS = {"echo-a": 9001, "echo-b": 9002}


def main() -> None:
    run_dir = Path(os.environ.get("PYNGRESS_RUN_DIR", REPO / "run" / "demo" / "run"))
    state_dir = Path(os.environ.get("PYNGRESS_STATE_DIR", REPO / "run" / "demo" / "state"))
    http_port = os.environ.get("PYNGRESS_HTTP_PORT", "8080")
    https_port = os.environ.get("PYNGRESS_HTTPS_PORT", "8443")
    programs = run_dir / "supervisord.d"
    programs.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(run_dir, 0o700)
    for name, port in BACKENDS.items():
        (programs / f"{name}.conf").write_text(
            f"[program:{name}]\ncommand={sys.executable} {REPO / 'examples' / 'echo_backend.py'} "
            f"--name {name} --port {port}\nautorestart=true\nredirect_stderr=true\n"
            "stdout_logfile=/dev/stdout\nstdout_logfile_maxbytes=0\n")
    print(f"pyngress demo: try  curl -H 'Host: demo.local' http://127.0.0.1:{http_port}/b/hello", flush=True)
    pyngress = str(Path(sys.executable).parent / "pyngress")
    os.execv(pyngress, [pyngress, "up", f"--manifests={REPO / 'examples' / 'manifests'}",
                        f"--http-port={http_port}", f"--https-port={https_port}",
                        f"--run-dir={run_dir}", f"--state-dir={state_dir}"])


if __name__ == "__main__":
    main()

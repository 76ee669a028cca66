"""Finding nginx's workers as root without CAP_SYS_PTRACE, as in a container with podman's or Kubernetes'
default capabilities: the workers run as nobody, whose /proc/<pid>/exe and cwd root may then not read.
The reload waits for new workers through workers_of; if it found none, every reload would time out."""
import ast
import subprocess
import sys

from services.nginxconf import processes

from .conftest import REPO

PROBE = ("import sys; from pathlib import Path; from services.nginxconf import processes; "
         "print(sorted(w.pid for w in processes.workers_of(int(sys.argv[1]), Path(sys.argv[2])))); "
         "print(processes._readable(Path('/proc') / sys.argv[3]))")


def test_workers_of_finds_nobodys_workers_without_ptrace(shared_nginx):
    master = shared_nginx.master_pid()
    workers = sorted(shared_nginx.worker_pids())
    assert workers
    # Dropped from every set, as a container runtime leaves it out of a root container.
    probe = subprocess.run(["setpriv", "--inh-caps=-sys_ptrace", "--bounding-set=-sys_ptrace", sys.executable,
                            "-c", PROBE, str(master), str(shared_nginx.paths.prefix), str(workers[0])],
                           capture_output=True, text=True, cwd=REPO, check=True)
    found, readable = probe.stdout.splitlines()
    assert readable == "False"  # the situation this test is about: the workers' exe cannot be read
    assert [pid for pid in ast.literal_eval(found) if pid in workers] == workers
    # With the capability (the test's own process), the workers are found from their exe and cwd as before.
    assert sorted(w.pid for w in processes.workers_of(master, shared_nginx.paths.prefix)
                  if w.pid in workers) == workers

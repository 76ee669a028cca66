"""ingress-nginx's nginx_process_* metrics: the nginx master and its workers from /proc, and the connection
counters of nginx's stub_status (GET /nginx_status on the configuration socket).

ingress-nginx counts every process named nginx in its container; here the master is the one in this
controller's pid file and the rest are its children, so that other nginx instances on a shared host (a
test machine, or a node running pyngress outside a container) are not counted.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from . import exposition

NAMESPACE = "nginx_ingress_controller_nginx_process_"
_TICKS = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True)
class ProcessTotals:
    processes: int = 0
    cpu_seconds: float = 0.0
    resident_bytes: int = 0
    virtual_bytes: int = 0
    read_bytes: int = 0
    write_bytes: int = 0
    oldest_start: float = 0.0


def _boot_time() -> float:
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("btime "):
            return float(line.split()[1])
    return 0.0


def _stat_fields(pid: int) -> list[str]:
    """/proc/PID/stat from its state field on (the command name may hold spaces and parentheses)."""
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rindex(")") + 2:].split()


def _children(parent: int) -> list[int]:
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if int(_stat_fields(int(entry.name))[1]) == parent:
                    found.append(int(entry.name))
            except (OSError, ValueError, IndexError):
                continue  # gone meanwhile
    return found


def _io(pid: int) -> tuple[int, int]:
    try:
        values = dict(line.split(": ", 1) for line in Path(f"/proc/{pid}/io").read_text().splitlines())
    except OSError:
        return 0, 0  # not ours to read
    return int(values.get("read_bytes", 0)), int(values.get("write_bytes", 0))


def process_totals(pid_file: Path) -> ProcessTotals:
    """The nginx master named in `pid_file` and its children; empty when nginx is not running."""
    try:
        master = int(pid_file.read_text().split()[0])
        pids = [master] + _children(master)
    except (OSError, ValueError, IndexError):
        return ProcessTotals()
    boot = _boot_time()
    totals = ProcessTotals()
    for pid in pids:
        try:
            fields = _stat_fields(pid)
        except OSError:
            continue
        # Fields from state (index 0): utime 11, stime 12, starttime 19, vsize 20, rss 21.
        read, written = _io(pid)
        start = boot + int(fields[19]) / _TICKS
        totals = ProcessTotals(
            processes=totals.processes + 1,
            cpu_seconds=totals.cpu_seconds + (int(fields[11]) + int(fields[12])) / _TICKS,
            resident_bytes=totals.resident_bytes + int(fields[21]) * _PAGE,
            virtual_bytes=totals.virtual_bytes + int(fields[20]),
            read_bytes=totals.read_bytes + read, write_bytes=totals.write_bytes + written,
            oldest_start=min(start, totals.oldest_start) if totals.oldest_start else start)
    return totals


_STUB_STATUS = re.compile(r"Active connections:\s*(\d+).*?(\d+)\s+(\d+)\s+(\d+)\s*\n"
                          r"Reading:\s*(\d+)\s+Writing:\s*(\d+)\s+Waiting:\s*(\d+)", re.S)


def stub_status_lines(text: str, const_labels: Mapping[str, str]) -> list[str]:
    """The connection and request counters of nginx's stub_status page."""
    match = _STUB_STATUS.search(text)
    if not match:
        return []
    active, accepted, handled, requests, reading, writing, waiting = (int(g) for g in match.groups())
    return (
        exposition.family(NAMESPACE + "connections_total",
                          "total number of connections with state {accepted, handled}", "counter",
                          [({**const_labels, "state": "accepted"}, accepted),
                           ({**const_labels, "state": "handled"}, handled)])
        + exposition.family(NAMESPACE + "requests_total", "total number of client requests", "counter",
                            [(const_labels, requests)])
        + exposition.family(NAMESPACE + "connections",
                            "current number of client connections with state {active, reading, writing, waiting}",
                            "gauge", [({**const_labels, "state": state}, value) for state, value in
                                      (("active", active), ("reading", reading), ("writing", writing),
                                       ("waiting", waiting))]))


def process_lines(totals: ProcessTotals, const_labels: Mapping[str, str]) -> list[str]:
    if not totals.processes:
        return []
    rows = (
        ("num_procs", "number of processes", "gauge", totals.processes),
        ("cpu_seconds_total", "Cpu usage in seconds", "counter", totals.cpu_seconds),
        ("read_bytes_total", "number of bytes read", "counter", totals.read_bytes),
        ("write_bytes_total", "number of bytes written", "counter", totals.write_bytes),
        ("resident_memory_bytes", "number of bytes of memory in use", "gauge", totals.resident_bytes),
        ("virtual_memory_bytes", "number of bytes of memory in use", "gauge", totals.virtual_bytes),
        ("oldest_start_time_seconds", "start time in seconds since 1970/01/01", "gauge", totals.oldest_start),
    )
    lines: list[str] = []
    for name, help_text, kind, value in rows:
        lines += exposition.family(NAMESPACE + name, help_text, kind, [(const_labels, value)])
    return lines

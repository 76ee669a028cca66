"""supervisord event listener: counts PROCESS_STATE_EXITED (unexpected) and FATAL events per program.

The protocol: write READY, read one header line and its payload from stdin, answer RESULT, repeat.
Only stdout belongs to supervisord; logs go to stderr.
"""
from __future__ import annotations

import logging
import sys
import time
from typing import TextIO

from services.common import component_state, logs
from services.common.settings import Settings

log = logging.getLogger("crashmon")


def parse_tokens(line: str) -> dict[str, str]:
    return dict(token.split(":", 1) for token in line.split() if ":" in token)


def listen(settings: Settings, *, stdin: TextIO, stdout: TextIO) -> None:
    exits: dict[str, int] = {}
    fatal: dict[str, int] = {}
    component_state.write_status(settings.paths.run_dir, "crashmon", exits=exits, fatal=fatal)
    while True:
        stdout.write("READY\n")
        stdout.flush()
        header_line = stdin.readline()
        if not header_line:
            return  # supervisord is gone
        header = parse_tokens(header_line)
        payload = stdin.read(int(header.get("len", "0")))
        event = header.get("eventname", "")
        body = parse_tokens(payload.split("\n", 1)[0])
        name = body.get("processname", "?")
        group = body.get("groupname", name)
        program = name if group == name else f"{group}:{name}"
        if event == "PROCESS_STATE_EXITED" and body.get("expected") == "0":
            exits[program] = exits.get(program, 0) + 1
            log.warning("process exited unexpectedly; supervisord restarts it",
                        extra=logs.kv(program=program, pid=body.get("pid", "?")))
        elif event == "PROCESS_STATE_FATAL":
            fatal[program] = fatal.get(program, 0) + 1
            log.error("process could not be started and was given up", extra=logs.kv(program=program))
        component_state.write_status(settings.paths.run_dir, "crashmon", exits=exits, fatal=fatal,
                                     last_event=time.time())
        stdout.write("RESULT 2\nOK")
        stdout.flush()


def run(settings: Settings) -> int:
    logs.setup("crashmon", settings.log_level)
    listen(settings, stdin=sys.stdin, stdout=sys.stdout)
    return 0

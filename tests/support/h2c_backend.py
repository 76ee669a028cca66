"""A backend that speaks only HTTP/2 without TLS, as a gRPC server does: a real nginx answering each request with
what it saw, one `name=value` per word."""
from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Iterator

from tests.integration.proxy.harness import Nginx, free_port, http_temp_paths, wait_listening

# What the backend reports: the protocol it was spoken to in, and what the proxy sent.
ANSWER = ("protocol=$server_protocol path=$uri host=$http_host content-type=$http_content_type "
          "xff=$http_x_forwarded_for rid=$http_x_request_id te=$http_te")


@contextlib.contextmanager
def h2c_backend(directory: Path, host: str = "127.0.0.1") -> Iterator[int]:
    """The port of an h2c nginx on `host`, its files in `directory`, for the block's duration."""
    port = free_port()
    backend = Nginx(directory, f"""
http {{
    access_log off;
    {http_temp_paths(directory)}
    server {{
        listen {host}:{port} http2;
        location / {{ return 200 "{ANSWER}\\n"; }}
    }}
}}""")
    try:
        wait_listening(port)
        yield port
    finally:
        backend.stop()


def answer_fields(text: str) -> dict[str, str]:
    """The backend's answer as a dict: {"protocol": "HTTP/2.0", "path": ..., ...}."""
    return dict(word.partition("=")[::2] for word in text.split())

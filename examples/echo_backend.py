"""A tiny HTTP echo backend for the demo and the tests: answers every request with what it received.

    python examples/echo_backend.py --name NAME --port PORT [--host 127.0.0.1]

The JSON body says which backend answered, the method, path, headers and the client address, so a
reader (or a test) can see where the ingress sent a request and what it forwarded. A query with
`status=NNN` is answered with that status (the body is the same); with `pause=S` (up to 5 seconds) the body's
second half follows its first after S seconds, which shows whether a proxy passes on what it has (buffering).
"""
from __future__ import annotations

import argparse
import json
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit


def make_handler(name: str) -> type[BaseHTTPRequestHandler]:
    class EchoHandler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body go out in two writes: without this, Nagle holds the body for a delayed ACK (~40 ms).
        disable_nagle_algorithm = True

        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            payload = json.dumps({
                "backend": name, "method": self.command, "path": self.path,
                "headers": {k.lower(): v for k, v in self.headers.items()},
                "client": f"{self.client_address[0]}:{self.client_address[1]}",
                "body_bytes": len(body),
            }).encode() + b"\n"
            query = parse_qs(urlsplit(self.path).query)
            wanted = query.get("status", ["200"])[0]
            self.send_response(int(wanted) if wanted.isdigit() and 200 <= int(wanted) <= 599 else 200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.send_header("X-Backend", name)
            self.end_headers()
            if self.command == "HEAD":
                return
            pause = query.get("pause", ["0"])[0]
            if pause.replace(".", "", 1).isdigit() and 0 < float(pause) <= 5:
                half = len(payload) // 2
                self.wfile.write(payload[:half])
                self.wfile.flush()
                time.sleep(float(pause))
                payload = payload[half:]
            self.wfile.write(payload)

        do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = _answer

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
            pass  # one line per request would drown the demo's log

    return EchoHandler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    args = parser.parse_args()
    server = ThreadingHTTPServer((args.host, args.port), make_handler(args.name))
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    main()

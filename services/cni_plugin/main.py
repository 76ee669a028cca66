"""`pyngress-cni`: the CNI plugin a container runtime executes; it forwards each call to the CNI server.

It answers VERSION itself and sends every other call, as `{"env": {CNI_* variables}, "config": "<base64
of stdin>"}`, to the server's Unix socket: the network configuration's `serverSocket`, else
$PYNGRESS_CNI_SOCKET, else /var/run/pyngress/cni/cni-server.sock. A 200 answer's body (the CNI result,
empty for DEL/CHECK) goes to stdout with exit status 0; an error goes to stdout as CNI error JSON with
exit status 1. A server that cannot be reached is code 11 (try again later), naming the socket.

It runs once per pod and interface, so it must start fast (measured with `python -X importtime`, and
as wall time under `python3 -I`, where nothing else is pre-loaded):
- no http.client: it loads the email package and ssl (~18 ms here); one HTTP/1.1 request with
  `Connection: close` is written and read by hand;
- no json on the way of a successful call: json loads the re module (~6 ms); the request body is a
  flat object of strings and is written by hand, the server's answer is passed on as it is, and json
  is imported only for VERSION, for errors, and to read `serverSocket` when stdin mentions it;
- `_socket` rather than `socket`, whose Python layer loads selectors and enum (~2 ms).
It imports nothing from the project either, so a CNI bin directory can hold a two-line launcher
that runs it with `python3 -IS` (isolated, without the site module: ~6 ms to start here, against
~20 ms for the venv's console script, whose editable-install import hook loads pathlib and re);
see examples/cni/README.md.
"""
import os
import sys
from _socket import AF_UNIX, SOCK_STREAM, socket as unix_socket
from binascii import b2a_base64

# The same as proto.cni.SUPPORTED_VERSIONS (a unit test keeps them equal); importing proto would load msgpack.
SUPPORTED_VERSIONS = ("0.4.0", "1.0.0", "1.1.0")
DEFAULT_SOCKET = "/var/run/pyngress/cni/cni-server.sock"
# Longer than the server's own 2-minute request timeout, so that its answer (code 11) is what we print.
TIMEOUT_SECONDS = 150.0
IO_FAILURE, TRY_AGAIN_LATER, INTERNAL = 5, 11, 100


def main() -> int:
    stdin = sys.stdin.buffer.read()
    if os.environ.get("CNI_COMMAND") == "VERSION":
        requested = _network_config(stdin).get("cniVersion")
        return _print({"cniVersion": requested if isinstance(requested, str) and requested else SUPPORTED_VERSIONS[-1],
                       "supportedVersions": list(SUPPORTED_VERSIONS)}, 0)
    socket_path = _server_socket(stdin)
    env = ",".join(f"{quote(k)}:{quote(v)}" for k, v in os.environ.items() if k.startswith("CNI_"))
    body = f'{{"env":{{{env}}},"config":"{b2a_base64(stdin, newline=False).decode()}"}}'.encode()
    try:
        status, payload = post(socket_path, body)
    except PermissionError as err:
        return _error(stdin, code=IO_FAILURE, msg=f"cannot connect to the CNI server at {socket_path}: {err.strerror}",
                      details="the socket is root-only: the container runtime must run pyngress-cni as root")
    except (OSError, ValueError) as err:
        return _error(stdin, code=TRY_AGAIN_LATER,
                      msg=f"the CNI server at {socket_path} is not answering: {getattr(err, 'strerror', None) or err}",
                      details="start `pyngress cniserver` (or point serverSocket / $PYNGRESS_CNI_SOCKET at its socket)")
    if status == 200:
        if payload.strip():
            sys.stdout.buffer.write(payload.rstrip(b"\n") + b"\n")
        return 0
    return _server_error(stdin, socket_path=socket_path, status=status, payload=payload)


def quote(text: str) -> str:
    """`text` as a JSON string literal: '"' and '\\' escaped, control characters and lone surrogates
    (undecodable bytes in the environment) as \\uXXXX."""
    out = text.replace("\\", "\\\\").replace('"', '\\"')
    if any(c < " " or "\ud800" <= c <= "\udfff" for c in out):
        out = "".join(f"\\u{ord(c):04x}" if c < " " or "\ud800" <= c <= "\udfff" else c for c in out)
    return f'"{out}"'


def post(socket_path: str, body: bytes) -> tuple[int, bytes]:
    """POST `body` to / over the Unix socket; the HTTP status and the response body."""
    sock = unix_socket(AF_UNIX, SOCK_STREAM)
    try:
        sock.settimeout(TIMEOUT_SECONDS)
        sock.connect(socket_path)
        sock.sendall(b"POST / HTTP/1.1\r\nHost: pyngress-cni\r\nContent-Type: application/json\r\n"
                     b"Connection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    finally:
        sock.close()
    response = b"".join(chunks)
    head, sep, payload = response.partition(b"\r\n\r\n")
    status_line, *header_lines = head.split(b"\r\n")
    parts = status_line.split(b" ", 2)
    if not sep or len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
        raise ValueError(f"not an HTTP response: {response[:80]!r}")
    for line in header_lines:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length" and value.strip().isdigit():
            payload = payload[:int(value)]
    return int(parts[1]), payload


def _server_socket(stdin: bytes) -> str:
    if b"serverSocket" in stdin:
        path = _network_config(stdin).get("serverSocket")
        if isinstance(path, str) and path:
            return path
    return os.environ.get("PYNGRESS_CNI_SOCKET") or DEFAULT_SOCKET


def _network_config(stdin: bytes) -> dict:
    """stdin as a JSON object; {} when it is not one (the server says why, with the right code)."""
    import json  # off the fast path on purpose: see the module docstring
    try:
        config = json.loads(stdin) if stdin.strip() else {}
    except ValueError:
        return {}
    return config if isinstance(config, dict) else {}


def _server_error(stdin: bytes, *, socket_path: str, status: int, payload: bytes) -> int:
    import json
    try:
        error = json.loads(payload)
    except ValueError:
        error = None
    if not isinstance(error, dict) or not isinstance(error.get("code"), int):
        return _error(stdin, code=INTERNAL, msg=f"the CNI server at {socket_path} answered HTTP {status} without a "
                      "CNI error", details=payload[:500].decode("utf-8", "replace"))
    return _print(error, 1)


def _error(stdin: bytes, *, code: int, msg: str, details: str) -> int:
    version = _network_config(stdin).get("cniVersion")
    return _print({"cniVersion": version if version in SUPPORTED_VERSIONS else SUPPORTED_VERSIONS[-1],
                   "code": code, "msg": msg, "details": details}, 1)


def _print(document: dict, exit_status: int) -> int:
    import json
    sys.stdout.write(json.dumps(document) + "\n")
    return exit_status


if __name__ == "__main__":
    sys.exit(main())

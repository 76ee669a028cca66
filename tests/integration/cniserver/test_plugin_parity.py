"""The static plugin (cni-plugin/) against the Python reference (services/cni_plugin/main.py) on odd input:
the same stdout byte for byte, the same exit status, and the same request on the wire to the same socket.

Fake servers (Unix sockets in a thread) record each request and answer with canned bytes, so that every
odd answer a server could give is reachable; the real cniserver takes part where its own answer matters
(configurations over its size limit)."""
from __future__ import annotations

import json
import math
import os
import random
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.integration.cniserver.cni_processes import PLUGIN, REPO, CniStack
from tests.integration.cniserver.plugins import build_static_plugin, plugin_path, python_plugin_with_timeout

OK_BODY = b'{"cniVersion": "1.1.0", "interfaces": [], "ips": []}'


def http(status: int, body: bytes, reason: bytes = b"X") -> bytes:
    return (b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
            % (status, reason, len(body)) + body)


class FakeServer:
    """Accepts connections one after the other; records each request (read up to its Content-Length, or to
    the client's end of writing) and answers `answer`, or holds the connection open when it is None."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.answer: bytes | None = http(200, OK_BODY)
        self.read_requests = True
        self.requests: list[bytes] = []
        self.held: list[socket.socket] = []
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(path))
        self.listener.listen(16)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def reset(self) -> None:
        self.answer, self.read_requests = http(200, OK_BODY), True
        self.requests = []
        self.release()

    def release(self) -> None:
        for conn in self.held:
            conn.close()
        self.held = []

    def close(self) -> None:
        self.release()
        self.listener.close()  # accept() fails, and the thread ends

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            try:
                self._handle(conn)
            except OSError:
                conn.close()

    def _handle(self, conn: socket.socket) -> None:
        conn.settimeout(10)
        request = self._read(conn) if self.read_requests else b""
        self.requests.append(request)
        if self.answer is None:
            self.held.append(conn)
            return
        conn.sendall(self.answer)
        conn.close()

    @staticmethod
    def _read(conn: socket.socket) -> bytes:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return data
            data += chunk
        head = data.split(b"\r\n\r\n", 1)[0].lower()
        length = int(head.split(b"content-length: ", 1)[1].split(b"\r\n", 1)[0])
        while len(data) - len(head) - 4 < length:
            chunk = conn.recv(65536)
            if not chunk:
                break
            data += chunk
        return data


@dataclass
class Place:
    """Two fake servers, one named by $PYNGRESS_CNI_SOCKET ("env") and one by the configurations'
    serverSocket ("config"), and paths where nothing listens."""
    directory: Path
    servers: dict[str, FakeServer] = field(default_factory=dict)

    @property
    def missing(self) -> Path:
        return self.directory / "missing.sock"

    def reset(self) -> None:
        for server in self.servers.values():
            server.reset()

    def requests(self) -> list[tuple[str, bytes]]:
        return [(name, request) for name, server in self.servers.items() for request in server.requests]


@pytest.fixture(scope="module")
def module_place() -> Iterator[Place]:
    directory = Path(tempfile.mkdtemp(prefix="pcni-par-", dir="/tmp"))
    place = Place(directory)
    try:
        for name in ("env", "config"):
            place.servers[name] = FakeServer(directory / f"{name}.sock")
        yield place
    finally:
        for server in place.servers.values():
            server.close()
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def place(module_place: Place) -> Iterator[Place]:
    module_place.reset()
    yield module_place
    module_place.reset()


@dataclass(frozen=True)
class Outcome:
    returncode: int
    stdout: bytes
    requests: tuple[tuple[str, bytes], ...]  # (which server, the request's bytes)


def base_env(command: str, socket_path: Path | str | bytes) -> dict[bytes, bytes]:
    socket_bytes = socket_path if isinstance(socket_path, bytes) else str(socket_path).encode()
    return {b"PATH": b"/usr/bin:/bin", b"CNI_COMMAND": command.encode(), b"CNI_CONTAINERID": b"c1",
            b"CNI_NETNS": b"/var/run/netns/c1", b"CNI_IFNAME": b"eth0",
            b"CNI_ARGS": b"K8S_POD_NAMESPACE=default;K8S_POD_NAME=p1", b"CNI_PATH": b"/opt/cni/bin",
            b"PYNGRESS_CNI_SOCKET": socket_bytes}


def run(argv: list[str], stdin: bytes, env: dict[bytes, bytes], place: Place | None = None,
        cwd: Path | None = None) -> Outcome:
    if place:
        place.reset()
    done = subprocess.run(argv, input=stdin, env=env, capture_output=True, timeout=60, cwd=cwd)
    assert b"Traceback" not in done.stderr, done.stderr.decode(errors="replace")
    return Outcome(done.returncode, done.stdout, tuple(place.requests()) if place else ())


def both(stdin: bytes, env: dict[bytes, bytes], place: Place | None = None, *,
         argv: dict[str, list[str]] | None = None, cwd: Path | None = None) -> dict[str, Outcome]:
    argv = argv or {"python": [str(PLUGIN)], "static": [str(plugin_path("static"))]}
    return {name: run(command, stdin, env, place, cwd) for name, command in argv.items()}


def assert_same(outcomes: dict[str, Outcome]) -> Outcome:
    assert outcomes["static"] == outcomes["python"]
    return outcomes["python"]


# ---- network configurations ----

def nested(depth: int, socket_text: str) -> bytes:
    return b'{"serverSocket":"' + socket_text.encode() + b'","deep":' + b"[" * depth + b"]" * depth + b"}"


def text_case(template: str, encoding: str) -> Callable[[str], bytes]:
    return lambda path: template.replace("@B@", path).encode(encoding, "surrogatepass")


def bytes_case(template: bytes) -> Callable[[str], bytes]:
    return lambda path: template.replace(b"@B@", path.encode())


# (name, the configuration given the config server's path, which server gets the ADD)
CONFIGURATIONS: list[tuple[str, Callable[[str], bytes], str]] = [
    ("plain", bytes_case(b'{"cniVersion":"0.4.0","name":"n","type":"pyngress-cni","serverSocket":"@B@"}'), "config"),
    ("spaced", bytes_case(b'{\n\t"cniVersion" : "1.0.0" ,\r\n "serverSocket" :\t"@B@"\n}\n'), "config"),
    ("escaped-slashes", lambda p: b'{"serverSocket":"' + p.replace("/", "\\/").encode() + b'"}', "config"),
    ("unicode-escaped-path", lambda p: b'{"serverSocket":"' + "".join(f"\\u{ord(c):04X}" for c in p).encode() + b'"}',
     "config"),
    ("quote-in-another-value", bytes_case(b'{"name":"a\\"serverSocket\\":\\"/nope\\"","serverSocket":"@B@"}'),
     "config"),
    ("serverSocket-only-inside-a-string", bytes_case(b'{"name":"{\\"serverSocket\\": \\"@B@\\"}}"}'), "env"),
    ("braces-in-strings", bytes_case(b'{"a":"}}}{{{[[[","serverSocket":"@B@","b":"]]]\\\\"}'), "config"),
    ("nested-serverSocket", bytes_case(b'{"ipam":{"serverSocket":"@B@"}}'), "env"),
    ("nested-and-top", bytes_case(b'{"x":{"y":[{"serverSocket":"/nope"}]},"serverSocket":"@B@"}'), "config"),
    ("serverSocket-number", bytes_case(b'{"serverSocket":42}'), "env"),
    ("serverSocket-null", bytes_case(b'{"serverSocket":null}'), "env"),
    ("serverSocket-true", bytes_case(b'{"serverSocket":true}'), "env"),
    ("serverSocket-empty", bytes_case(b'{"serverSocket":""}'), "env"),
    ("serverSocket-list", bytes_case(b'{"serverSocket":["@B@"]}'), "env"),
    ("serverSocket-object", bytes_case(b'{"serverSocket":{"path":"@B@"}}'), "env"),
    ("repeated-key-last-wins", bytes_case(b'{"serverSocket":"/nope","serverSocket":"@B@"}'), "config"),
    ("repeated-key-last-not-a-string", bytes_case(b'{"serverSocket":"@B@","serverSocket":null}'), "env"),
    # the reference reads serverSocket only when stdin's bytes spell it out
    ("escaped-key", bytes_case(b'{"server\\u0053ocket":"@B@"}'), "env"),
    ("escaped-key-and-a-mention", bytes_case(b'{"server\\u0053ocket":"@B@","x":"serverSocket"}'), "config"),
    ("utf-8-bom", bytes_case(b'\xef\xbb\xbf{"serverSocket":"@B@"}'), "config"),
    ("two-boms", bytes_case(b'\xef\xbb\xbf\xef\xbb\xbf{"serverSocket":"@B@"}'), "env"),
    ("utf-16-le", text_case('{"cniVersion":"0.4.0","serverSocket":"@B@"}', "utf-16-le"), "env"),
    ("utf-16-be", text_case('{"cniVersion":"0.4.0","serverSocket":"@B@"}', "utf-16-be"), "env"),
    ("utf-16-bom", text_case('{"cniVersion":"1.0.0","x":"\U0001F600\ud800"}', "utf-16"), "env"),
    ("utf-32-le", text_case('{"cniVersion":"0.4.0"}', "utf-32-le"), "env"),
    ("utf-32-bom", text_case('{"cniVersion":"1.0.0"}', "utf-32"), "env"),
    ("utf-16-odd-length", lambda p: '{"cniVersion":"0.4.0"}'.encode("utf-16-le") + b"\x00", "env"),
    ("utf-32-beyond-unicode", lambda p: '{"cniVersion":"0.4.0"}'.encode("utf-32-le")[:-4] + b"\x00\x00\x11\x00", "env"),
    ("trailing-whitespace", bytes_case(b'{"serverSocket":"@B@"} \n\t\r '), "config"),
    ("trailing-garbage", bytes_case(b'{"serverSocket":"@B@"} x'), "env"),
    ("form-feed-is-not-json-space", bytes_case(b'\x0c{"serverSocket":"@B@"}'), "env"),
    ("trailing-comma", bytes_case(b'{"serverSocket":"@B@",}'), "env"),
    ("single-quotes", bytes_case(b"{'serverSocket':'@B@'}"), "env"),
    ("two-documents", bytes_case(b'{"serverSocket":"@B@"}{"serverSocket":"/nope"}'), "env"),
    ("unterminated", bytes_case(b'{"serverSocket":"@B@"'), "env"),
    ("missing-colon", bytes_case(b'{"serverSocket" "@B@"}'), "env"),
    ("raw-control-character", bytes_case(b'{"name":"a\x01b","serverSocket":"@B@"}'), "env"),
    ("raw-newline-in-a-string", bytes_case(b'{"name":"a\nb","serverSocket":"@B@"}'), "env"),
    ("raw-del-is-allowed", bytes_case(b'{"name":"a\x7fb","serverSocket":"@B@"}'), "config"),
    ("invalid-utf-8", bytes_case(b'{"name":"\xff","serverSocket":"@B@"}'), "env"),
    ("invalid-utf-8-after-the-document", bytes_case(b'{"serverSocket":"@B@"}  \xff'), "env"),
    ("overlong-utf-8", bytes_case(b'{"name":"\xc0\xaf","serverSocket":"@B@"}'), "env"),
    ("encoded-surrogate", bytes_case(b'{"name":"\xed\xa0\x80","serverSocket":"@B@"}'), "config"),
    ("truncated-encoded-surrogate", bytes_case(b'{"name":"\xed\xa0","serverSocket":"@B@"}'), "env"),
    ("lone-surrogate-escapes", bytes_case(b'{"name":"\\ud800 \\udc00 \\udbff\\u0041","serverSocket":"@B@"}'),
     "config"),
    ("bad-escape", bytes_case(b'{"name":"\\x41","serverSocket":"@B@"}'), "env"),
    ("bad-unicode-escape", bytes_case(b'{"name":"\\u12g4","serverSocket":"@B@"}'), "env"),
    ("high-surrogate-then-bad-escape", bytes_case(b'{"name":"\\ud800\\u12g4","serverSocket":"@B@"}'), "env"),
    ("high-surrogate-then-newline-escape", bytes_case(b'{"name":"\\ud800\\n","serverSocket":"@B@"}'), "config"),
    ("constants", bytes_case(b'{"a":NaN,"b":Infinity,"c":-Infinity,"d":[true,false,null],"serverSocket":"@B@"}'),
     "config"),
    ("lowercase-nan", bytes_case(b'{"a":nan,"serverSocket":"@B@"}'), "env"),
    ("minus-nan", bytes_case(b'{"a":-NaN,"serverSocket":"@B@"}'), "env"),
    ("numbers", bytes_case(b'{"a":[0,-0,1.5e3,-2E-2,1e400,0.0,1E+2],"serverSocket":"@B@"}'), "config"),
    ("leading-zero", bytes_case(b'{"a":01,"serverSocket":"@B@"}'), "env"),
    ("dot-without-digits", bytes_case(b'{"a":1.,"serverSocket":"@B@"}'), "env"),
    ("exponent-without-digits", bytes_case(b'{"a":1e,"serverSocket":"@B@"}'), "env"),
    ("plus-sign", bytes_case(b'{"a":+1,"serverSocket":"@B@"}'), "env"),
    ("int-of-4300-digits", bytes_case(b'{"a":-' + b"7" * 4300 + b',"serverSocket":"@B@"}'), "config"),
    ("int-of-4301-digits", bytes_case(b'{"a":' + b"7" * 4301 + b',"serverSocket":"@B@"}'), "env"),
    ("float-of-5000-digits", bytes_case(b'{"a":' + b"7" * 5000 + b'.5e-3,"serverSocket":"@B@"}'), "config"),
    ("nested-900-deep", lambda p: nested(900, p), "config"),
    ("empty", bytes_case(b""), "env"),
    ("whitespace", bytes_case(b" \n\t"), "env"),
    ("null", bytes_case(b"null"), "env"),
    ("array", bytes_case(b'["serverSocket","@B@"]'), "env"),
    ("string", bytes_case(b'"serverSocket"'), "env"),
    ("empty-object", bytes_case(b"{}"), "env"),
    ("large", bytes_case(b'{"pad":"' + b"x" * 600_000 + b'","serverSocket":"@B@"}'), "config"),
    ("cniVersion-escapes", bytes_case(b'{"cniVersion":"\\u00e9\\ud83d\\ude00\\ud800\\"\\\\\\n\\u007f\\u0000","x":1}'),
     "env"),
    ("cniVersion-raw-unicode", text_case('{"cniVersion":"é😀 \u2028"}', "utf-8"), "env"),
    ("cniVersion-number", bytes_case(b'{"cniVersion":1.0}'), "env"),
    ("cniVersion-empty", bytes_case(b'{"cniVersion":""}'), "env"),
    ("cniVersion-unsupported", bytes_case(b'{"cniVersion":"0.3.1"}'), "env"),
    ("cniVersion-repeated", bytes_case(b'{"cniVersion":"0.4.0","cniVersion":"1.0.0"}'), "env"),
]


@pytest.mark.parametrize("make_config,target", [pytest.param(make, target, id=name)
                                                for name, make, target in CONFIGURATIONS])
def test_odd_configurations(place: Place, make_config: Callable[[str], bytes], target: str):
    """VERSION, an ADD (which server gets it, and what it gets), and an ADD with no server anywhere (the
    error names the socket and answers in the configuration's cniVersion)."""
    config = make_config(str(place.servers["config"].path))
    version = assert_same(both(config, base_env("VERSION", place.missing)))
    assert version.returncode == 0 and json.loads(version.stdout)["supportedVersions"] == ["0.4.0", "1.0.0", "1.1.0"]

    added = assert_same(both(config, base_env("ADD", place.servers["env"].path), place))
    assert added.returncode == 0 and [name for name, _ in added.requests] == [target]

    nowhere = make_config(str(place.directory / "nowhere.sock"))
    failed = assert_same(both(nowhere, base_env("ADD", place.missing), place))
    assert failed.returncode == 1 and json.loads(failed.stdout)["code"] == 11 and not failed.requests


@pytest.mark.parametrize("depth", [999, 1200, 100_000])
def test_nesting_beyond_pythons_recursion_limit(place: Place, depth: int):
    """json.loads gives up a little under 1,000 levels with a RecursionError, which the reference does not
    catch: it dies with a traceback and prints nothing. The static plugin treats what it cannot parse like
    any configuration that is not JSON (the socket from the environment); this pins that down and shows
    the reference's failure, which is not the static plugin's to copy."""
    config = nested(depth, str(place.servers["config"].path))
    static = run([str(plugin_path("static"))], config, base_env("ADD", place.servers["env"].path), place)
    expected = "config" if depth < 1000 else "env"  # JSON_MAX_DEPTH: 1,000 containers
    assert static.returncode == 0 and [name for name, _ in static.requests] == [expected]
    python = subprocess.run([str(PLUGIN)], input=config, env=base_env("ADD", place.servers["env"].path),
                            capture_output=True)
    assert (python.returncode, python.stdout) == (1, b"") and b"RecursionError" in python.stderr


# ---- the environment ----

ENVIRONMENTS: list[tuple[str, dict[bytes, bytes]]] = [
    ("quote-and-backslash", {b"CNI_ARGS": b'a"b\\c\\"'}),
    ("control-characters", {b"CNI_ARGS": b"tab\tnl\ncr\r\x01\x1f\x7f end"}),
    ("utf-8", {b"CNI_ARGS": "é 日本 😀 \u2028".encode()}),
    ("invalid-utf-8", {b"CNI_ARGS": b"\xff\xfe a \xe2\x82 b \xf0\x9f\x98 c \xc0\xaf \xed\xa0\x80 \xf4\x90\x80\x80 \x80"}),
    ("odd-names", {b"CNI_\xff": b"x", b"CNI_": b"empty name", "CNI_é".encode(): b"y", b"cni_lower": b"no",
                   b"XCNI_": b"no", b"CNI_A\"B": b"q"}),
    ("empty-values", {b"CNI_ARGS": b"", b"CNI_NETNS": b""}),
    ("large-value", {b"CNI_ARGS": b"K=" + b"v" * 100_000}),
]


@pytest.mark.parametrize("extra", [pytest.param(env, id=name) for name, env in ENVIRONMENTS])
def test_odd_environments_make_the_same_request(place: Place, extra: dict[bytes, bytes]):
    config = b'{"cniVersion":"1.1.0","name":"n","type":"pyngress-cni"}'
    outcome = assert_same(both(config, {**base_env("ADD", place.servers["env"].path), **extra}, place))
    (_, request), = outcome.requests
    body = json.loads(request.split(b"\r\n\r\n", 1)[1])
    assert set(body) == {"env", "config"} and all(key.startswith("CNI_") for key in body["env"])


EXEC_WITH_ENVIRON = """
import ctypes, json, sys
argv = [a.encode() for a in json.loads(sys.argv[1])]
envp = [e.encode("utf-8", "surrogateescape") for e in json.loads(sys.argv[2])]
libc = ctypes.CDLL(None, use_errno=True)
libc.execve(argv[0], (ctypes.c_char_p * (len(argv) + 1))(*argv, None), (ctypes.c_char_p * (len(envp) + 1))(*envp, None))
sys.exit(127)
"""


def test_a_repeated_variable_is_sent_once_with_its_first_value(place: Place):
    """An environment can name a variable twice (execve takes any list); os.environ keeps the first, in
    its place, and so does the static plugin. Entries without '=' are not variables at all."""
    env = [f"PYNGRESS_CNI_SOCKET={place.servers['env'].path}", "CNI_COMMAND=ADD", "CNI_ARGS=first", "CNI_IFNAME=eth0",
           "CNI_ARGS=second", "CNI_NOEQUALS", "CNI_COMMAND=DEL"]
    outcomes = {}
    for name, argv in (("python", [str(PLUGIN)]), ("static", [str(plugin_path("static"))])):
        place.reset()
        done = subprocess.run([sys.executable, "-c", EXEC_WITH_ENVIRON, json.dumps(argv), json.dumps(env)],
                              input=b"{}", capture_output=True, timeout=60)
        outcomes[name] = Outcome(done.returncode, done.stdout, tuple(place.requests()))
    (_, request), = assert_same(outcomes).requests
    assert b'"env":{"CNI_COMMAND":"ADD","CNI_ARGS":"first","CNI_IFNAME":"eth0"}' in request


# ---- the server's answer ----

def answered(place: Place, answer: bytes, config: bytes) -> dict[str, Outcome]:
    """Each plugin's outcome when the server answers `answer`."""
    outcomes = {}
    for name, argv in (("python", [str(PLUGIN)]), ("static", [str(plugin_path("static"))])):
        place.reset()
        place.servers["env"].answer = answer
        done = subprocess.run(argv, input=config, env=base_env("ADD", place.servers["env"].path),
                              capture_output=True, timeout=60)
        assert b"Traceback" not in done.stderr, done.stderr.decode(errors="replace")
        outcomes[name] = Outcome(done.returncode, done.stdout, tuple(place.requests()))
    return outcomes


ANSWERS: list[tuple[str, bytes]] = [
    ("result", http(200, OK_BODY)),
    ("result-trailing-newlines", http(200, b'{"a": 1}\n\n\n')),
    ("result-crlf-kept", http(200, b'{"a": 1}\r\n')),
    ("result-blank", http(200, b" \r\n\t\x0b\x0c")),
    ("result-empty", http(200, b"")),
    ("result-not-json-passed-on", http(200, b"\xff\x00 not json \n")),
    ("no-content-length", b"HTTP/1.1 200 OK\r\n\r\n{\"a\": 1}\n"),
    ("content-length-shorter", b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n{\"a\": 1}"),
    ("content-length-longer", b"HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n{\"a\": 1}"),
    ("two-content-lengths", b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\nContent-Length: 3\r\n\r\n{\"a\": 1}"),
    ("content-length-odd-spelling", b"HTTP/1.1 200 OK\r\n  cOnTeNt-LeNgTh \t:  4 \x0b\r\n\r\n{\"a\": 1}"),
    ("content-length-not-digits", b"HTTP/1.1 200 OK\r\nContent-Length: 3x\r\n\r\n{\"a\": 1}"),
    ("content-length-of-5000-digits", b"HTTP/1.1 200 OK\r\nContent-Length: " + b"9" * 5000 + b"\r\n\r\n{}"),
    ("header-without-colon", b"HTTP/1.1 200 OK\r\nnonsense\r\n\r\n{}"),
    ("http-1.0", b"HTTP/1.0 200 OK\r\n\r\n{}"),
    ("status-without-reason", b"HTTP/1.1 200\r\n\r\n{}"),
    ("status-with-leading-zeros", b"HTTP/1.1 0200 OK\r\n\r\n{}"),
    ("status-of-5000-digits", b"HTTP/1.1 " + b"2" * 5000 + b" OK\r\n\r\n{}"),
    ("status-zero", b"HTTP/1.1 000 Zero\r\n\r\n{}"),
    ("http-2", b"HTTP/2 200 OK\r\n\r\n{}"),
    ("double-space", b"HTTP/1.1  200 OK\r\n\r\n{}"),
    ("status-not-digits", b"HTTP/1.1 2OO OK\r\n\r\n{}"),
    ("no-blank-line", b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n"),
    ("lf-only", b"HTTP/1.1 200 OK\n\n{}"),
    ("nothing", b""),
    ("binary", bytes(range(256))),
    ("quotes-both", b"it's \"quoted\" \\ \r\n\r\n"),
    ("quote-single", b"it's"),
    ("server-error", http(400, b'{"cniVersion": "1.1.0", "code": 7, "msg": "bad", "details": "x"}')),
    ("error-rewritten", http(400, b'{"code":7,"msg":"\\u00e9\\ud83d\\ude00 \\ud800 \xc3\xa9\\/","details":[1,2.50,{"a":null}]}')),
    ("error-repeated-keys", http(400, b'{"code":1,"msg":"a","code":2,"details":{"x":1,"y":2,"x":{"z":1,"z":2}}}')),
    ("error-numbers", http(400, b'{"code":-0,"a":[1.0,1e16,1e15,1E-5,0.0001,-0.0,1e400,-1e400,5e-324,'
                                b'1.7976931348623157e308,0.1,123456789.123456789,1e22,12345678901234567890123,'
                                b'2.5e-8,9007199254740993.0,0.30000000000000004]}')),
    ("error-constants", http(400, b'{"code":0,"a":[NaN,Infinity,-Infinity,true,false,null,[],{}]}')),
    ("error-code-true", http(400, b'{"code":true,"msg":"bool is an int"}')),
    ("error-code-float", http(400, b'{"code":1.0}')),
    ("error-code-string", http(400, b'{"code":"7"}')),
    ("error-code-missing", http(400, b'{"msg":"x"}')),
    ("error-array", http(400, b'[{"code":1}]')),
    ("error-not-json", http(500, b"oops")),
    ("error-cut-in-a-character", http(500, b"x" * 499 + "é".encode() + b"tail")),
    ("error-invalid-utf-8", http(502, b"\xff\xfe\xed\xa0\x80 \xf0\x9f\x98 \xe2\x82")),
    ("error-utf-16", http(400, '{"code": 3, "msg": "é"}'.encode("utf-16"))),
    ("error-empty", http(503, b"")),
    ("error-html", http(404, b"<html><body>Not Found</body></html>")),
    ("error-int-of-4301-digits", http(400, b'{"code":' + b"1" * 4301 + b"}")),
    ("error-nested", http(400, b'{"code":1,"a":' + b"[" * 500 + b"]" * 500 + b"}")),
    ("error-deeply-repeated-keys", http(400, b'{"code":1,"a":' + b'{"k":1,"k":' * 200 + b"0" + b"}" * 200 + b"}")),
]


@pytest.mark.parametrize("answer", [pytest.param(answer, id=name) for name, answer in ANSWERS])
def test_odd_answers(place: Place, answer: bytes):
    assert_same(answered(place, answer, b'{"cniVersion":"1.0.0"}'))


def test_error_numbers_are_written_back_as_python_writes_them(place: Place):
    """json.loads + json.dumps of floats: the shortest digits that read back (repr), here for random
    doubles of every magnitude, for every power of two (where doubles are closer together below than
    above, and the nearest decimal of a length may not read back when the next one up does), and for
    decimal literals longer than a double holds."""
    rng = random.Random(1414)
    doubles = [struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0] for _ in range(400)]
    doubles += [math.ldexp(1.0, exponent) for exponent in range(-1074, 1024)]
    literals = [repr(x) for x in doubles if math.isfinite(x)]
    literals += [f"{rng.randint(0, 10**30)}.{rng.randint(0, 10**30)}e{rng.randint(-330, 330)}" for _ in range(200)]
    literals += [f"{rng.random() * 10 ** rng.randint(-8, 20)!r}" for _ in range(200)]
    body = b'{"code": 1, "numbers": [' + ",".join(literals).encode() + b"]}"
    assert_same(answered(place, http(400, body), b"{}"))


# ---- servers that cannot be reached ----

@pytest.fixture
def odd_sockets() -> Iterator[dict[str, bytes]]:
    """Paths (as $PYNGRESS_CNI_SOCKET bytes) where connecting fails in different ways."""
    directory = Path(tempfile.mkdtemp(prefix="pcni-odd-", dir="/tmp"))
    bound = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    bound.bind(str(directory / "bound.sock"))  # bound, never listening: refused
    (directory / "file").write_text("")
    try:
        yield {"missing": str(directory / "missing.sock").encode(),
               "refused": str(directory / "bound.sock").encode(),
               "a-regular-file": str(directory / "file").encode(),
               "a-directory": str(directory).encode(),
               "not-a-directory": str(directory / "file" / "x.sock").encode(),
               "too-long": b"/tmp/" + b"x" * 103,
               "longest-allowed": b"/tmp/" + b"x" * 102,
               "relative": b"relative.sock",
               "undecodable": str(directory).encode() + b"/\xff\xfe.sock"}
    finally:
        bound.close()
        shutil.rmtree(directory, ignore_errors=True)


@pytest.mark.parametrize("kind", ["missing", "refused", "a-regular-file", "a-directory", "not-a-directory",
                                  "too-long", "longest-allowed", "relative", "undecodable"])
def test_unreachable_sockets(odd_sockets: dict[str, bytes], kind: str, tmp_path: Path):
    outcome = assert_same(both(b'{"cniVersion":"0.4.0"}', base_env("ADD", odd_sockets[kind]), cwd=tmp_path))
    assert outcome.returncode == 1 and json.loads(outcome.stdout)["code"] == 11


@pytest.mark.parametrize("server_socket", [
    "\u0000pyngress-test-abstract-nobody-listens",
    "\u0000" + "a" * 107,  # the longest abstract name
    "\u0000" + "a" * 108,
    "/tmp/\ud800x.sock",
    "/tmp/\udc80\ud800\udc81\ud801x.sock",
    "/tmp/\udcff.sock",
    "/tmp/nul\u0000inside.sock",
    "/tmp/é日本😀.sock",
])
def test_odd_socket_paths_in_the_configuration(server_socket: str, tmp_path: Path):
    config = json.dumps({"cniVersion": "1.0.0", "serverSocket": server_socket}).encode()
    outcome = assert_same(both(config, base_env("ADD", tmp_path / "env.sock")))
    assert outcome.returncode == 1 and json.loads(outcome.stdout)["code"] == 11


def test_a_socket_the_caller_may_not_use_is_code_5():
    """The server's directory is root-only: a plugin not run as root is refused (EACCES), code 5."""
    private = Path(tempfile.mkdtemp(prefix="pcni-priv-", dir="/tmp"))
    # Copies of both plugins, where nobody may read and run them: not under pytest's tmp_path nor the clone, either
    # of which may sit in a 0700 directory (`mktemp -d` makes one). The Python plugin needs only the standard
    # library, and runs with -IS as its launcher runs it.
    public = Path(tempfile.mkdtemp(prefix="pcni-pub-", dir="/tmp"))
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        os.chmod(private, 0o700)
        os.chmod(public, 0o755)
        listener.bind(str(private / "s.sock"))
        listener.listen(1)
        as_nobody = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
        static_copy, python_copy = public / "pyngress-cni-static", public / "pyngress_cni.py"
        shutil.copy(plugin_path("static"), static_copy)
        shutil.copy(REPO / "services" / "cni_plugin" / "main.py", python_copy)
        python_copy.chmod(0o644)
        outcome = assert_same(both(b"{}", base_env("ADD", private / "s.sock"),
                                   argv={"python": [*as_nobody, sys.executable, "-IS", str(python_copy)],
                                         "static": [*as_nobody, str(static_copy)]}))
        assert outcome.returncode == 1 and json.loads(outcome.stdout)["code"] == 5
    finally:
        listener.close()
        shutil.rmtree(private, ignore_errors=True)
        shutil.rmtree(public, ignore_errors=True)


def test_a_full_backlog_is_refused_at_once(tmp_path: Path):
    """Connecting to a Unix socket whose listener's backlog is full fails at once with EAGAIN for the
    reference (a non-blocking connect), and so for the static plugin: neither waits for its timeout."""
    path = tmp_path / "busy.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(0)
    waiting = []
    try:
        while True:  # fill the backlog with connections nobody accepts
            client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            client.setblocking(False)
            waiting.append(client)
            try:
                client.connect(str(path))
            except BlockingIOError:
                break
        outcome = assert_same(both(b"{}", base_env("ADD", path)))
        assert b"Resource temporarily unavailable" in outcome.stdout
    finally:
        for client in waiting:
            client.close()
        listener.close()


@pytest.fixture(scope="module")
def one_second_plugins() -> Iterator[dict[str, list[str]]]:
    """Both plugins with a 1-second timeout instead of 150 s."""
    directory = Path(tempfile.mkdtemp(prefix="pcni-t1-", dir="/tmp"))
    try:
        static = build_static_plugin(directory / "pyngress-cni-static-t1", timeout_seconds=1)
        yield {"python": python_plugin_with_timeout(1.0), "static": [str(static)]}
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def test_a_server_that_never_answers_times_out(place: Place, one_second_plugins: dict[str, list[str]]):
    place.servers["env"].answer = None
    outcomes = {}
    for name, argv in one_second_plugins.items():
        outcomes[name] = run(argv, b"{}", base_env("ADD", place.servers["env"].path))
        place.servers["env"].release()
    outcome = assert_same(outcomes)
    assert json.loads(outcome.stdout)["msg"].endswith("is not answering: timed out")


def test_a_server_that_does_not_read_times_out(place: Place, one_second_plugins: dict[str, list[str]]):
    """A request larger than the socket's buffer, to a server that never reads: the send times out."""
    config = b'{"pad":"' + b"x" * 700_000 + b'"}'
    place.servers["env"].answer, place.servers["env"].read_requests = None, False
    outcomes = {}
    for name, argv in one_second_plugins.items():
        outcomes[name] = run(argv, config, base_env("ADD", place.servers["env"].path))
        place.servers["env"].release()
    outcome = assert_same(outcomes)
    assert json.loads(outcome.stdout)["msg"].endswith("is not answering: timed out")


# ---- the real server's limit ----

@pytest.mark.parametrize("size", [800_000, (4 << 20) - 40, (4 << 20) + 1, 6_000_000])
def test_configurations_over_the_servers_limit_are_refused_alike(stack: CniStack, size: int):
    """The server refuses a body over 1 MiB (code 7) from its Content-Length. The static plugin holds at
    most 4 MiB of stdin; past that it sends only the request's head, announcing the full size, and gets
    the same refusal."""
    stack.start_worker(stub=True)
    stack.wait_workers(1)
    head, tail = b'{"cniVersion":"1.0.0","name":"n","type":"pyngress-cni","pad":"', b'"}'
    config = head + b"x" * (size - len(head) - len(tail)) + tail
    assert len(config) == size
    outcome = assert_same(both(config, base_env("ADD", stack.socket)))
    assert outcome.returncode == 1 and json.loads(outcome.stdout)["code"] == 7


# ---- generated documents ----

SERVER_SOCKET_PLACEHOLDER = "\x00config-socket\x00"

json_scalars = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(10**30), max_value=10**30),
                         st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8),
                         st.sampled_from(["0.4.0", "1.0.0", "1.1.0", "", SERVER_SOCKET_PLACEHOLDER]))
json_values = st.recursive(json_scalars, lambda children: st.one_of(
    st.lists(children, max_size=4),
    st.dictionaries(st.sampled_from(["serverSocket", "cniVersion", "name", "ipam", "a"]) | st.text(max_size=4),
                    children, max_size=5)), max_leaves=12)
top_levels = st.dictionaries(st.sampled_from(["serverSocket", "cniVersion", "name", "type", "x"]), json_values,
                             max_size=5) | json_values


@st.composite
def documents(draw: st.DrawFn) -> bytes:
    """A JSON document as json.dumps writes it (ASCII or not, any separators), perhaps broken by a few
    byte edits; the config server's path stands in for the placeholder."""
    text = json.dumps(draw(top_levels), ensure_ascii=draw(st.booleans()),
                      separators=draw(st.sampled_from([(",", ":"), (", ", ": "), (" ,\n", " :\t")])))
    data = text.encode("utf-8", "surrogatepass")
    for _ in range(draw(st.integers(min_value=0, max_value=2))):
        at = draw(st.integers(min_value=0, max_value=len(data)))
        edit = draw(st.sampled_from([b"", b'"', b"\\", b"{", b"}", b",", b"\xff", b"\x00", b"\\u", b" "]))
        data = data[:at] + edit + data[at + draw(st.integers(min_value=0, max_value=1)):]
    return data


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(document=documents())
def test_generated_documents(place: Place, document: bytes):
    config_path = json.dumps(str(place.servers["config"].path))[1:-1].encode()
    document = document.replace(json.dumps(SERVER_SOCKET_PLACEHOLDER)[1:-1].encode(), config_path)
    assert_same(both(document, base_env("VERSION", place.missing)))
    assert_same(both(document, base_env("ADD", place.servers["env"].path), place))

"""The ClientHello's verdict (relay/hello.c, through the relay module's `hello`), on hellos from OpenSSL and on
hand-built and random bytes, whole and in pieces as the proxy reads them."""
import random

import pytest

from services.proxy import relay
from services.proxy.relay import load
from tests.unit.proxy.hello_bytes import (as_records, built_hello, client_hello, huge_hello, long_hello, reframe,
                                          server_name_extension)

lib = load()
hello = lib.hello
ClientHelloError = lib.ClientHelloError
MAX_BUFFERED, MAX_HELLO_LENGTH, NO_SNI, NOT_TLS = lib.MAX_BUFFERED, lib.MAX_HELLO_LENGTH, lib.NO_SNI, lib.NOT_TLS


def read(data: bytes, chunk: int | None = None) -> str | int | None:
    """The verdict as the proxy gets it: the bytes so far, asked again once there are as many as it said it needs.
    None: more bytes are needed."""
    if chunk is None:
        verdict = hello(data)
        return None if isinstance(verdict, int) and verdict > 0 else verdict
    buffered = bytearray()
    needed = 1
    for pos in range(0, len(data), chunk):
        buffered += data[pos:pos + chunk]
        if len(buffered) < needed:
            continue
        verdict = hello(buffered)
        if not isinstance(verdict, int) or verdict <= 0:
            return verdict
        assert verdict > len(buffered)
        needed = verdict
    return None


def test_sni_from_a_real_hello_is_lowercased():
    assert read(client_hello("Pass.Example.COM")) == "pass.example.com"


def test_hello_without_sni():
    assert read(client_hello(None)) == NO_SNI


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 100])
def test_hello_split_across_segments(chunk):
    assert read(client_hello("split.example"), chunk) == "split.example"


@pytest.mark.parametrize("sizes", [[1] * 600, [4, 1, 3], [100, 100, 100], [37]])
def test_hello_fragmented_over_records(sizes):
    flight = reframe(client_hello("records.example"), sizes)
    assert read(flight) == "records.example"
    assert read(flight, 1) == "records.example"


def test_an_incomplete_hello_says_how_many_bytes_are_needed_in_all():
    flight = reframe(client_hello("needed.example"), [100, 100, 10_000])
    assert hello(b"") == 1
    assert hello(flight[:3]) == 5  # a record header
    assert hello(flight[:5]) == hello(flight[:104]) == 105  # the first record
    assert hello(flight[:105]) == 110  # the next record's header
    assert hello(flight) == "needed.example"


@pytest.mark.parametrize("data", [b"GET / HTTP/1.1\r\n", b"\x80\x2e\x01\x00\x02", b"\x16\x02\x00", b"\x00"])
def test_not_tls(data):
    assert read(data) == NOT_TLS


def test_not_tls_is_decided_from_the_first_byte():
    assert hello(b"G") == NOT_TLS


def test_incomplete_hello_needs_more():
    flight = client_hello("more.example")
    assert read(flight[:-1]) is None
    assert read(b"") is None


def test_no_extensions_block_means_no_sni():
    assert read(as_records(built_hello(None))) == NO_SNI


def test_trailing_dot_is_dropped():
    ext = server_name_extension((0, b"dot.example."))
    assert read(as_records(built_hello(ext))) == "dot.example"


def test_unknown_name_types_are_skipped():
    ext = server_name_extension((7, b"\x00\x01"), (0, b"typed.example"))
    assert read(as_records(built_hello(ext))) == "typed.example"


def test_oversized_hello_is_refused_from_its_header():
    flight = huge_hello("big.example")
    assert len(flight) > 64 * 1024
    with pytest.raises(ClientHelloError, match="exceeds the limit"):
        hello(flight[:16 * 1024 + 5])


def test_hello_at_the_limit_is_read():
    base = len(long_hello("limit.example", 0)) - 4
    message = long_hello("limit.example", (MAX_HELLO_LENGTH - base) // 2)
    assert MAX_HELLO_LENGTH - 2 < len(message) - 4 <= MAX_HELLO_LENGTH
    assert read(as_records(message, 1000)) == "limit.example"


def test_too_many_tiny_records_are_refused():
    flight = as_records(long_hello("tiny.example", 4000), record_size=1)
    with pytest.raises(ClientHelloError, match="no complete ClientHello within"):
        read(flight, 4096)


@pytest.mark.parametrize("flight, reason", [
    (b"\x16\x03\x01\x00\x00", "empty handshake record"),
    (b"\x16\x03\x01\x40\x01" + b"\x01" * 16385, "exceeds the TLS limit"),
    (b"\x16\x03\x01\x00\x04\x02\x00\x00\x00", "not ClientHello"),
    (as_records(built_hello(None)[:40]) + b"\x15\x03\x03\x00\x02\x02\x28", "content type 21"),
    (as_records(built_hello(None, version=b"\x02\x00")), "version is not TLS"),
    (as_records(built_hello(None, session_id=b"s" * 33)), "longer than 32"),
    (as_records(built_hello(None, cipher_suites=b"\x13")), "cipher_suites"),
    (as_records(built_hello(server_name_extension((0, b"a.example"), (0, b"b.example")))), "two host_name"),
    (as_records(built_hello(server_name_extension((0, b"bad host")))), "not a valid DNS name"),
    (as_records(built_hello(server_name_extension((0, "hé.example".encode())))), "not ASCII"),
    (as_records(built_hello(b"\x00\x00\x00\x02\x00\x00")), "empty server_name_list"),
    (as_records(built_hello(b"\x00\x00\x00\x09")), "truncated in extension 0"),
], ids=lambda value: value if isinstance(value, str) else "flight")  # the hellos' random bytes differ per process
def test_malformed_hellos_say_what_is_wrong(flight, reason):
    with pytest.raises(ClientHelloError, match=reason):
        read(flight)


def test_random_input_only_ever_raises_its_own_error():
    rng = random.Random(8446)
    real = [client_hello("fuzz.example"), client_hello(None), reframe(client_hello("f.example"), [3, 50, 2])]
    for _ in range(3000):
        choice = rng.random()
        if choice < 0.3:
            data = bytes(rng.getrandbits(8) for _ in range(rng.randrange(1, 600)))
            data = b"\x16\x03" + data if rng.random() < 0.7 else data
        else:
            data = bytearray(rng.choice(real))
            for _ in range(rng.randrange(1, 8)):
                data[rng.randrange(len(data))] = rng.getrandbits(8)
            if rng.random() < 0.3:
                data = data[:rng.randrange(len(data))]
        try:
            result = read(bytes(data), rng.choice([None, 1, 7, 64]))
        except ClientHelloError:
            continue
        assert result is None or result in (NO_SNI, NOT_TLS) or isinstance(result, str)


def test_a_hello_in_one_read_gets_the_verdict_of_the_hello_in_pieces():
    """The verdict depends on the bytes only, not on how they were read: whole, or a byte at a time."""
    rng = random.Random(5246)
    real = [client_hello("whole.example"), client_hello(None), as_records(built_hello(None))]
    for _ in range(2000):
        data = bytearray(rng.choice(real))
        for _ in range(rng.randrange(0, 4)):
            data[rng.randrange(len(data))] = rng.getrandbits(8)
        data = bytes(data) + bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 4)))
        verdicts = []
        for chunk in (None, 1):
            try:
                verdicts.append(read(data, chunk))
            except ClientHelloError:
                verdicts.append(ClientHelloError)
        assert verdicts[0] == verdicts[1], data.hex()


@pytest.mark.parametrize("sent, verdict", [
    (b"HOST-1.Example", "host-1.example"),
    (b"_srv.a-b.example.", "_srv.a-b.example"),
    (b"x" * 63 + b".example", "x" * 63 + ".example"),
    (b"a." * 126 + b"b", "a." * 126 + "b"),  # 253 characters
    (b"a." * 126 + b"b.", "a." * 126 + "b"),
    (b"x" * 64 + b".example", None),  # a label of 64
    (b"a." * 126 + b"bc", None),  # 254 characters
    (b"a..example", None),
    (b".example", None),
    (b"example..", None),
    (b".", None),
    (b"", None),
    (b"a\x00b", None),
    (b"a*.example", None),
])
def test_host_names_are_lowercased_and_checked(sent, verdict):
    flight = as_records(built_hello(server_name_extension((0, sent))))
    if verdict is None:
        with pytest.raises(ClientHelloError, match="not a valid DNS name"):
            read(flight)
    else:
        assert read(flight) == verdict


def test_every_cut_of_a_hello_and_every_byte_changed_stay_in_bounds():
    """Each prefix of fragmented hellos, and each of their bytes set to the values that matter to lengths: what it
    reads is within the bytes given. test_hello_sanitized.py runs it against the module built with AddressSanitizer,
    each hello in an allocation of exactly its size (exact_buffers.py): a bytes object's trailing NUL would hide a read
    one byte too far."""
    flights = [reframe(client_hello("bounds.example"), [1, 3, 200]),
               as_records(built_hello(server_name_extension((7, b"\x00\x01"), (0, b"b.example"))), 40)]
    for flight in flights:
        for end in range(len(flight) + 1):
            try:
                hello(bytes(flight[:end]))
            except ClientHelloError:
                pass
        for pos in range(len(flight)):
            for value in (0, 1, 2, 3, 4, 5, 0x16, 0x3f, 0x40, 0x7f, 0x80, 0xfe, 0xff):
                data = bytearray(flight)
                data[pos] = value
                try:
                    hello(bytes(data))
                except ClientHelloError:
                    pass


def test_the_first_server_name_decides_and_what_follows_is_left_to_the_tls_server():
    """As ingress-nginx's passthrough proxy: the extensions after the first server_name are not read. A second
    server_name, or a broken extension after it, reaches the TLS server routed to, which refuses the hello."""
    first = server_name_extension((0, b"a.example"))
    assert read(as_records(built_hello(first + server_name_extension((0, b"b.example"))))) == \
        "a.example"
    assert read(as_records(built_hello(first + b"\x00\x10\x00\x09"))) == "a.example"
    with pytest.raises(ClientHelloError, match="truncated in extension 16"):
        read(as_records(built_hello(b"\x00\x10\x00\x09")))  # before any server_name: still refused


def test_the_proxy_names_the_verdicts_as_the_module_does():
    assert (relay.NO_SNI, relay.NOT_TLS) == (NO_SNI, NOT_TLS)

"""The incremental ClientHello reader, on hellos from OpenSSL and on hand-built and random bytes."""
import random

import pytest

from services.proxy import clienthello
from services.proxy.clienthello import (MAX_BUFFERED, MAX_HELLO_LENGTH, SEEN_NAMES_KEPT, ClientHelloError,
                                        ClientHelloReader, Hello, HelloKind)
from tests.unit.proxy.hello_bytes import (as_records, built_hello, client_hello, huge_hello, long_hello, reframe,
                                          server_name_extension)


def read(data: bytes, chunk: int | None = None) -> Hello | None:
    reader = ClientHelloReader()
    if chunk is None:
        return reader.feed(data)
    result = None
    for pos in range(0, len(data), chunk):
        result = reader.feed(data[pos:pos + chunk])
        if result is not None:
            break
    return result


def test_sni_from_a_real_hello_is_lowercased():
    assert read(client_hello("Pass.Example.COM")) == Hello(HelloKind.SNI, "pass.example.com")


def test_hello_without_sni():
    assert read(client_hello(None)) == Hello(HelloKind.NO_SNI)


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 100])
def test_hello_split_across_segments(chunk):
    assert read(client_hello("split.example"), chunk) == Hello(HelloKind.SNI, "split.example")


@pytest.mark.parametrize("sizes", [[1] * 600, [4, 1, 3], [100, 100, 100], [37]])
def test_hello_fragmented_over_records(sizes):
    flight = reframe(client_hello("records.example"), sizes)
    assert read(flight) == Hello(HelloKind.SNI, "records.example")
    assert read(flight, 1) == Hello(HelloKind.SNI, "records.example")


def test_raw_keeps_every_byte_fed_for_replay():
    flight = client_hello("replay.example") + b"trailing application bytes"
    reader = ClientHelloReader()
    for pos in range(0, len(flight), 50):
        reader.feed(flight[pos:pos + 50])
    assert bytes(reader.raw) == flight


@pytest.mark.parametrize("data", [b"GET / HTTP/1.1\r\n", b"\x80\x2e\x01\x00\x02", b"\x16\x02\x00", b"\x00"])
def test_not_tls(data):
    assert read(data) == Hello(HelloKind.NOT_TLS)


def test_not_tls_is_decided_from_the_first_byte():
    assert ClientHelloReader().feed(b"G") == Hello(HelloKind.NOT_TLS)


def test_incomplete_hello_needs_more():
    flight = client_hello("more.example")
    assert read(flight[:-1]) is None
    assert ClientHelloReader().feed(b"") is None


def test_no_extensions_block_means_no_sni():
    assert read(as_records(built_hello(None))) == Hello(HelloKind.NO_SNI)


def test_trailing_dot_is_dropped():
    ext = server_name_extension((0, b"dot.example."))
    assert read(as_records(built_hello(ext))) == Hello(HelloKind.SNI, "dot.example")


def test_unknown_name_types_are_skipped():
    ext = server_name_extension((7, b"\x00\x01"), (0, b"typed.example"))
    assert read(as_records(built_hello(ext))) == Hello(HelloKind.SNI, "typed.example")


def test_oversized_hello_is_refused_from_its_header():
    flight = huge_hello("big.example")
    assert len(flight) > 64 * 1024
    reader = ClientHelloReader()
    with pytest.raises(ClientHelloError, match="exceeds the limit"):
        reader.feed(flight[:16 * 1024 + 5])
    assert len(reader.raw) < MAX_BUFFERED


def test_hello_at_the_limit_is_read():
    base = len(long_hello("limit.example", 0)) - 4
    message = long_hello("limit.example", (MAX_HELLO_LENGTH - base) // 2)
    assert MAX_HELLO_LENGTH - 2 < len(message) - 4 <= MAX_HELLO_LENGTH
    assert read(as_records(message, 1000)) == Hello(HelloKind.SNI, "limit.example")


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
        assert result is None or isinstance(result, Hello)


def test_a_hello_in_one_read_gets_the_verdict_of_the_hello_in_pieces():
    """A hello whole in its first bytes is parsed in place; the incremental reader is the reference."""
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


def test_the_names_remembered_stay_bounded_and_right():
    for i in range(SEEN_NAMES_KEPT + 10):
        name = f"host-{i}.example"
        assert read(as_records(built_hello(server_name_extension((0, name.encode()))))) == Hello(HelloKind.SNI, name)
    assert len(clienthello._SEEN_NAMES) <= SEEN_NAMES_KEPT
    assert read(client_hello("HOST-1.example")) == Hello(HelloKind.SNI, "host-1.example")


def test_the_first_server_name_decides_and_what_follows_is_left_to_the_tls_server():
    """As ingress-nginx's passthrough proxy: the extensions after the first server_name are not read. A second
    server_name, or a broken extension after it, reaches the TLS server routed to, which refuses the hello."""
    first = server_name_extension((0, b"a.example"))
    assert read(as_records(built_hello(first + server_name_extension((0, b"b.example"))))) == \
        Hello(HelloKind.SNI, "a.example")
    assert read(as_records(built_hello(first + b"\x00\x10\x00\x09"))) == Hello(HelloKind.SNI, "a.example")
    with pytest.raises(ClientHelloError, match="truncated in extension 16"):
        read(as_records(built_hello(b"\x00\x10\x00\x09")))  # before any server_name: still refused

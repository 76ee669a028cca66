import msgpack
import pytest

from proto import (ITEMS_ENVELOPE_BYTES, PROTOCOL_VERSION, ProtocolError, decode, encode, encode_snapshot,
                   encode_snapshot_part, encode_update, encode_updates, item_bytes, pack_value)


def test_round_trip_keeps_type_seq_and_body():
    env = decode(encode("clone.update", {"epoch": "e1", "key": "Ingress/ns/a", "value": {"x": 1}}, seq=7))
    assert (env.type, env.seq, env.body["key"], env.body["value"]) == ("clone.update", 7, "Ingress/ns/a", {"x": 1})


def test_messages_of_packed_values_are_the_messages_encode_gives():
    items = [("Ingress/ns/a", {"spec": {"rules": [{"host": "a.example"}]}, "n": 1.5}), ("Service/ns/b", [1, "x", None]),
             ("ConfigMap/ns/c", {"data": {"k": "v" * 300}, "bytes": b"\x00\x01"})]
    spliced = encode_snapshot("e1", 42, [(key, pack_value(value)) for key, value in items])
    assert spliced == encode("clone.snapshot", {"epoch": "e1", "items": [[k, v] for k, v in items]}, seq=42)
    env = decode(spliced)
    assert (env.type, env.seq, env.body["items"]) == ("clone.snapshot", 42, [[k, v] for k, v in items])
    assert decode(encode_snapshot("e2", 0, [])).body == {"epoch": "e2", "items": []}
    batch = encode_updates("e1", 9, [(key, pack_value(value)) for key, value in items])
    assert batch == encode("clone.updates", {"epoch": "e1", "items": [[k, v] for k, v in items]}, seq=9)
    for key, value in items:
        spliced = encode_update("e1", 7, key, pack_value(value))
        assert spliced == encode("clone.update", {"epoch": "e1", "key": key, "value": value}, seq=7)
        assert decode(spliced).body == {"epoch": "e1", "key": key, "value": value}


def test_snapshot_parts_and_their_end_are_the_messages_encode_gives():
    items = [("Secret/ns/a", {"data": {"k": "v" * 70_000}}), ("Secret/ns/é", None)]
    packed = [(key, pack_value(value)) for key, value in items]
    pairs = [[k, v] for k, v in items]
    part = encode_snapshot_part("e1", 42, 3, packed)
    assert part == encode("clone.snapshot_part", {"epoch": "e1", "part": 3, "items": pairs}, seq=42)
    end = encode_snapshot("e1", 42, packed, parts=4)
    assert end == encode("clone.snapshot", {"epoch": "e1", "parts": 4, "items": pairs}, seq=42)
    assert decode(end).body == {"epoch": "e1", "parts": 4, "items": pairs}
    # item_bytes bounds what each item adds; ITEMS_ENVELOPE_BYTES the rest, for an epoch of up to 64 characters.
    for message in (encode_snapshot_part("e" * 64, 2**63, 2**31, packed), encode_snapshot("e" * 64, 2**63, packed,
                                                                                           parts=2**31)):
        assert len(message) <= sum(item_bytes(k, v) for k, v in packed) + ITEMS_ENVELOPE_BYTES


def test_unknown_protocol_version_is_rejected_with_both_versions_named():
    data = msgpack.packb({"v": 99, "type": "clone.heartbeat", "seq": 0, "body": {"epoch": "e"}})
    with pytest.raises(ProtocolError, match=f"unsupported protocol version 99.*speaks {PROTOCOL_VERSION}"):
        decode(data)


@pytest.mark.parametrize("payload, reason", [
    (b"\xc1garbage", "not valid msgpack"),
    (msgpack.packb([1, 2]), "must be a map"),
    (msgpack.packb({"v": 1, "type": "clone.heartbeat", "seq": 0}), "lacks envelope field"),
    (msgpack.packb({"v": 1, "type": "nope", "seq": 0, "body": {}}), "unknown message type"),
    (msgpack.packb({"v": 1, "type": "clone.heartbeat", "seq": -1, "body": {"epoch": "e"}}), "non-negative"),
    (msgpack.packb({"v": 1, "type": "clone.heartbeat", "seq": 0, "body": {}}), "missing field 'epoch'"),
    (msgpack.packb({"v": 1, "type": "clone.heartbeat", "seq": 0, "body": {"epoch": 3}}), "must be str"),
    (msgpack.packb({"v": 1, "type": "clone.heartbeat", "seq": 0, "body": {"epoch": "e", "x": 1}}), "unknown field"),
    (msgpack.packb({"v": 1, "type": "clone.updates", "seq": 2, "body": {"epoch": "e", "items": [["k", 1], ["k"]]}}),
     r"field 'items'\[1\] must be \[str, object\]"),
])
def test_malformed_messages_are_rejected_with_the_reason(payload, reason):
    with pytest.raises(ProtocolError, match=reason):
        decode(payload)


def test_encode_refuses_a_body_receivers_would_reject():
    with pytest.raises(ProtocolError, match="missing field 'id'"):
        encode("cni.reply", {"ok": True})

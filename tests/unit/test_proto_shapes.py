"""Message bodies are checked in depth: a bad item anywhere inside a field is a ProtocolError saying where."""
import msgpack
import pytest

from proto import ProtocolError, decode, encode


def packed(msg_type: str, body: dict) -> bytes:
    """What a buggy or hostile peer could send: packed directly, past encode's own check."""
    return msgpack.packb({"v": 1, "type": msg_type, "seq": 0, "body": body}, use_bin_type=True)


def request(env) -> dict:
    return {"id": "r1", "env": env, "config": b"{}"}


@pytest.mark.parametrize("msg_type, body, reason", [
    ("clone.snapshot", {"epoch": "e", "items": [["a", 1], [5, 2]]},
     r"field 'items'\[1\]\[0\] must be str, got int"),
    ("clone.snapshot", {"epoch": "e", "items": [["a", 1], "b"]},
     r"field 'items'\[1\] must be \[str, object\], got str"),
    ("clone.snapshot", {"epoch": "e", "items": [["a", 1, 2]]},
     r"field 'items'\[0\] must be \[str, object\], got list of 3 item"),
    ("clone.snapshot", {"epoch": "e", "items": {"a": 1}},
     r"field 'items' must be list of \[str, object\], got dict"),
    ("clone.snapshot_part", {"epoch": "e", "part": "1", "items": []}, r"field 'part' must be int, got str"),
    ("clone.snapshot_part", {"epoch": "e", "items": []}, r"missing field 'part'"),
    ("clone.snapshot", {"epoch": "e", "parts": True, "items": []}, r"field 'parts' must be int, got bool"),
    ("cni.request", request({"CNI_COMMAND": "ADD", "CNI_ARGS": None}),
     r"field 'env'\['CNI_ARGS'\] must be str, got nil"),
    ("cni.request", request({"CNI_COMMAND": "ADD", 7: "x"}), r"field 'env' key 7 must be str, got int"),
    ("cni.request", request({"CNI_COMMAND": b"ADD"}), r"field 'env'\['CNI_COMMAND'\] must be str, got bytes"),
    ("cni.request", request(["CNI_COMMAND=ADD"]), r"field 'env' must be map of str to str, got list"),
    ("cni.reply", {"id": "r1", "ok": False, "error": "no route"}, r"field 'error' must be map of str to object"),
    ("cni.reply", {"id": "r1", "ok": True, "result": [1, 2]}, r"field 'result' must be map of str to object"),
    ("cni.reply", {"id": "r1", "ok": True, "result": {1: "x"}}, r"field 'result' key 1 must be str"),
    ("cni.worker_ready", {"pid": True}, r"field 'pid' must be int, got bool"),
])
def test_a_bad_inner_shape_is_a_protocol_error_naming_the_place(msg_type, body, reason):
    with pytest.raises(ProtocolError, match=f"^{msg_type}: {reason}"):
        decode(packed(msg_type, body))
    with pytest.raises(ProtocolError, match=reason):
        encode(msg_type, body)  # a sender cannot emit it either


def test_a_long_bad_key_is_shortened_in_the_message():
    with pytest.raises(ProtocolError) as caught:
        decode(packed("cni.request", request({"K" * 1000: 1})))
    assert len(str(caught.value)) < 200


def test_well_formed_nested_bodies_pass_unchanged():
    items = [["Ingress/ns/a", {"spec": {"rules": []}}], ["Service/ns/a", None]]
    assert decode(encode("clone.snapshot", {"epoch": "e", "items": items})).body["items"] == items
    env = {"CNI_COMMAND": "DEL", "CNI_CONTAINERID": "c1"}
    assert decode(encode("cni.request", request(env))).body["env"] == env
    reply = {"id": "r1", "ok": False, "error": {"code": 11, "msg": "later", "details": ""}}
    assert decode(encode("cni.reply", reply)).body == reply

"""Messages exchanged between pyngress processes: envelope, codec, types and endpoint names."""
from proto.codec import (PROTOCOL_VERSION, Envelope, ProtocolError, decode, encode, encode_snapshot, encode_update,
                         encode_updates, pack_value, unpack_value)

__all__ = ["PROTOCOL_VERSION", "Envelope", "ProtocolError", "decode", "encode", "encode_snapshot", "encode_update",
           "encode_updates", "pack_value", "unpack_value"]

"""The largest message each channel accepts: every socket that receives from another process sets
`zmq.MAXMSGSIZE` to one of these.

Without a limit a peer can announce a message of any length and the receiver allocates it. A message
over the limit never reaches the application: libzmq drops it with the connection it came on. The peer
of a bound socket then reconnects by itself; a connecting socket is not reconnected by libzmq (it counts
as a protocol error), so the clone subscriber reconnects when it hears nothing, and the broker never
sends a cniworker more than the cniserver's HTTP body limit lets in.
"""
from __future__ import annotations

import os

MIB = 1 << 20

CLONE_MAX_MESSAGE_BYTES_VARIABLE = "PYNGRESS_CLONE_MAX_MESSAGE_BYTES"
# Below this, a clone message could not hold an ordinary object (a Secret of a certificate chain and a key).
CLONE_MIN_MESSAGE_BYTES = 64 * 1024


def _clone_max_message_bytes(default: int) -> int:
    text = os.environ.get(CLONE_MAX_MESSAGE_BYTES_VARIABLE)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < CLONE_MIN_MESSAGE_BYTES:
        raise ValueError(f"{CLONE_MAX_MESSAGE_BYTES_VARIABLE}={text!r}: expected a whole number of bytes of at least "
                         f"{CLONE_MIN_MESSAGE_BYTES}; unset it for the default, {default}")
    return value


# Clone updates and snapshots (the watcher's object store, the syncer's passthrough table). No store has to
# fit: a snapshot larger than a message travels in parts and a batch of updates is cut to fit
# (services/common/clone_parts.py). What must fit is one object: one an API server keeps is under etcd's
# 1.5 MiB request limit (about as large packed with this codec), so Kubernetes objects always fit; a larger
# one (a manifests file can hold any) is refused alone by the publisher, with its key and size in its log.
# 256 MiB was sized when the whole store travelled in one message (a 10,000-Ingress cluster with a TLS Secret
# per Ingress: 85 MiB packed, measured); it stays as the bound a peer can make a receiver allocate.
# PYNGRESS_CLONE_MAX_MESSAGE_BYTES sets another limit for every process that inherits the environment (`pyngress
# up` passes it to each program; all of one instance must see the same): the tests run a controller whose store
# is several times its limit.
CLONE_MAX_MESSAGE_BYTES = _clone_max_message_bytes(256 * MIB)

# What a clone publisher receives: subscriptions and snapshot requests, both a few bytes.
CLONE_REQUEST_MAX_MESSAGE_BYTES = 64 * 1024

# CNI requests and replies. A request is the CNI_* variables (short strings) and the network
# configuration, which the cniserver already refuses over 1 MiB of HTTP body (the configuration arrives
# base64-encoded in it, so it is smaller still); a reply is a CNI result or error, a few KiB.
CNI_MAX_MESSAGE_BYTES = 2 * MIB

"""The largest message each channel accepts: every socket that receives from another process sets
`zmq.MAXMSGSIZE` to one of these.

Without a limit a peer can announce a message of any length and the receiver allocates it. A message
over the limit never reaches the application: libzmq drops it with the connection it came on. The peer
of a bound socket then reconnects by itself; a connecting socket is not reconnected by libzmq (it counts
as a protocol error), so the clone subscriber reconnects when it hears nothing, and the broker never
sends a cniworker more than the cniserver's HTTP body limit lets in.
"""
from __future__ import annotations

MIB = 1 << 20

# Clone updates and snapshots (the watcher's object store, the syncer's passthrough table). The whole
# store travels in one snapshot, so a 10,000-Ingress cluster must fit: 10,000 Ingresses + 10,000
# Services + 10,000 EndpointSlices shaped as an API server serves them (uid, labels, five annotations,
# TLS, status; three endpoints per slice; managedFields and kubectl's last-applied copy stripped as
# the watcher does) packed with this codec measured 29 MiB (about 1 KiB per object); a TLS Secret per
# Ingress (a two-certificate chain and an RSA key) adds 5.9 KB each, 56 MiB. 256 MiB leaves about three
# times that for fatter objects (more paths, more endpoints per slice). One update is one object, under
# the API server's 1.5 MiB limit, so it always fits too.
CLONE_MAX_MESSAGE_BYTES = 256 * MIB

# What a clone publisher receives: subscriptions and snapshot requests, both a few bytes.
CLONE_REQUEST_MAX_MESSAGE_BYTES = 64 * 1024

# CNI requests and replies. A request is the CNI_* variables (short strings) and the network
# configuration, which the cniserver already refuses over 1 MiB of HTTP body (the configuration arrives
# base64-encoded in it, so it is smaller still); a reply is a CNI result or error, a few KiB.
CNI_MAX_MESSAGE_BYTES = 2 * MIB

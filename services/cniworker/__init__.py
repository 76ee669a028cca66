"""The CNI worker: pod network setup and teardown (bridge, veth, IPAM on disk, routes, masquerade)."""

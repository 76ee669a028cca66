"""IP address management for one network, in the shape of the host-local IPAM plugin: an allocator
(`allocator`) over an allocation store (`store`: the protocol), kept on disk in host-local's layout
(`disk_store`) or in memory (`memory_store`, for tests and tools)."""

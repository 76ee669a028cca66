"""The configuration of one CNI call, parsed once into typed, frozen objects.

A CNI call has two inputs (CNI specification 1.1): the runtime's `CNI_*` environment and the network
configuration on the plugin's stdin. The cniserver parses both to refuse a bad request with the
specification's error code before anything runs; the cniworker parses the same two parts again when
the broker hands them over (they travel as sent, see `proto.schemas` "cni.request") and acts on the
typed objects only.

- `names`: the syntax of interface names, container IDs and network names;
- `runtime_env`: the `CNI_*` variables and `CNI_ARGS` → `RuntimeEnv`;
- `ipam`: the `ipam` section → `IpamSection`, resolved with the node's pod CIDR → `IpamConfig`;
- `network`: the network configuration → `NetworkConfig`;
- `request`: the plugin's HTTP body, `CniRequest` (runtime env + network configuration), VERSION;
- `node_pod_cidr`: the node's pod subnet (`--pod-cidr`, else its Node's `spec.podCIDR`).
"""

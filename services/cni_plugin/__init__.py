"""`pyngress-cni`: the CNI plugin executable, a thin shim that forwards each call to the CNI server."""

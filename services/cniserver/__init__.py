"""The CNI server: a root-only Unix-socket HTTP API in front of a load-balancing broker to the cniworkers."""

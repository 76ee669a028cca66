"""The `proxy` process: TLS by SNI on the HTTPS port (see main.py): passed through to a backend, handed to nginx, or
ended here for a TLS listener in Terminate mode (terminate.py)."""

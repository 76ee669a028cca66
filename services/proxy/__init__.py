"""The `proxy` process: TLS passthrough by SNI on the HTTPS port (see main.py)."""

"""What the syncer shows on the healthz port (healthz_server.py): /healthz, /metrics with ingress-nginx's
metric names (metrics.py, and the requests nginx's Lua records: request_collector.py), /status and the
read-only /dashboard.
"""

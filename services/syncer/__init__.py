"""The syncer process (main.py), in four parts by job:

- model/: the object store → the Model, pure (annotations/ parses an Ingress's annotations for it);
- nginx_apply/: the Model → nginx (nginx.conf, reloads, the tables pushed to Lua, worker files);
- ingress_status/: leader election and the status.loadBalancer of served Ingresses;
- observability/: the healthz port: /healthz, /metrics, /status and the dashboard.
"""

"""Applying a Model to nginx: render nginx.conf, `nginx -t`, reload only when it must (rate-limited), push
routes, backends and certificates to nginx's Lua, write the files its workers read, resolve ExternalName
endpoints, and report the table entries nginx refused. Start at applier.py (NginxApplier).
"""

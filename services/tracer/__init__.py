"""The tracer process (`pyngress tracer`): takes the spans nginx's Lua recorded (services/nginxconf/tracing.py,
templates/lua/pyngress/tracing.lua) from nginx's configuration socket and exports them over OTLP with the
OpenTelemetry SDK's exporter.

It runs beside nginx whenever the ingress side does, because the ConfigMap turns tracing on and off while the tree
runs; without tracing it asks nginx once a second and loads nothing of the SDK. Its settings come with the spans, from
the applied nginx.conf, so that it always follows what nginx does. Start reading at main.py; nginx_spans.py turns
nginx's records into SDK spans, export_queue.py holds them, bounded, until the exporter takes them.
"""

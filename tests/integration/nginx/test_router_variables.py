"""The router's variables through a real nginx: a request that leaves some of them unset (no error page to tell its
service port, no default-backend, no Gateway mirror) is answered as before and logs no warning about them."""
from __future__ import annotations

from dataclasses import replace

from services.syncer.model.types import HostRoutes, Route

HOST = "variables.example.test"


def test_routes_that_leave_variables_unset_answer_without_warnings(shared_nginx, echo):
    nginx = shared_nginx
    config = nginx.config()
    # The ConfigMap's custom-http-errors: 503 pages come from the error location, which reads the service port.
    nginx.apply(replace(config, server=replace(config.server, custom_http_errors=(503,))))
    web = echo("variables-web").endpoint
    nginx.push({HOST: HostRoutes(prefix={
        "/": Route("web", ingress="team/web", service="web", service_port="80"),
        "/hashed": Route("web", ingress="team/hashed", service="web", hash_by="$arg_id"),
        "/gone": Route("gone", ingress="team/gone", service="gone", service_port="8080")})},
        {"web": [web], "gone": []})
    assert nginx.get("/", host=HOST).backend == "variables-web"
    assert nginx.get("/hashed?id=1", host=HOST).backend == "variables-web"
    # No error location asks a default backend here: the built-in one answers the intercepted 503.
    assert nginx.get("/gone", host=HOST).status == 404

    # Without custom-http-errors no page reads the service port, and the router leaves it unset.
    nginx.apply(config)
    nginx.push({HOST: HostRoutes(prefix={"/": Route("web", ingress="team/web", service="web", service_port="80")})},
               {"web": [web]})
    assert nginx.get("/", host=HOST).backend == "variables-web"
    assert "uninitialized" not in nginx.log()

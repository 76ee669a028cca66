"""The table entries nginx refused become problems of the objects they came from (the Ingresses, the Secret)."""
from services.syncer.annotations.base import CanaryPolicy
from services.syncer.model.types import CanaryRoute, HostRoutes, Route
from services.syncer.nginx_apply.refused_entries import RefusedBackendUsers, refused_problems


def test_each_refused_entry_names_the_objects_it_came_from():
    routes = {
        "a.test": HostRoutes(prefix={"/": Route("ns-a-80", ingress="ns/a"), "/x": Route("ns-b-80", ingress="ns/b",
                             canary=CanaryRoute(backend="ns-c-80", ingress="ns/canary", policy=CanaryPolicy()))}),
        "other.test": HostRoutes(default=Route("ns-b-80", ingress="ns/other")),
    }
    refused = {"routes": {"a.test": "a.test: path /[ is not a regular expression nginx can use",
                          "gone.test": "host routes must be an object"},
               "backends": {"ns-c-80": "endpoint x is not <ip>:<port>", "ns-b-80": "y"},
               "certificates": {"certs/ns/tls": "certificate ns/tls: the private key is not the certificate's",
                                "hosts/a.test": "hosts/a.test names certificate ns/tls, which nginx does not hold",
                                "default": "default names certificate d/d, which nginx does not hold"}}

    lines = [str(problem) for problem in refused_problems(refused, routes, RefusedBackendUsers())]

    assert all(problem.is_error for problem in refused_problems(refused, routes, RefusedBackendUsers()))
    host = "nginx refused the routes of host a.test (a.test: path /[ is not a regular expression nginx can use)"
    assert lines[:4] == [f"Ingress ns/a: {host}; nginx keeps what it served before for it, if anything",
                         f"Ingress ns/b: {host}; nginx keeps what it served before for it, if anything",
                         f"Ingress ns/canary: {host}; nginx keeps what it served before for it, if anything",
                         "host gone.test: nginx refused the routes of host gone.test (host routes must be an "
                         "object); nginx keeps what it served before for it, if anything"]
    assert [line.split(":")[0] for line in lines[4:]] == [
        "Ingress ns/b", "Ingress ns/other", "Ingress ns/canary", "Secret ns/tls", "--default-ssl-certificate",
        "TLS host a.test"]


def test_nothing_refused_is_no_problem():
    assert refused_problems({"routes": {}, "backends": {}, "certificates": {}}, {}, RefusedBackendUsers()) == []

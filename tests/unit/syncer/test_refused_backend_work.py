"""While nginx refuses a backend's entry, each apply names the Ingresses routing to it: found once by a pass over every
route, then kept with each model's changed hosts. Counted (hosts whose routes were read), not timed, at two sizes;
before, every apply went through every route for as long as the entry stayed refused."""
from __future__ import annotations

import pytest

from services.syncer.model.types import HostRoutes, Route
from services.syncer.nginx_apply.refused_entries import RefusedBackendUsers, refused_problems


def ingresses_of_refused(users: RefusedBackendUsers, routes: dict[str, HostRoutes], changed) -> tuple[list[str], int]:
    """(the Ingresses the refused backend "ns-bad-80" is reported for, hosts read) by one apply."""
    before = users.hosts_looked_at
    refused = {"routes": {}, "backends": {"ns-bad-80": "endpoint x is not <ip>:<port>"}, "certificates": {}}
    problems = refused_problems(refused, routes, users, changed)
    return [problem.object for problem in problems], users.hosts_looked_at - before


@pytest.mark.parametrize("n", [100, 1000])
def test_a_refused_backend_costs_each_change_its_changed_hosts(n):
    routes = {f"h{i}.test": HostRoutes(prefix={"/": Route(f"ns-s{i}-80", ingress=f"ns/i{i}")}) for i in range(n)}
    routes["h0.test"] = HostRoutes(prefix={"/": Route("ns-bad-80", ingress="ns/i0")})
    users = RefusedBackendUsers()
    # Newly refused: one pass over every host.
    assert ingresses_of_refused(users, routes, frozenset()) == (["Ingress ns/i0"], n)
    # Still refused, one host changed to route to it too: that host alone.
    routes = {**routes, "h5.test": HostRoutes(prefix={"/": Route("ns-bad-80", ingress="ns/i5")})}
    assert ingresses_of_refused(users, routes, frozenset({"h5.test"})) == (["Ingress ns/i0", "Ingress ns/i5"], 1)
    # Nothing changed: nothing read.
    assert ingresses_of_refused(users, routes, frozenset()) == (["Ingress ns/i0", "Ingress ns/i5"], 0)
    # A host gone.
    routes = {host: host_routes for host, host_routes in routes.items() if host != "h0.test"}
    assert ingresses_of_refused(users, routes, frozenset({"h0.test"})) == (["Ingress ns/i5"], 1)
    # Any host may have changed (a model built afresh): every host again.
    assert ingresses_of_refused(users, routes, None) == (["Ingress ns/i5"], n - 1)

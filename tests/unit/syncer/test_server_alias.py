"""server-alias: more names for an Ingress's first host, never taking a name an Ingress routes."""
import pytest

from services.syncer.annotations import ANNOTATIONS
from services.syncer.annotations.base import InvalidValue

PREFIX = "nginx.ingress.kubernetes.io"


@pytest.mark.parametrize("value, canonical", [
    ("a.example.com", "a.example.com"), (" A.example.com , *.b.example.com,a.example.com", "a.example.com,*.b.example.com"),
    ("bar", "bar"), ("localhost,", "localhost"),  # a single label, as ingress-nginx takes it
])
def test_accepted_values(value, canonical):
    assert ANNOTATIONS["server-alias"].validate(value) == canonical


@pytest.mark.parametrize("value", ["", "~^www\\d+\\.example\\.com$", "a.example.com;", "_", "*.localhost", "a..b.com",
                                   "*.*.example.com", "a.example.com b.example.com"])
def test_refused_values(value):
    with pytest.raises(InvalidValue, match="host name"):
        ANNOTATIONS["server-alias"].validate(value)


def test_an_alias_serves_the_routes_of_the_first_host(cluster):
    cluster.app("web", annotations={"server-alias": "alias.example.com,*.wild.example.com"})
    model = cluster.build()
    routes = model.routes_json()
    assert routes["alias.example.com"] == routes["*.wild.example.com"] == routes["app.example.com"]
    assert model.problem_lines() == []


def test_a_routed_name_is_never_taken_by_an_alias(cluster):
    cluster.app("web", annotations={"server-alias": "other.example.com"}, created=cluster.timestamp())
    cluster.app("other", host="other.example.com", created=cluster.timestamp())  # newer, still keeps its host
    cluster.app("late", host="late.example.com", annotations={"server-alias": "app.example.com"},
                created=cluster.timestamp())
    model = cluster.build()
    assert model.routes["other.example.com"].prefix["/"].ingress == "default/other"
    assert model.routes["app.example.com"].prefix["/"].ingress == "default/web"
    assert sorted(model.problem_lines()) == [
        "warning: Ingress default/late: server-alias app.example.com is served by Ingress default/web; skipped",
        "warning: Ingress default/web: server-alias other.example.com is served by Ingress default/other; skipped"]

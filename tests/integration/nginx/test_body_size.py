"""proxy-body-size as a client sees it: the route's profile decides the largest body, for Content-Length and
for chunked bodies alike (nginx checks Content-Length when it picks a location, a step that the named
location of a profile, entered with ngx.exec, skips)."""
import pytest

from services.nginxconf.config import LocationProfile
from services.syncer.model.types import HostRoutes

from .conftest import route

SMALL = LocationProfile("small", (("client_max_body_size", "1k"),))
LARGE = LocationProfile("large", (("client_max_body_size", "4m"),))
UNLIMITED = LocationProfile("unlimited", (("client_max_body_size", "0"),))


@pytest.fixture(scope="module")
def nginx(shared_nginx):
    # The global limit (ConfigMap proxy-body-size) of 64k applies to routes of the default profile.
    shared_nginx.apply(shared_nginx.config(profiles=[SMALL, LARGE, UNLIMITED],
                                           globals_={"client_max_body_size": "64k"}))
    return shared_nginx


@pytest.fixture
def routed(nginx, echo):
    app = echo("sized")
    nginx.push({"size.test": HostRoutes(prefix={"/small": route("app", profile="small"),
                                                "/large": route("app", profile="large"),
                                                "/unlimited": route("app", profile="unlimited"),
                                                "/": route("app")})},
               {"app": [app.endpoint]})
    return nginx


def _chunks(size: int):
    for _ in range(size // 1024):
        yield b"x" * 1024


@pytest.mark.parametrize("path, size, status", [
    ("/small", 512, 200), ("/small", 4096, 413),
    ("/", 60 * 1024, 200), ("/", 100 * 1024, 413),           # the global limit
    ("/large", 2 * 1024 * 1024, 200),                          # above the global limit, within its own
    ("/unlimited", 2 * 1024 * 1024, 200),
])
def test_content_length_bodies_follow_the_route_profiles_limit(routed, path, size, status):
    response = routed.get(path, host="size.test", method="POST", body=b"x" * size)
    assert response.status == status
    if status == 200:
        assert response.backend == "sized" and response.json["body_length"] == size


@pytest.mark.parametrize("path, size, status", [
    ("/small", 4096, 413), ("/small", 1024, 200), ("/", 100 * 1024, 413), ("/large", 2 * 1024 * 1024, 200),
])
def test_chunked_bodies_follow_the_route_profiles_limit(routed, path, size, status):
    # http.client sends an iterable body with Transfer-Encoding: chunked.
    response = routed.get(path, host="size.test", method="POST", body=_chunks(size))
    assert response.status == status


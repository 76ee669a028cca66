"""from-to-www-redirect through a real nginx: the other spelling answers 308 to the host, port and URI kept;
the host itself serves."""
from services.syncer.model.types import HostRoutes

from .conftest import route


def test_the_other_spelling_redirects_with_port_and_uri(shared_nginx, echo):
    shared_nginx.apply(shared_nginx.config())
    app = echo("www-app")
    shared_nginx.push({"www.shop.test": HostRoutes(prefix={"/": route("app")}),
                       "shop.test": HostRoutes(redirect_host="www.shop.test")}, {"app": [app.endpoint]})
    response = shared_nginx.get("/cart?id=1", host="shop.test:8080")
    assert response.status == 308
    assert response.headers["location"] == "http://www.shop.test:8080/cart?id=1"
    assert shared_nginx.get("/cart", host="www.shop.test").backend == "www-app"

"""from-to-www-redirect in the model: the other spelling of the host redirects to it, unless routed."""
import pytest

from services.syncer.annotations.www_redirect import other_spelling


@pytest.mark.parametrize("host, other", [("www.example.com", "example.com"), ("example.com", "www.example.com"),
                                         ("www.com", "www.www.com"), ("*.example.com", None), ("_", None),
                                         ("localhost", None)])
def test_other_spelling(host, other):
    assert other_spelling(host) == other


def test_the_other_spelling_redirects_unless_another_ingress_routes_it(cluster):
    cluster.app("www", host="www.shop.example", annotations={"from-to-www-redirect": "true"})
    cluster.app("blog", host="www.blog.example", annotations={"from-to-www-redirect": "true"})
    cluster.app("blog-bare", host="blog.example")
    model = cluster.build()
    routes = model.routes_json()
    assert routes["shop.example"]["redirect_host"] == "www.shop.example"
    assert "redirect_host" not in routes["blog.example"]
    assert any("blog.example is routed by Ingress default/blog-bare" in line for line in model.problem_lines())

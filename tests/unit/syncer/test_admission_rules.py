"""ConfigMap rules that refuse Ingresses as ingress-nginx's admission does: strict-validate-path-type and
annotation-value-word-blocklist. A refused Ingress gets a problem line that says what to change and no
route; the others keep theirs."""
import pytest

STRICT_OK = ["/", "/api", "/a.b_c-d/", "/V1/Users/"]
STRICT_REFUSED = ["/a~b", "/%41", "/a!b", "/a$b", "/a&b", "/(x)", "/a*b", "/a+b", "/a,b", "/a=b", "/a:b", "/a@b"]


@pytest.mark.parametrize("path", STRICT_OK)
@pytest.mark.parametrize("path_type", ["Prefix", "Exact"])
def test_strict_paths_accept_letters_digits_dot_underscore_dash_and_slash(cluster, path, path_type):
    cluster.app("good", host="good.example.com")
    cluster.ingress("web", paths=[(path, path_type, "good", 80)])
    model = cluster.build()
    assert not cluster.rejections(model)
    assert "app.example.com" in model.routes


@pytest.mark.parametrize("path", STRICT_REFUSED)
@pytest.mark.parametrize("path_type", ["Prefix", "Exact"])
def test_strict_paths_refuse_other_characters_by_default(cluster, path, path_type):
    cluster.app("good", host="good.example.com")
    cluster.ingress("web", paths=[(path, path_type, "good", 80)])
    model = cluster.build()
    [problem] = cluster.rejections(model)
    assert problem.startswith(f"Ingress default/web: host app.example.com path {path!r}: with pathType {path_type}")
    assert "strict-validate-path-type" in problem and "ImplementationSpecific" in problem
    assert "app.example.com" not in model.routes and "good.example.com" in model.routes


@pytest.mark.parametrize("path", STRICT_REFUSED)
def test_implementation_specific_paths_and_strict_off_take_the_wider_set(cluster, path):
    cluster.app("good", host="good.example.com")
    cluster.ingress("specific", host="specific.example.com", paths=[(path, "ImplementationSpecific", "good", 80)])
    cluster.ingress("prefix", host="prefix.example.com", paths=[(path, "Prefix", "good", 80)])
    cluster.configmap({"strict-validate-path-type": "false"})
    model = cluster.build()
    assert not cluster.rejections(model)
    assert {"specific.example.com", "prefix.example.com"} <= set(model.routes)


def test_blocked_words_refuse_the_ingress_naming_annotation_and_word(cluster):
    cluster.app("good", host="good.example.com", annotations={"proxy-read-timeout": "30"})
    cluster.app("bad", host="bad.example.com", annotations={"upstream-vhost": "internal.location.example"})
    cluster.configmap({"annotation-value-word-blocklist": "load_module, location ,,_by_lua"})
    model = cluster.build()
    [problem] = cluster.rejections(model)
    assert "nginx.ingress.kubernetes.io/upstream-vhost" in problem
    assert "'location'" in problem and "annotation-value-word-blocklist" in problem
    assert "bad.example.com" not in model.routes and "good.example.com" in model.routes


def test_blocked_words_apply_only_to_our_annotations_and_an_empty_list_blocks_nothing(cluster):
    cluster.app("other", host="other.example.com", annotations={"example.com/note": "a location"})
    cluster.app("ours", host="ours.example.com", annotations={"upstream-vhost": "internal.location.example"})
    cluster.configmap({"annotation-value-word-blocklist": "location"})
    model = cluster.build()
    assert "other.example.com" in model.routes and "ours.example.com" not in model.routes
    cluster.configmap({"annotation-value-word-blocklist": " , ,"})
    model = cluster.build()
    assert not cluster.rejections(model) and "ours.example.com" in model.routes

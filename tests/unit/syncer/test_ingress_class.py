import pytest

LEGACY = "kubernetes.io/ingress.class"


@pytest.mark.parametrize("class_name, legacy, settings, expected", [
    ("nginx", None, {}, True),
    ("other", None, {}, False),  # another controller's class
    ("missing", None, {}, False),  # no such IngressClass
    ("nginx", "other", {}, True),  # ingressClassName wins over the legacy annotation
    ("other", "nginx", {}, False),
    (None, "nginx", {}, True),
    (None, "other", {}, False),
    (None, "nginx", {"ingress_class": "custom"}, False),
    (None, "custom", {"ingress_class": "custom"}, True),
    (None, None, {}, False),
    (None, None, {"watch_ingress_without_class": True}, True),
    (None, "other", {"watch_ingress_without_class": True}, False),
    ("nginx", None, {"controller_class": "example.com/mine"}, False),
    ("other", None, {"controller_class": "example.com/other"}, True),
    # --ingress-class-by-name: the IngressClass named --ingress-class is ours whatever its controller.
    ("other", None, {"ingress_class": "other", "ingress_class_by_name": True}, True),
    ("missing", None, {"ingress_class": "missing", "ingress_class_by_name": True}, False),
    ("other", None, {"ingress_class": "other"}, False),
    ("missing", None, {"ingress_class_by_name": True}, False),
])
def test_which_ingresses_are_ours(cluster, class_name, legacy, settings, expected):
    cluster.ingress_class("other", controller="example.com/other")
    cluster.app(class_name=class_name, annotations={LEGACY: legacy} if legacy else None)
    model = cluster.build(**settings)
    assert ("app.example.com" in model.routes) is expected
    assert model.problem_lines() == []


@pytest.mark.parametrize("default_controller, expected", [
    ("k8s.io/ingress-nginx", True),  # our class is the default: classless Ingresses are ours
    ("example.com/other", False),  # another controller's default class takes them
])
def test_default_ingress_class_takes_classless_ingresses(cluster, default_controller, expected):
    cluster.ingress_class("the-default", controller=default_controller, default=True)
    cluster.app(class_name=None)
    assert ("app.example.com" in cluster.build().routes) is expected


def test_default_class_does_not_take_ingresses_with_another_legacy_class(cluster):
    cluster.ingress_class("the-default", default=True)
    cluster.app(class_name=None, annotations={LEGACY: "traefik"})
    assert cluster.build().routes == {}


def test_ingresses_of_other_classes_are_not_even_validated(cluster):
    cluster.ingress_class("other", controller="example.com/other")
    cluster.app(class_name="other", annotations={"configuration-snippet": "return 200;"})
    model = cluster.build()
    assert model.routes == {} and model.problem_lines() == []

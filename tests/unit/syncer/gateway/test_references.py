"""Cross-namespace references need a ReferenceGrant; refused ones answer 500 for their share (backends) or leave
the listener unserved (certificates)."""


def test_a_backend_in_another_namespace_needs_a_reference_grant(gw):
    o = gw.objects
    gw.app_service("api", ns="backend")
    gw.gateway(o.listener(hostname="app.example.com"))
    gw.route("cross", rules=[o.rule(o.backend_ref("api", ns="backend"))])
    [action] = gw.gateway_of(gw.build(), "app.example.com")["actions"]
    assert action["backends"] == [{"backend": None, "weight": 1}]
    gw.add(o.reference_grant("allow", ns="backend", from_namespace="default", version=f"{o.GROUP}/v1beta1"))
    [action] = gw.gateway_of(gw.build(), "app.example.com")["actions"]
    assert action["backends"] == [{"backend": "backend-api-80", "weight": 1, "service": "api"}]


def test_a_grant_for_another_namespace_or_kind_does_not_count(gw):
    o = gw.objects
    gw.app_service("api", ns="backend")
    gw.add(o.reference_grant("other-ns", ns="backend", from_namespace="elsewhere"))
    gw.add(o.reference_grant("other-kind", ns="backend", from_namespace="default", to_kind="Secret"))
    gw.gateway(o.listener(hostname="app.example.com"))
    gw.route("cross", rules=[o.rule(o.backend_ref("api", ns="backend"))])
    model = gw.build()
    [action] = gw.gateway_of(model, "app.example.com")["actions"]
    assert action["backends"][0]["backend"] is None
    assert any("RefNotPermitted" in w for w in gw.warnings(model))


def test_a_certificate_in_another_namespace_needs_a_grant_from_gateways(gw):
    o = gw.objects
    gw.certificate("shared-tls", ns="certs")
    gw.gateway(o.listener("https", port=443, protocol="HTTPS", hostname="app.example.com",
                          certificate="shared-tls", certificate_namespace="certs"))
    gw.route("web", parents=[{"name": "gw"}], rules=[o.rule(o.backend_ref("web"))])
    model = gw.build()
    assert "app.example.com" not in model.routes
    assert any("RefNotPermitted" in r for r in gw.rejections(model))
    gw.add(o.reference_grant("certs", ns="certs", from_namespace="default", from_kind="Gateway", to_kind="Secret"))
    model = gw.build()
    assert model.tls_secrets == {"app.example.com": "certs/shared-tls"}


def test_a_backend_of_another_kind_answers_500(gw):
    o = gw.objects
    gw.gateway(o.listener(hostname="app.example.com"))
    gw.route("odd", rules=[o.rule(o.backend_ref("web", kind="ConfigMap"))])
    model = gw.build()
    [action] = gw.gateway_of(model, "app.example.com")["actions"]
    assert action["backends"] == [{"backend": None, "weight": 1}]
    assert any("reason InvalidKind" in w for w in gw.warnings(model))

PASSTHROUGH = {"ssl-passthrough": "true"}


def test_passthrough_hosts_get_their_root_backend_endpoints_and_no_http_routes(cluster):
    cluster.service("tls-app", ports=[("https", 443)])
    cluster.endpoint_slice("tls-app", addresses=["10.0.0.2", "10.0.0.1"], port_name="https", port=8443)
    cluster.service("web")
    cluster.ingress("pt", annotations=PASSTHROUGH, rules=[
        cluster.rule("secure.example.com", ("/other", "Prefix", "web", 80), ("/", "Prefix", "tls-app", 443)),
        cluster.rule("first.example.com", ("/x", "Exact", "tls-app", "https")),
    ])
    model = cluster.build(enable_ssl_passthrough=True)
    assert model.passthrough == {"first.example.com": ["10.0.0.1:8443", "10.0.0.2:8443"],
                                 "secure.example.com": ["10.0.0.1:8443", "10.0.0.2:8443"]}
    assert model.routes == {} and model.backends == {}
    assert model.config.ssl_passthrough is True
    assert model.problem_lines() == []


def test_an_older_passthrough_ingress_keeps_its_host_against_newer_http_rules(cluster):
    cluster.app("pt", host="secure.example.com", annotations=PASSTHROUGH, created=cluster.timestamp(1))
    cluster.app("newer-http", host="secure.example.com", created=cluster.timestamp(2))
    model = cluster.build(enable_ssl_passthrough=True)
    assert list(model.passthrough) == ["secure.example.com"]
    assert model.routes == {}
    assert model.problem_lines() == ["warning: Ingress default/newer-http: host secure.example.com is passed through by SNI "
                              "for Ingress default/pt; its HTTP rules here are ignored"]


def test_a_newer_passthrough_ingress_cannot_take_a_host_an_older_ingress_routes(cluster):
    # Security first, attack 4: the newer Ingress must not receive the older one's TLS traffic.
    cluster.app("bank", host="bank.example.com", created=cluster.timestamp(1))
    cluster.app("thief", host="bank.example.com", annotations=PASSTHROUGH, addresses=["10.9.9.9"],
                created=cluster.timestamp(2))
    model = cluster.build(enable_ssl_passthrough=True)
    assert model.passthrough == {}
    assert model.routes["bank.example.com"].prefix["/"].ingress == "default/bank"
    assert model.problem_lines() == ["Ingress default/thief: ssl-passthrough refused: bank.example.com (Ingress "
                              "default/bank) is already routed by an older Ingress, and the oldest Ingress keeps "
                              "its host; use another host"]


def test_the_oldest_passthrough_ingress_wins_a_host(cluster):
    cluster.app("b", host="secure.example.com", addresses=["10.0.0.2"], annotations=PASSTHROUGH,
                created=cluster.timestamp(2))
    cluster.app("a", host="secure.example.com", addresses=["10.0.0.1"], annotations=PASSTHROUGH,
                created=cluster.timestamp(1))
    model = cluster.build(enable_ssl_passthrough=True)
    assert model.passthrough == {"secure.example.com": ["10.0.0.1:8080"]}
    assert "already passed through for Ingress default/a" in model.problem_lines()[0]


def test_passthrough_without_the_flag_is_ignored_with_a_warning(cluster):
    cluster.app(annotations=PASSTHROUGH)
    model = cluster.build()
    assert model.passthrough == {}
    assert "app.example.com" in model.routes
    assert model.problem_lines() == ["warning: Ingress default/web: annotation nginx.ingress.kubernetes.io/ssl-passthrough "
                              "is ignored: the controller runs without --enable-ssl-passthrough"]


def test_passthrough_needs_a_host(cluster):
    cluster.app(host=None, annotations=PASSTHROUGH)
    model = cluster.build(enable_ssl_passthrough=True)
    assert model.passthrough == {} and model.routes == {}
    assert "ssl-passthrough needs a host" in model.problem_lines()[0]


def test_passthrough_to_a_missing_service_has_no_endpoints(cluster):
    cluster.ingress("pt", host="secure.example.com", annotations=PASSTHROUGH)
    model = cluster.build(enable_ssl_passthrough=True)
    assert model.passthrough == {"secure.example.com": []}
    assert "Service default/web not found" in model.problem_lines()[0]

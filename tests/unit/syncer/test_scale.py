def test_ten_thousand_ingresses_services_and_endpoint_slices_build(cluster):
    for i in range(10_000):
        cluster.service(f"svc{i}", ns=f"ns{i % 50}")
        cluster.endpoint_slice(f"svc{i}", ns=f"ns{i % 50}", addresses=[f"10.{i // 250}.{i % 250}.1"])
        cluster.ingress(f"ing{i}", ns=f"ns{i % 50}", host=f"h{i}.example.com",
                        paths=[("/", "Prefix", f"svc{i}", 80)], created=cluster.timestamp(i),
                        annotations={"proxy-read-timeout": str(i % 5 + 1)})
    model = cluster.build()
    assert len(model.routes) == 10_000 and len(model.backends) == 10_000
    assert len(model.config.profiles) == 6
    assert model.problem_lines() == []

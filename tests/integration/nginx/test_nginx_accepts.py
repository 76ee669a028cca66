"""What the model emits for nginx.conf passes the real `nginx -t` once rendered by services.nginxconf.render."""
from services.nginxconf.config_check import check_file
from services.nginxconf.paths import NginxPaths
from services.nginxconf.prefix import prepare
from services.nginxconf.render import render
from tests.support.model_cluster import Cluster

# Every annotation whose settings are plain nginx directives, at the edges of what its validator accepts.
DIRECTIVE_ANNOTATIONS = [
    {"proxy-connect-timeout": "500ms", "proxy-send-timeout": "596h", "proxy-read-timeout": "0",
     "proxy-body-size": "1024g", "proxy-buffer-size": "8m", "proxy-buffering": "on",
     "proxy-request-buffering": "off", "proxy-http-version": "1.0", "upstream-vhost": "internal.example.com:8080"},
    {"permanent-redirect": "https://new.example.com:8443/a/b?x=1&y=%20#top", "permanent-redirect-code": "308",
     "allowlist-source-range": "10.0.0.0/8, 192.168.1.1, 2001:db8::/32"},
    {"temporal-redirect": "http://maint.example.com", "whitelist-source-range": "0.0.0.0/0"},
]
CONFIGMAP = {
    "proxy-connect-timeout": "10", "proxy-read-timeout": "120s", "proxy-send-timeout": "2m",
    "proxy-body-size": "0", "keep-alive": "30", "keep-alive-requests": "500", "client-header-timeout": "5",
    "client-body-timeout": "7s", "ssl-protocols": "TLSv1.2 TLSv1.3",
    "ssl-ciphers": "ECDHE-RSA-AES128-GCM-SHA256:!aNULL",
}


def test_rendered_profiles_and_globals_pass_nginx_t(tmp_path):
    cluster = Cluster()
    cluster.ingress_class()
    cluster.configmap(CONFIGMAP)
    for i, annotations in enumerate(DIRECTIVE_ANNOTATIONS):
        cluster.app(f"app{i}", host=f"app{i}.example.com", annotations=annotations)
    model = cluster.build(state_dir=str(tmp_path / "state"), run_dir=str(tmp_path / "run"))
    assert model.problem_lines() == [] and len(model.config.profiles) == 1 + len(DIRECTIVE_ANNOTATIONS)
    paths = NginxPaths.of(model.config.state_dir, model.config.run_dir)
    prepare(paths)
    paths.conf.write_text(render(model.config))
    check_file(paths, paths.conf)

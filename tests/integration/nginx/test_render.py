"""nginx.conf rendering: every value quoted, unsafe ones refused, and what renders passes the real `nginx -t`."""
from __future__ import annotations

import asyncio
import re
import shutil
import tempfile
from pathlib import Path

import pytest

from services.nginxconf.config import LocationProfile, NginxConfig
from services.nginxconf.paths import NginxPaths
from services.nginxconf.reload import NginxReloader
from services.nginxconf.render import RenderError, quote, render
from services.syncer.model.types import HostRoutes

from .conftest import route


def config(state_dir: str = "/var/lib/pyngress", **overrides) -> NginxConfig:
    values = dict(http_port=80, https_port=443,
                  state_dir=state_dir, run_dir="/var/run/pyngress")
    values.update(overrides)
    return NginxConfig(**values)


@pytest.fixture
def odd_dir():
    base = Path(tempfile.mkdtemp(prefix="pyngress-render-test-", dir="/tmp"))
    yield base / "state with 'quotes' \"and\" {braces}; \\"
    shutil.rmtree(base, ignore_errors=True)


def test_arguments_are_quoted_and_escaped():
    assert quote('a "b" \\c; } #d') == '"a \\"b\\" \\\\c; } #d"'


@pytest.mark.parametrize("value", ["$http_cookie", "a\nproxy_pass http://evil;", "nul\x00", "tab\there"])
def test_values_nginx_would_expand_or_split_are_refused(value):
    with pytest.raises(RenderError, match="cannot be written into nginx.conf"):
        render(config(globals={"proxy_read_timeout": value}))


@pytest.mark.parametrize("name", ["proxy_read_timeout;", "Include", "a b", "location /x {", ""])
def test_directive_names_must_be_plain_identifiers(name):
    with pytest.raises(RenderError, match="not an nginx directive name"):
        render(config(profiles=[LocationProfile("p", ((name, "1"),))]))


def test_profile_names_must_be_plain():
    with pytest.raises(RenderError, match="location profile name"):
        render(config(profiles=[LocationProfile("a b {")]))


def test_ports_nginx_listens_on_must_differ():
    with pytest.raises(RenderError, match="distinct ports"):
        render(config(http_port=8080, https_port=8080))


def test_globals_replace_the_defaults_and_the_output_is_stable():
    text = render(config(globals={"proxy_read_timeout": "120s", "ssl_protocols": "TLSv1.3"}))

    assert text.count("proxy_read_timeout") == 1 and 'proxy_read_timeout "120s";' in text
    assert 'ssl_protocols "TLSv1.3";' in text
    assert render(config(globals={"ssl_protocols": "TLSv1.3", "proxy_read_timeout": "120s"})) == text


def test_the_default_profile_always_exists():
    text = render(config(profiles=[LocationProfile("other")]))

    assert "location @profile_default {" in text and "location @profile_other {" in text


def test_a_profile_s_own_proxy_header_replaces_the_standard_one():
    text = render(config(profiles=[LocationProfile("vhost", (("proxy_set_header", "Host internal.example"),))]))
    vhost = text[text.index("location @profile_vhost"):]

    assert 'proxy_set_header "Host" "internal.example";' in vhost
    assert "$pyngress_best_http_host;\n" not in vhost.split("proxy_set_header \"X-Forwarded-Host\"")[0]


def test_odd_paths_render_into_a_config_nginx_accepts(odd_dir):
    run_dir = odd_dir.parent / "run 'q' {b}; \\"  # the Unix sockets' directory
    conf = config(state_dir=str(odd_dir), run_dir=str(run_dir), ssl_passthrough=True,
                  profiles=[LocationProfile("p", (("add_header", ("X-Odd", 'a "b" \\c; } #d')),))])

    asyncio.run(NginxReloader(NginxPaths.of(odd_dir, run_dir)).test(render(conf)))


def test_a_quoted_value_reaches_the_client_exactly(nginx_factory, echo):
    nginx = nginx_factory()
    app = echo("app")
    value = 'a "quoted" value; } # not a comment \\ end'
    nginx.apply(nginx.config(profiles=[LocationProfile("odd", (("add_header", ("X-Odd", value)),))]))
    nginx.push({"example.test": HostRoutes(prefix={"/": route("app", profile="odd")})}, {"app": [app.endpoint]})

    assert nginx.get("/").headers["x-odd"] == value


def test_passthrough_renders_the_internal_tls_socket_instead_of_the_https_port():
    text = render(config(ssl_passthrough=True))

    assert 'listen "unix:/var/run/pyngress/nginx/passthrough-tls.sock" ssl http2 proxy_protocol;' in text
    assert "listen 443" not in text


@pytest.mark.parametrize("ssl_passthrough", [False, True])
def test_internal_listeners_are_unix_sockets(ssl_passthrough):
    text = render(config(ssl_passthrough=ssl_passthrough))

    tcp = [a for a in re.findall(r"^\s*listen (\S+)", text, re.MULTILINE) if not a.startswith('"unix:')]
    assert tcp == (["80"] if ssl_passthrough else ["80", "443"])
    assert not re.search(r"\b(10246|442)\b", text)


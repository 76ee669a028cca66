"""Validators of the upstream-behaviour annotations and the response-buffer rules nginx enforces."""
import pytest

from services.syncer.annotations import InvalidAnnotation, parse_annotations

PREFIX = "nginx.ingress.kubernetes.io"


def directives(**annotations: str) -> list[tuple[str, str]]:
    parsed = parse_annotations({f"{PREFIX}/{k.replace('_', '-')}": v for k, v in annotations.items()}, prefix=PREFIX)
    return sorted((d.name, d.value) for d in parsed.directives)


def refusal(**annotations: str) -> str:
    """Why the values are refused: the Ingress's rejection (buffer sizes nginx would refuse together), or the
    warning that sets an invalid value aside (its default applies)."""
    try:
        parsed = parse_annotations({f"{PREFIX}/{k.replace('_', '-')}": v for k, v in annotations.items()},
                                   prefix=PREFIX)
    except InvalidAnnotation as err:
        return str(err)
    [warning] = parsed.warnings
    assert warning.endswith("; ignored, its default applies")
    return warning


@pytest.mark.parametrize("annotations, expected", [
    ({"proxy_next_upstream": "error  timeout http_502 error"}, [("proxy_next_upstream", "error timeout http_502")]),
    ({"proxy_next_upstream": "off"}, [("proxy_next_upstream", "off")]),
    ({"proxy_next_upstream_tries": "3", "proxy_next_upstream_timeout": "10"},
     [("proxy_next_upstream_timeout", "10s"), ("proxy_next_upstream_tries", "3")]),
    ({"proxy_redirect_from": "http://a.internal/", "proxy_redirect_to": "https://a.example.com/"},
     [("proxy_redirect", "http://a.internal/ https://a.example.com/")]),
    ({"proxy_redirect_from": "default"}, [("proxy_redirect", "off")]),
    ({"proxy_cookie_path": "/ /app"}, [("proxy_cookie_path", "/ /app")]),
    ({"proxy_cookie_domain": "off"}, [("proxy_cookie_domain", "off")]),
    ({"proxy_buffers_number": "8"}, [("proxy_buffers", "8 4k")]),
    ({"proxy_buffers_number": "8", "proxy_buffer_size": "16k"}, [("proxy_buffer_size", "16k"), ("proxy_buffers", "8 16k")]),
    ({"proxy_busy_buffers_size": "8k"}, [("proxy_busy_buffers_size", "8k")]),
    ({"proxy_max_temp_file_size": "0"}, [("proxy_max_temp_file_size", "0")]),
    ({"client_body_buffer_size": "1m"}, [("client_body_buffer_size", "1m")]),
    ({"connection_proxy_header": "keep-alive"}, [("proxy_set_header", "Connection keep-alive")]),
])
def test_accepted_values_become_their_directives(annotations, expected):
    assert directives(**annotations) == expected


@pytest.mark.parametrize("annotations, says", [
    ({"proxy_next_upstream": "error http_418"}, "not http_418"),
    ({"proxy_next_upstream": "off error"}, "'off' cannot be combined"),
    ({"proxy_next_upstream": ""}, "must be conditions"),
    ({"proxy_next_upstream_tries": "101"}, "from 0 to 100"),
    ({"proxy_redirect_from": "http://a/$host"}, "without spaces, quotes or '$'"),
    ({"proxy_redirect_to": "/a b"}, "without spaces"),
    ({"proxy_cookie_path": "/only-one"}, "its replacement separated by a space"),
    ({"proxy_cookie_domain": "a.com b.com c.com"}, "its replacement"),
    ({"proxy_cookie_domain": 'a.com "b'}, "its replacement"),
    ({"connection_proxy_header": "close; x"}, "header token"),
    ({"proxy_buffers_number": "2"}, "from 4 to 1024"),
    ({"proxy_busy_buffers_size": "2k"}, "must be at least 4096 bytes"),
    ({"proxy_busy_buffers_size": "64k"}, "fewer than all 4 buffers"),
    ({"proxy_buffer_size": "8k", "proxy_busy_buffers_size": "4k"}, "must be at least 8192 bytes"),
    ({"proxy_max_temp_file_size": "4k"}, "must be 0 (no temporary file) or at least 8192"),
])
def test_refused_values_say_what_to_change(annotations, says):
    assert says in refusal(**annotations)


def test_proxy_redirect_from_without_to_is_ignored_with_a_warning():
    parsed = parse_annotations({f"{PREFIX}/proxy-redirect-from": "http://a/"}, prefix=PREFIX)
    assert parsed.directives == [] and "needs proxy-redirect-to" in parsed.warnings[0]

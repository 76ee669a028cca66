"""The access log's ConfigMap keys: defaults as ingress-nginx's, values by allow-list, and every accepted
format renderable (nginx would refuse the whole configuration for an unknown variable)."""
import pytest

from services.nginxconf.config import UPSTREAMINFO_FORMAT, AccessLog
from services.nginxconf.render import render


def test_the_default_is_ingress_nginx_upstreaminfo_to_stdout(cluster):
    config = cluster.build().config
    assert config.access_log == AccessLog(enabled=True, path="/dev/stdout", format=UPSTREAMINFO_FORMAT,
                                          params="buffer=64k flush=1s")
    conf = render(config)
    assert "log_format upstreaminfo " in conf
    assert 'access_log "/dev/stdout" upstreaminfo buffer=64k flush=1s;' in conf


def test_empty_params_write_each_line_at_once(cluster):
    cluster.configmap({"access-log-params": ""})
    assert 'access_log "/dev/stdout" upstreaminfo;' in render(cluster.build().config)


def test_keys_set_the_format_escape_path_and_params(cluster):
    cluster.configmap({"log-format-upstream": '{"time": "$time_iso8601", "ns": "$namespace", "h": "$http_x_a"}',
                       "log-format-escape-json": "true", "access-log-path": "/var/log/nginx/access.log",
                       "access-log-params": "buffer=16k flush=5s", "enable-access-log-for-default-backend": "true"})
    model = cluster.build()
    assert model.problem_lines() == []
    log = model.config.access_log
    assert (log.escape, log.path, log.params, log.default_backend) == ("json", "/var/log/nginx/access.log",
                                                                       "buffer=16k flush=5s", True)
    conf = render(model.config)
    assert 'log_format upstreaminfo escape=json "{\\"time\\": \\"$time_iso8601\\"' in conf
    assert 'access_log "/var/log/nginx/access.log" upstreaminfo buffer=16k flush=5s;' in conf


def test_escape_none_wins_and_disable_turns_it_off(cluster):
    cluster.configmap({"log-format-escape-json": "true", "log-format-escape-none": "true"})
    assert cluster.build().config.access_log.escape == "none"
    cluster.configmap({"disable-access-log": "true"})
    conf = render(cluster.build().config)
    assert "access_log off;" in conf and "log_format upstreaminfo" not in conf


@pytest.mark.parametrize("key, value, says", [
    ("log-format-upstream", "$remote_addr $secret_thing", "$secret_thing"),
    ("log-format-upstream", "$remote_addr\n$status", "one line"),
    ("log-format-upstream", "cost $ 5", "starts no variable"),
    ("log-format-upstream", "$service_port", "$service_port"),
    ("access-log-params", "buffer=16k; include /etc/passwd", "buffer="),
    ("access-log-params", "if=$x", "buffer="),
    ("access-log-params", "flush=5s", "needs buffer="),
    ("access-log-params", "buffer=9m", "at most 4m"),
    ("access-log-path", "relative.log", "absolute path"),
    ("access-log-path", "/tmp/a b.log", "absolute path"),
    ("access-log-path", "/var/log/../../etc/shadow", "absolute path"),
    ("access-log-path", "/var/log/", "not a directory"),
    ("access-log-path", "/tmp", "not a directory"),
])
def test_bad_values_are_reported_and_the_default_keeps_applying(cluster, key, value, says):
    cluster.configmap({key: value})
    model = cluster.build()
    [problem] = model.problem_lines()
    assert f"key {key} value" in problem and says in problem
    assert model.config.access_log == AccessLog()

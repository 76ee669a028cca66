"""ingress-nginx's command line → `pyngress up` (services/tools/ingress_nginx_args.py).

The flag lists below are data taken from ingress-nginx v1.15 (docs/user-guide/cli-arguments.md,
pkg/flags/flags.go) and klog v2.140 (klog.go); the argument lists are those of ingress-nginx's cloud
deploy.yaml and of its Helm chart (templates/_params.tpl over values.yaml) as they render.
"""
from __future__ import annotations

import argparse
import logging

import pytest

from services import cli
from services.common import settings as settings_mod
from services.tools import ingress_nginx_args as m
from tests.support.ingress_nginx_deploy import CLOUD_DEPLOY_COMMAND, HELM_DEFAULT_COMMAND, POD_ENV

# docs/user-guide/cli-arguments.md, every row (`-v, --v Level` is `v`).
DOCUMENTED_FLAGS = """
annotations-prefix apiserver-host bucket-factor certificate-authority configmap controller-class deep-inspect
default-backend-service default-server-port default-ssl-certificate enable-annotation-validation disable-catch-all
disable-full-test disable-svc-external-name disable-sync-events dynamic-configuration-retries election-id
election-ttl enable-metrics enable-ssl-chain-completion enable-ssl-passthrough disable-leader-election
enable-topology-aware-routing exclude-socket-metrics health-check-path health-check-timeout healthz-port
healthz-host http-port https-port ingress-class ingress-class-by-name internal-logger-address kubeconfig
length-buckets max-buckets maxmind-edition-ids maxmind-retries-timeout maxmind-retries-count maxmind-license-key
maxmind-mirror metrics-per-host metrics-per-undefined-host monitor-max-batch-size post-shutdown-grace-period
profiler-port profiling publish-service publish-status-address report-node-internal-ip-address
report-status-classes ssl-passthrough-proxy-port status-port status-update-interval stream-port sync-period
sync-rate-limit tcp-services-configmap time-buckets udp-services-configmap update-status update-status-on-shutdown
shutdown-grace-period size-buckets v validating-webhook validating-webhook-certificate validating-webhook-key
version watch-ingress-without-class watch-namespace watch-namespace-selector
""".split()
# pkg/flags/flags.go defines one more than the page lists.
UNDOCUMENTED_FLAGS = ["profiler-address"]
# klog.InitFlags(nil) puts these on Go's flag set, which flags.go adds to its own (`v` is among them).
KLOG_FLAGS = """
log_dir log_file log_file_max_size logtostderr alsologtostderr legacy_stderr_threshold_behavior add_dir_header
skip_headers one_output skip_log_headers stderrthreshold alsologtostderrthreshold vmodule log_backtrace_at
""".split()
EVERY_FLAG = DOCUMENTED_FLAGS + UNDOCUMENTED_FLAGS + KLOG_FLAGS

# The same chart, release "edge", with the values people change most: controller.metrics.enabled,
# enableAnnotationValidations false, defaultBackend.enabled, scope.enabled, tcp, electionTTL, and
# extraArgs {enable-ssl-passthrough: "", default-ssl-certificate: ingress/wildcard}.
HELM_CUSTOM_ARGS = [
    "/nginx-ingress-controller",
    "--enable-annotation-validation=false",
    "--default-backend-service=$(POD_NAMESPACE)/edge-ingress-nginx-defaultbackend",
    "--publish-service=$(POD_NAMESPACE)/edge-ingress-nginx-controller",
    "--election-id=edge-ingress-nginx-leader",
    "--controller-class=k8s.io/ingress-nginx",
    "--ingress-class=nginx",
    "--configmap=$(POD_NAMESPACE)/edge-ingress-nginx-controller",
    "--tcp-services-configmap=$(POD_NAMESPACE)/edge-ingress-nginx-tcp",
    "--watch-namespace=$(POD_NAMESPACE)",
    "--validating-webhook=:8443",
    "--validating-webhook-certificate=/usr/local/certificates/cert",
    "--validating-webhook-key=/usr/local/certificates/key",
    "--enable-metrics=true",
    "--election-ttl=60s",
    "--default-ssl-certificate=ingress/wildcard",
    "--enable-ssl-passthrough",
]
WEBHOOK_FLAGS = ["validating-webhook", "validating-webhook-certificate", "validating-webhook-key"]
# What both default installs' webhook flags become: the webhook runs, as in ingress-nginx.
EXPECTED_WEBHOOK_ARGS = ["--validating-webhook=:8443",
                         "--validating-webhook-certificate=/usr/local/certificates/cert",
                         "--validating-webhook-key=/usr/local/certificates/key"]


def expand(args: list[str], env: dict[str, str]) -> list[str]:
    """The args as the kubelet hands them over."""
    return [arg.replace("$(POD_NAMESPACE)", env["POD_NAMESPACE"]) for arg in args]


def translate(*argv: str, env: dict[str, str] | None = None) -> m.Translation:
    return m.parse_args(list(argv), POD_ENV if env is None else env)


def up_args(*argv: str) -> list[str]:
    return translate(*argv).up_args


def pyngress_accepts(args: list[str]) -> settings_mod.Settings:
    return settings_mod.parse(args)


# --- the table covers ingress-nginx's flags, and only those ---

@pytest.mark.parametrize("name", EVERY_FLAG)
def test_every_ingress_nginx_flag_is_in_the_table(name):
    assert name in m.BY_NAME, f"ingress-nginx flag --{name} is missing from ingress_nginx_args.FLAGS"


def test_the_table_holds_no_flag_ingress_nginx_lacks():
    assert set(m.BY_NAME) - set(EVERY_FLAG) == set()
    assert len(m.FLAGS) == len(m.BY_NAME), "a flag is listed twice"


@pytest.mark.parametrize("flag", m.FLAGS, ids=lambda f: f.name)
def test_each_flag_has_a_doc_and_a_reason(flag):
    assert flag.doc and "\n" not in flag.doc
    action = flag.action
    if isinstance(action, m.Ignored):
        assert len(action.because) > 20


@pytest.mark.parametrize("flag", [f for f in m.FLAGS if isinstance(f.action, m.Maps)], ids=lambda f: f.name)
def test_a_mapped_flag_names_a_flag_pyngress_has(flag):
    assert flag.action.to in m.pyngress_flags()


def test_a_pyngress_flag_with_an_ingress_nginx_name_is_what_that_name_maps_to():
    """When pyngress gains a flag of ingress-nginx's name, the table must map it instead of ignoring it."""
    stale = [f.name for f in m.FLAGS if f.name in m.pyngress_flags()
             and not (isinstance(f.action, m.Maps) and f.action.to == f.name)]
    assert stale == [], f"pyngress now has {stale}: map them in services/tools/ingress_nginx_args.py FLAGS"


@pytest.mark.parametrize("flag", m.FLAGS, ids=lambda f: f.name)
def test_each_flag_at_its_default_is_accepted_and_pyngress_takes_the_result(flag):
    translation = translate(f"--{flag.name}={flag.default}")
    if isinstance(flag.action, m.Version):
        assert not translation.show_version and translation.up_args == [] == translation.ignored
        return
    pyngress_accepts(translation.up_args)
    if isinstance(flag.action, m.Maps):
        assert [a for a in translation.up_args if a.startswith(f"--{flag.action.to}=")] or \
            (flag.action.empty_is_unset and flag.default == "")
        assert translation.ignored == []
    else:
        [ignored] = translation.ignored
        assert ignored.flag is flag and ignored.is_default
        assert translation.up_args == []


# --- Go's flag syntax ---

@pytest.mark.parametrize("argv,expected", [
    (["--http-port=8080"], ["--http-port=8080"]),
    (["--http-port", "8080"], ["--http-port=8080"]),
    (["-http-port=8080"], ["--http-port=8080"]),
    (["-http-port", "8080"], ["--http-port=8080"]),
    (["--http-port=0x1f90"], ["--http-port=8080"]),  # Go's base-0 integers
    (["--http-port=017620"], ["--http-port=8080"]),  # a leading 0 is octal
    (["--http-port=8_080"], ["--http-port=8080"]),
    (["--http-port=1", "--http-port=2"], ["--http-port=2"]),  # the last wins
    (["--enable-ssl-passthrough"], ["--enable-ssl-passthrough=true"]),
    (["-enable-ssl-passthrough"], ["--enable-ssl-passthrough=true"]),
    (["--enable-ssl-passthrough=false"], ["--enable-ssl-passthrough=false"]),
    (["--enable-ssl-passthrough=T"], ["--enable-ssl-passthrough=true"]),
    (["--enable-ssl-passthrough=0"], ["--enable-ssl-passthrough=false"]),
    (["--update-status=FALSE"], ["--update-status=false"]),
    (["-v2"], ["--log-level=info"]),
    (["-v", "3"], ["--log-level=debug"]),
    (["--v=5"], ["--log-level=debug"]),
    (["-v=0"], ["--log-level=info"]),
    (["--election-ttl=1m30s"], ["--election-lease-seconds=90"]),
    (["--election-ttl=1.5s"], ["--election-lease-seconds=2"]),
    (["--election-ttl=0s"], ["--election-lease-seconds=30"]),  # ingress-nginx: <= 0 means 30s
    (["--sync-rate-limit=0x1p-2"], ["--sync-rate-limit=0.25"]),  # reloads at most every 4 s
    (["--ingress-class", "-odd"], ["--ingress-class=-odd"]),  # pflag takes the next argument as it is
    (["--watch-namespace="], []),  # empty: every namespace, pyngress's default
    (["--watch-namespace=team", "--watch-namespace="], []),
    (["--healthz-host="], ["--healthz-host="]),
    (["/nginx-ingress-controller", "--https-port=8443"], ["--https-port=8443"]),
    (["--publish-service=$(POD_NAMESPACE)/svc"], ["--publish-service=ingress-nginx/svc"]),
    (["--", "--http-port=1"], []),  # after "--", arguments are not flags
    # pyngress's own flags pass through, in either spelling.
    (["--manifests", "/m", "--enable-cni", "--run-dir=/r", "--log-level=warning"],
     ["--manifests=/m", "--enable-cni=true", "--run-dir=/r", "--log-level=warning"]),
    (["--v=4", "--log-level=warning"], ["--log-level=warning"]),
])
def test_go_flag_syntax(argv, expected):
    assert up_args(*argv) == expected
    pyngress_accepts(expected)


def test_a_boolean_takes_no_separate_value_and_the_stray_word_is_named():
    """pflag: `--update-status false` sets true and leaves "false" as an argument, which is ignored."""
    translation = translate("--update-status", "false")
    assert translation.up_args == ["--update-status=true"]
    assert any("false" in note and "--flag=false" in note for note in translation.notes)


def test_an_unexpanded_reference_stays_and_is_named_once():
    translation = translate("--publish-service=$(POD_NAMESPACE)/a", "--configmap=$(POD_NAMESPACE)/b", env={})
    assert translation.up_args == ["--publish-service=$(POD_NAMESPACE)/a", "--configmap=$(POD_NAMESPACE)/b"]
    assert translation.notes == ["$(POD_NAMESPACE) is not expanded: POD_NAMESPACE is not in the environment"]


@pytest.mark.parametrize("argv,message", [
    (["--no-such-flag"], "unknown flag: --no-such-flag"),
    (["--no-such-flag=1"], "unknown flag: --no-such-flag"),
    (["-x"], "unknown flag: -x"),
    (["--allow-snippet-annotations=true"], "unknown flag"),  # a ConfigMap key, never a flag
    (["--http-port"], "flag needs an argument: --http-port"),
    (["--http-port=80x"], "invalid argument '80x' for --http-port"),
    (["--http-port=08"], "invalid argument '08' for --http-port"),  # 8 is not an octal digit
    (["--update-status=yes"], "invalid argument 'yes' for --update-status"),  # Go's ParseBool has no "yes"
    (["--election-ttl=30"], "time: invalid duration"),  # a duration needs its unit
    (["--v=0x2"], "invalid argument '0x2' for --v"),  # klog's level is decimal
    (["--max-buckets=-1"], "invalid argument '-1' for --max-buckets"),
    (["--vmodule=file"], "expect comma-separated list of filename=N"),
    (["--log_backtrace_at=file:1"], "expect file.go:234"),
    (["--stderrthreshold=LOUD"], "invalid argument 'LOUD'"),
    (["--profiler-address=localhost"], "failed to parse IP"),
    (["--time-buckets=0.1,fast"], "invalid argument"),
    (["--sync-rate-limit=1e39"], "out of range"),  # float32
])
def test_malformed_arguments_are_refused_as_ingress_nginx_refuses_them(argv, message):
    with pytest.raises(m.ArgumentsError, match=message.replace("(", r"\(").replace(".", r"\.")):
        translate(*argv)


@pytest.mark.parametrize("text,value", [
    ("0", 0), ("10", 10), ("-10", -10), ("+7", 7), ("010", 8), ("0o10", 8), ("0x10", 16), ("0b101", 5), ("1_000", 1000),
])
def test_go_integers(text, value):
    assert m.go_int(text) == value


@pytest.mark.parametrize("text", ["", "1_", "_1", "1__0", "0x", "1.0", " 1", "08", "9223372036854775808"])
def test_go_integers_refused(text):
    with pytest.raises(ValueError):
        m.go_int(text)


@pytest.mark.parametrize("text,seconds", [
    ("0", 0.0), ("30s", 30.0), ("1h30m", 5400.0), ("1.5h", 5400.0), ("300ms", 0.3), ("-2s", -2.0), (".5s", 0.5),
    ("1us", 1e-6), ("1µs", 1e-6), ("2m3s4ms", 123.004),
])
def test_go_durations(text, seconds):
    assert m.go_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "30", "s", "1d", "1.5", "30 s", "-", "1s2"])
def test_go_durations_refused(text):
    with pytest.raises(ValueError):
        m.go_duration(text)


# --- ingress-nginx's own argument lists ---

EXPECTED_FROM_DEFAULTS = [
    "--publish-service=ingress-nginx/ingress-nginx-controller",
    "--election-id=ingress-nginx-leader",
    "--controller-class=k8s.io/ingress-nginx",
    "--ingress-class=nginx",
    "--configmap=ingress-nginx/ingress-nginx-controller",
    *EXPECTED_WEBHOOK_ARGS,
]


@pytest.mark.parametrize("args", [CLOUD_DEPLOY_COMMAND, HELM_DEFAULT_COMMAND], ids=["cloud-deploy.yaml", "helm-defaults"])
def test_ingress_nginx_default_install_translates(args):
    translation = translate(*expand(args, POD_ENV))
    assert translation.up_args == EXPECTED_FROM_DEFAULTS
    assert translation.ignored == []
    assert translation.notes == []
    settings = pyngress_accepts(translation.up_args)
    assert settings.leader.publish_service == "ingress-nginx/ingress-nginx-controller"
    assert settings.ingress.configmap == "ingress-nginx/ingress-nginx-controller"
    # ingress-nginx's ports and meanings, untouched.
    assert (settings.ports.http, settings.ports.https, settings.ports.healthz) == (80, 443, 10254)
    assert (settings.ports.status, settings.ports.ssl_passthrough_proxy) == (10246, 442)
    assert (settings.webhook.address, settings.webhook.key) == (":8443", "/usr/local/certificates/key")


@pytest.mark.parametrize("args", [CLOUD_DEPLOY_COMMAND, HELM_DEFAULT_COMMAND], ids=["cloud-deploy.yaml", "helm-defaults"])
def test_unexpanded_default_install_takes_pod_namespace_from_the_environment(args):
    """Outside a pod (podman with -e POD_NAMESPACE) nothing expands $(POD_NAMESPACE) before us."""
    assert translate(*args).up_args == EXPECTED_FROM_DEFAULTS


def test_helm_chart_with_common_values_translates():
    env = {"POD_NAMESPACE": "edge"}
    translation = translate(*expand(HELM_CUSTOM_ARGS, env), env=env)
    assert translation.up_args == [
        "--default-backend-service=edge/edge-ingress-nginx-defaultbackend",
        "--publish-service=edge/edge-ingress-nginx-controller",
        "--election-id=edge-ingress-nginx-leader",
        "--controller-class=k8s.io/ingress-nginx",
        "--ingress-class=nginx",
        "--configmap=edge/edge-ingress-nginx-controller",
        "--tcp-services-configmap=edge/edge-ingress-nginx-tcp",
        "--watch-namespace=edge",
        *EXPECTED_WEBHOOK_ARGS,
        "--enable-metrics=true",
        "--election-lease-seconds=60",
        "--default-ssl-certificate=ingress/wildcard",
        "--enable-ssl-passthrough=true",
    ]
    assert [g.flag.name for g in translation.ignored] == ["enable-annotation-validation"]
    pyngress_accepts(translation.up_args)


# --- security: what is mapped, and why the rest may be ignored ---

# The flags whose handling decides a security property, and the decision; a change here is deliberate.
SECURITY_DECISIONS = {
    "disable-catch-all": "mapped",  # no namespace takes the requests of unknown hosts
    "watch-namespace-selector": "mapped",  # only the selected namespaces' Ingresses are served
    "watch-namespace": "mapped",
    "disable-svc-external-name": "mapped",
    "default-ssl-certificate": "mapped",
    "controller-class": "mapped",
    "ingress-class": "mapped",
    "annotations-prefix": "mapped",
    "healthz-host": "mapped",
    "enable-annotation-validation": "ignored",  # pyngress always validates
    "deep-inspect": "ignored",  # pyngress always inspects
    "disable-full-test": "ignored",  # admission only; nginx -t tests every full config
    "validating-webhook": "mapped",  # the webhook, which never runs nginx -t on what it reviews
    "profiling": "ignored",  # pyngress has no profiler: nothing exposed
    "ingress-class-by-name": "mapped",  # the Ingresses ingress-nginx serves with it, no more
    "apiserver-host": "ignored",  # the kubeconfig's or in-cluster API server, verified by its CA
    "certificate-authority": "ignored",
    "maxmind-license-key": "ignored",
}


def decision(flag: m.Flag) -> str:
    action = flag.action
    if isinstance(action, m.Maps):
        return "mapped"
    if isinstance(action, m.Ignored):
        return "ignored"
    return "version"


@pytest.mark.parametrize("name,expected", SECURITY_DECISIONS.items())
def test_security_relevant_flags_are_handled_as_decided(name, expected):
    assert decision(m.BY_NAME[name]) == expected


@pytest.mark.parametrize("argv,expected", [
    (["--disable-catch-all"], ["--disable-catch-all=true"]),
    (["--disable-catch-all=1"], ["--disable-catch-all=true"]),
    (["--disable-catch-all", "--disable-catch-all=false"], ["--disable-catch-all=false"]),
    (["--watch-namespace-selector=team=a"], ["--watch-namespace-selector=team=a"]),
    (["--watch-namespace=a", "--watch-namespace-selector", "env in (prod)"],
     ["--watch-namespace=a", "--watch-namespace-selector=env in (prod)"]),
    (["--watch-namespace-selector="], []),
])
def test_the_namespace_selector_and_disable_catch_all_map_to_pyngress_flags(argv, expected):
    translation = translate(*argv)
    assert translation.up_args == expected and translation.ignored == []
    pyngress_accepts(translation.up_args)


def test_maxmind_editions_map_and_downloads_are_ignored_with_how_to_provide_the_files():
    translation = translate("--maxmind-edition-ids=GeoIP2-Country", "--maxmind-license-key=k", "--maxmind-mirror=x")
    assert translation.up_args == ["--maxmind-edition-ids=GeoIP2-Country"]
    assert pyngress_accepts(translation.up_args).geoip2.edition_ids == "GeoIP2-Country"
    assert [g.flag.name for g in translation.ignored] == ["maxmind-license-key", "maxmind-mirror"]
    assert all("--maxmind-mmdb-dir" in g.flag.action.because and "geoipupdate" in g.flag.action.because
               for g in translation.ignored)


# --- the command: log and exec ---

@pytest.fixture
def execs(monkeypatch):
    calls: list[list[str]] = []
    monkeypatch.setattr(m.os, "execvp", lambda path, argv: calls.append(argv))
    yield calls
    logging.getLogger().handlers[:] = []


def run(*argv: str) -> int:
    return cli.main(["nginx-ingress-controller", *argv])


def test_run_logs_each_ignored_flag_once_and_execs_pyngress_up(execs, capsys, monkeypatch):
    monkeypatch.setenv("POD_NAMESPACE", "ingress-nginx")
    assert run(*CLOUD_DEPLOY_COMMAND, "--maxmind-license-key=s3cr3t",
               "--apiserver-host=https://admin:hunter2@10.0.0.1:6443") == 0
    [argv] = execs
    assert argv[1:] == ["up", *EXPECTED_FROM_DEFAULTS]
    err = capsys.readouterr().err
    for name in ["maxmind-license-key", "apiserver-host"]:
        assert err.count(f"flag=--{name} ") == 1, err
    assert "flag=--validating-webhook" not in err  # mapped: the webhook runs
    assert "s3cr3t" not in err and "hunter2" not in err
    assert "value=https://admin:<redacted>@10.0.0.1:6443" in err


def test_a_flag_at_ingress_nginx_default_is_named_at_info(execs, capsys):
    assert run("--profiling=true") == 0
    assert "info nginx-ingress-controller ingress-nginx flag ignored flag=--profiling value=true" in \
        capsys.readouterr().err


def test_run_rejects_an_unknown_flag(execs, capsys):
    assert run("--publish-servce=a/b") == 2
    assert execs == []
    assert "unknown flag: --publish-servce" in capsys.readouterr().err


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_lists_every_flag_and_what_becomes_of_it(execs, capsys, flag):
    assert run("/nginx-ingress-controller", flag) == 0
    out = capsys.readouterr().out
    for name in EVERY_FLAG:
        assert f"  --{name} " in out
    assert "--http-port int (default '80'): HTTP port; → pyngress --http-port" in out
    assert execs == []


def test_version_prints_and_exits(execs, capsys):
    assert run("--version") == 0
    assert capsys.readouterr().out.startswith("pyngress ")
    assert execs == []


def test_argparse_leaves_every_argument_to_the_translation():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command")
    m.add_arguments(sub.add_parser("nginx-ingress-controller"))
    argv = ["-h", "--http-port", "80", "-v2", "--", "x"]
    assert parser.parse_args(["nginx-ingress-controller", *argv]).args == argv

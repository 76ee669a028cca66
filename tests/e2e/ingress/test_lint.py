"""`pyngress lint`, as a team runs it over its manifests before the move: the admission webhook's decisions, a
line per problem, exit code 1 on an error; over lint_manifests/ (good and bad Ingresses) and over the objects
the e2e scenarios (scenarios.py) apply."""
import contextlib
import subprocess
from pathlib import Path

from kubernetes import client

from services.syncer.annotations import ANNOTATIONS
from services.syncer.model.configmap_unsupported import UNSUPPORTED
from services.tools.configmap_docs import DIFFERS
from services.tools.ingress_nginx_annotations import not_implemented_behaviour
from tests.e2e.ingress import scenarios
from tests.e2e.ingress.scenarios import Stage
from tests.kube_api import KubeApiServer
from tests.support import k8s
from tests.support.controller import VENV_BIN, ManifestsCluster
from tests.support.kube_cluster import ApiCluster

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = "tests/e2e/ingress/lint_manifests"
PREFIX = "nginx.ingress.kubernetes.io"


def differs(where: str, ingress: str, *names: str) -> list[str]:
    """The checklist's lines for the annotations `names` of one Ingress, each with its registry entry's text."""
    return [f"{where}: NOTE: Ingress {ingress}: annotation {PREFIX}/{name}: {ANNOTATIONS[name].differs}"
            for name in names]


GOOD_NOTES = [*differs(f"{FIXTURES}/good.yaml:2", "team-a/shop", "ssl-redirect"),
              *differs(f"{FIXTURES}/good.yaml:19", "team-a/shop-canary", "canary")]


def lint(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(VENV_BIN / "pyngress"), "lint", *args], capture_output=True, text=True, timeout=60,
                          cwd=ROOT, input=stdin)


def test_good_and_bad_ingresses_get_a_line_per_problem_and_a_checklist():
    out = lint(f"--manifests={FIXTURES}", "--configmap=ingress-nginx/ingress-nginx-controller")
    bad = f"{FIXTURES}/bad.yaml"
    assert out.stdout.splitlines() == [
        f"{FIXTURES}/broken.yaml:5: ERROR: file: did not find expected ',' or ']' (while parsing a flow sequence "
        "that starts on line 4); nothing in it was read",
        f"{FIXTURES}/configmap.yaml:1: ERROR: ConfigMap ingress-nginx/ingress-nginx-controller: key reuse-port is not "
        f"supported by pyngress ({UNSUPPORTED['reuse-port']}); ignored",
        f"{bad}:2: ERROR: Ingress team-b/takeover: host shop.example.com prefix path / is already defined in Ingress "
        "team-a/shop; serve it from that Ingress, or use another host or path",
        f"{bad}:2: WARNING: Ingress team-b/takeover: ssl-redirect/force-ssl-redirect for host shop.example.com come "
        "from the older Ingress team-a/shop; this Ingress's differ and are ignored",
        f"{bad}:16: ERROR: Ingress team-b/snippet: annotation {PREFIX}/configuration-snippet value 'more_set_headers "
        "\"X-Team: b\";': snippet annotations are disabled: remove it, or have the cluster administrator set "
        "allow-snippet-annotations: \"true\" and annotations-risk-level: Critical in the controller ConfigMap",
        f"{bad}:32: ERROR: Ingress team-b/nightmare: annotation {PREFIX}/mirror-target value "
        "'http://mirror.example.com/;\\nssl_engine /tmp/evil.so;': must be an http:// or https:// URL such as "
        "https://mirror.example.com$request_uri (at most 2048 characters); the nginx variables it may hold are "
        "$request_uri, $uri, $args, $is_args, $host, $scheme; the value holds nginx configuration syntax (a quote, "
        "brace, ';', '#' or line break), which could inject configuration: refused rather than ignored",
        f"{bad}:32: ERROR: Ingress team-b/nightmare: annotation {PREFIX}/auth-url value "
        "'http://auth.example.com/verify;\\nssl_engine /tmp/evil.so;': must be an http:// or https:// URL such as "
        "http://auth.auth-ns.svc.cluster.local:8080/check (port 1-65535, at most 2048 characters), without query, "
        "quotes, spaces or ';'; the nginx variables it may hold are $host, $http_host, $best_http_host; its paths "
        "answer 503 until it is fixed",
        f"{bad}:48: WARNING: Ingress team-b/lenient: annotation {PREFIX}/proxy-read-timeout value '50k': must be a "
        "duration such as 60, 60s, 500ms, 5m or 1h, at most 596h; ignored, its default applies",
        f"{bad}:48: WARNING: Ingress team-b/lenient: annotation {PREFIX}/session-cookie-partitioned is not supported "
        "by pyngress; ignored",
        f"{bad}:48: WARNING: Ingress team-b/lenient: Service team-b/not-yet not found; requests for it answer 503",
        f"{bad}:64: ERROR: Ingress team-b/refused: annotation {PREFIX}/limit-rph value '100': ingress-nginx has no "
        "limit-rph, and nginx counts requests per second or per minute only; use limit-rpm (a limit-rph of 600 is a "
        "limit-rpm of 10)",
        f"{bad}:79: ERROR: Ingress team-b/cloud-metadata: Service team-b/metadata has type ExternalName with "
        "externalName '169.254.169.254', which names the node itself (localhost, a loopback, unspecified or "
        "link-local address); point it at a host outside the node",
        f"{bad}:92: ERROR: Ingress team-b/regex: host regex.example.com path '/api/(v1': '/api/(v1' is not a valid "
        "regular expression: PCRE (nginx's Lua, libpcre.so.3) says \"missing )\"",
        # The migration checklist, from the tables docs/configmap.md and docs/annotations.md are generated from:
        # once per key per object, the keys the ConfigMap sets, then the annotations each of our Ingresses uses.
        f"{FIXTURES}/configmap.yaml:1: NOTE: ConfigMap ingress-nginx/ingress-nginx-controller: key block-cidrs: "
        f"{DIFFERS['block-cidrs']}",
        *differs(f"{bad}:16", "team-b/snippet", "configuration-snippet"),
        *differs(f"{bad}:32", "team-b/nightmare", "auth-url", "mirror-target"),
        f"{bad}:48: NOTE: Ingress team-b/lenient: annotation {PREFIX}/session-cookie-partitioned: not implemented by "
        f"pyngress: {not_implemented_behaviour('session-cookie-partitioned')}",
        f"{bad}:64: NOTE: Ingress team-b/refused: annotation {PREFIX}/limit-rph: pyngress's own, which ingress-nginx "
        f"does not read: {ANNOTATIONS['limit-rph'].doc}",
        *differs(f"{bad}:92", "team-b/regex", "use-regex"),
        *GOOD_NOTES,
    ]
    assert out.returncode == 1
    assert out.stderr == "pyngress lint: 9 error(s), 4 warning(s)\n"


def test_good_ingresses_alone_pass_with_the_checklist_only():
    out = lint("-f", f"{FIXTURES}/services.yaml", "-f", f"{FIXTURES}/good.yaml")
    assert (out.returncode, out.stdout.splitlines()) == (0, GOOD_NOTES), out.stderr
    assert out.stderr == "pyngress lint: 0 error(s), 0 warning(s)\n"


def test_the_checklist_names_each_object_that_uses_a_key_once():
    ingress = ("apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: {name}\n  namespace: team-c\n"
               "  annotations:\n    nginx.ingress.kubernetes.io/satisfy: any\n"
               "    nginx.ingress.kubernetes.io/auth-keepalive: '10'\n"
               "spec:\n  ingressClassName: nginx\n  defaultBackend:\n    service: {{name: web, port: {{number: 80}}}}\n")
    configmap = ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: controller, namespace: ingress}\n"
                 "data: {bind-address: 10.0.0.5, geoip2-autoreload-in-minutes: '30', proxy-body-size: 8m}\n")
    out = lint("-f", "-", "--configmap=ingress/controller",
               stdin="---\n".join([configmap, ingress.format(name="one"), ingress.format(name="two")]))
    notes = [line for line in out.stdout.splitlines() if ": NOTE: " in line]
    assert notes == [
        f"<stdin>:1: NOTE: ConfigMap ingress/controller: key {key}: {DIFFERS[key]}"
        for key in ("bind-address", "geoip2-autoreload-in-minutes")
    ] + [
        *differs("<stdin>:6", "team-c/one", "auth-keepalive", "satisfy"),
        *differs("<stdin>:19", "team-c/two", "auth-keepalive", "satisfy"),
    ]


def test_the_namespace_flags_choose_whose_ingresses_are_judged():
    snippet = (ROOT / FIXTURES / "bad.yaml").read_text().split("---")[1]  # the Ingress "snippet", in team-b
    namespaces = "".join(f"---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: {name}, labels: {{team: {team}}}}}\n"
                         for name, team in (("team-a", "a"), ("team-b", "b")))
    judged = lint("-f", "-", "--watch-namespace-selector=team=b", stdin=snippet + namespaces)
    assert judged.returncode == 1 and ": ERROR: Ingress team-b/snippet: " in judged.stdout
    for flag in ("--watch-namespace-selector=team=a", "--watch-namespace=team-a"):
        out = lint("-f", "-", flag, stdin=snippet + namespaces)
        assert (out.returncode, out.stdout) == (0, ""), out.stderr


def test_stdin_is_read_with_a_dash_and_the_class_flags_choose_what_is_judged():
    snippet = (ROOT / FIXTURES / "bad.yaml").read_text().split("---")[1]  # the Ingress "snippet", class nginx
    out = lint("-f", "-", stdin=snippet)
    assert out.returncode == 1 and out.stdout.startswith("<stdin>:2: ERROR: Ingress team-b/snippet: annotation ")
    # Under another class name, the Ingress is another controller's: nothing to say.
    out = lint("-f", "-", "--ingress-class=pyngress", "--controller-class=example.com/pyngress", stdin=snippet)
    assert (out.returncode, out.stdout) == (0, ""), out.stderr


def test_a_directory_that_does_not_exist_stops_it():
    out = lint("--manifests=tests/no-such-directory")
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr == ("pyngress lint: tests/no-such-directory is not a directory; give --manifests an existing "
                          "directory\n")


class _Asked(Exception):
    """A scenario asked the controller something: every object it applies before that is written by then."""


class _RecordingStage(Stage):
    """A Stage whose cluster is a directory of manifests and whose controller is never there."""

    def expect(self, host: str, path: str, want: str, timeout: float = 10.0) -> None:
        pass

    def served_by(self, host: str, path: str) -> str:
        raise _Asked


class _NoController:
    def __getattr__(self, name: str):
        raise _Asked


class _NoEcho:
    port = 8080

    def __init__(self) -> None:
        self.ips: dict[str, str] = {}

    def start(self, name: str) -> str:
        self.ips[name] = f"10.0.0.{len(self.ips) + 1}"
        return self.ips[name]


def _record(directory: Path) -> None:
    """The objects the ingress scenarios apply, written as their manifests-mode run writes them."""
    cluster = ManifestsCluster(directory)
    stage = _RecordingStage(_NoController(), cluster, _NoEcho())  # type: ignore[arg-type]
    runs = [scenarios.matching_matrix, scenarios.prefix_matches_whole_path_elements,
            scenarios.hosts_unknown_host_and_missing_service, scenarios.oldest_ingress_wins,
            scenarios.endpoints_change_without_reload,
            lambda s: scenarios.bad_input_leaves_other_routes_working(
                s, lambda: cluster.write("broken.yaml", "kind: Ingress\nmetadata:\n  name: [unclosed\n")),
            lambda s: scenarios.ingress_class_matrix(s, watch_without_class=False)]
    for run in runs:
        with contextlib.suppress(_Asked):  # the rest of the scenario asks the controller what it serves
            run(stage)


def test_the_e2e_scenarios_manifests(tmp_path):
    _record(tmp_path)
    out = lint(f"--manifests={tmp_path}")
    assert out.stdout.splitlines() == [
        f"{tmp_path}/broken.yaml:4: ERROR: file: did not find expected ',' or ']' (while parsing a flow sequence "
        "that starts on line 3); nothing in it was read",
        f"{tmp_path}/ingress-default-dangling.yaml:1: WARNING: Ingress default/dangling: Service default/nope not "
        "found; requests for it answer 503",
        f"{tmp_path}/ingress-default-missing-svc.yaml:1: WARNING: Ingress default/missing-svc: Service "
        "default/does-not-exist not found; requests for it answer 503",
        # oldest_ingress_wins: applied together, the newer one is refused, as ingress-nginx's webhook refuses it.
        f"{tmp_path}/ingress-default-newer.yaml:1: ERROR: Ingress default/newer: host conflict.example.com prefix "
        "path / is already defined in Ingress default/older; serve it from that Ingress, or use another host or path",
    ]
    assert out.returncode == 1


def test_a_cluster_is_read_with_kubeconfig(tmp_path):
    with KubeApiServer() as api:
        api_client = client.ApiClient(api.configuration())
        ApiCluster(api_client).apply(
            k8s.ingress_class("nginx"), k8s.service("web"),
            k8s.ingress("first", [k8s.rule("api.example.com", ("/", "Prefix", "web", 80))]),
            k8s.ingress("second", [k8s.rule("api.example.com", ("/", "Prefix", "web", 80))]),
            k8s.ingress("third", [k8s.rule("api.example.com", ("/v2", "Prefix", "web", 80))],
                        annotations={f"{PREFIX}/proxy-read-timeout": "50k"}))
        api_client.close()
        out = lint(f"--kubeconfig={api.write_kubeconfig(tmp_path / 'kubeconfig')}")
    assert out.stdout.splitlines() == [
        "cluster: ERROR: Ingress default/second: host api.example.com prefix path / is already defined in Ingress "
        "default/first; serve it from that Ingress, or use another host or path",
        f"cluster: WARNING: Ingress default/third: annotation {PREFIX}/proxy-read-timeout value '50k': must be a "
        "duration such as 60, 60s, 500ms, 5m or 1h, at most 596h; ignored, its default applies",
    ]
    assert out.returncode == 1

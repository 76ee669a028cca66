"""Flags shared by every component, grouped as kopf groups its settings: frozen sub-settings per concern.

Every flag `--some-flag` can also be given as the environment variable `PYNGRESS_SOME_FLAG`; a flag on
the command line wins. Names follow ingress-nginx's where one exists. Each field below declares its flag
(`_flag`): the flag's name, how its text is parsed, and its help; `add_arguments` and `from_namespace`
are read from these declarations, so a new setting is one field.

The groups: `source` (where objects come from), `ports`, `paths`, `ingress` (which Ingresses are ours and
how they are read), `leader` (leader election and Ingress status), `reload` (how often nginx reloads and how
many old workers may drain), `cni`, `proxy` (the passthrough processes' limits), `metrics` (per-request metrics),
`webhook` (the validating admission webhook), `geoip2` (where use-geoip2's MaxMind databases are) and `log_level`.
"""
from __future__ import annotations

import argparse
import math
import os
from dataclasses import dataclass, field, fields, replace
from typing import Any, Callable, Sequence

from services.common.label_selector import LabelSelectorError, parse_label_selector
from services.nginxconf import geoip2

DEFAULT_RUN_DIR = "/var/run/pyngress"
DEFAULT_STATE_DIR = "/var/lib/pyngress"


def parse_bool(text: str | bool) -> bool:
    if isinstance(text, bool):
        return text
    value = text.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def parse_port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 0 < port < 65536:
        raise argparse.ArgumentTypeError(f"port must be 1-65535, got {port}")
    return port


def parse_count(text: str) -> int:
    """A whole number, at least 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return value


def _positive_number(text: str, *, expected: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected {expected} greater than 0, got {text!r}")
    return value


def parse_seconds(text: str) -> float:
    """A finite number of seconds greater than 0."""
    return _positive_number(text, expected="a number of seconds")


def parse_rate(text: str) -> float:
    """A finite number of events per second greater than 0 ("0.3")."""
    return _positive_number(text, expected="a number per second")


def parse_buckets(text: str) -> str:
    """Histogram bucket bounds: finite numbers, comma-separated, increasing ("0.005,0.01,0.025"); kept as text
    in that canonical form so that it passes on to child processes unchanged."""
    try:
        bounds = [float(word) for word in text.split(",")]
    except ValueError:
        bounds = []
    if not bounds or not all(math.isfinite(b) for b in bounds) or any(a >= b for a, b in zip(bounds, bounds[1:])):
        raise argparse.ArgumentTypeError(f"expected increasing numbers separated by commas, such as "
                                         f"0.005,0.01,0.025, got {text!r}")
    return ",".join(repr(b) for b in bounds)


def parse_metric_names(text: str) -> str:
    """Metric names, comma-separated, with or without the nginx_ingress_controller_ prefix."""
    names = [word.strip() for word in text.split(",") if word.strip()]
    bad = [name for name in names if not name.replace("_", "").isalnum() or not name.isascii()]
    if bad:
        raise argparse.ArgumentTypeError(f"expected metric names such as nginx_ingress_controller_bytes_sent, "
                                         f"got {', '.join(map(repr, bad))}")
    return ",".join(names)


def parse_selector(text: str) -> str:
    """A label selector (`team=a,env in (prod)`), checked and kept as text for the child processes."""
    try:
        parse_label_selector(text)
    except LabelSelectorError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text


def parse_listen_address(text: str) -> str:
    """`[ADDR]:PORT` as ingress-nginx's --validating-webhook takes it (":8443", "127.0.0.1:8443", "[::1]:8443");
    kept as text for the child processes."""
    host, colon, port = text.rpartition(":")
    if not colon:
        raise argparse.ArgumentTypeError(f"expected [ADDRESS]:PORT such as :8443, got {text!r}")
    parse_port(port)
    if host.startswith("[") != host.endswith("]"):
        raise argparse.ArgumentTypeError(f"expected [ADDRESS]:PORT such as [::1]:8443, got {text!r}")
    return text


class EnvironmentSettingError(ValueError):
    """A PYNGRESS_* variable whose value its flag does not take; the message names the variable."""


def _from_environment(env: str, *, value: str, parse: Callable[[str], Any]) -> Any:
    try:
        return parse(value)
    except argparse.ArgumentTypeError as err:
        raise EnvironmentSettingError(f"{env}={value!r}: {err}") from None


def _flag(default: Any, *, name: str, help_text: str, parse: Callable[[str], Any] = str) -> Any:
    """A settings field with its command-line flag `--name` (environment `PYNGRESS_NAME`)."""
    return field(default=default, metadata={"flag": name, "parse": parse, "help": help_text})


@dataclass(frozen=True, kw_only=True)
class SourceSettings:
    manifests: str | None = _flag(None, name="manifests",
                                  help_text="watch a directory of manifests instead of the Kubernetes API")
    kubeconfig: str | None = _flag(None, name="kubeconfig",
                                   help_text="the API server from this kubeconfig (default: in-cluster)")
    watch_namespace: str | None = _flag(None, name="watch-namespace", help_text="only objects of this namespace")
    # As ingress-nginx: only the Ingresses are narrowed; what they name is read wherever it is.
    watch_namespace_selector: str | None = _flag(None, name="watch-namespace-selector", parse=parse_selector,
                                                 help_text="only Ingresses of the namespaces whose labels match "
                                                 "this label selector (team=a,env in (prod))")


@dataclass(frozen=True, kw_only=True)
class PortSettings:
    http: int = _flag(80, name="http-port", help_text="HTTP port", parse=parse_port)
    https: int = _flag(443, name="https-port",
                       help_text="HTTPS port (the passthrough proxy's with --enable-ssl-passthrough)", parse=parse_port)
    healthz: int = _flag(10254, name="healthz-port", help_text="/healthz, /metrics and the status record",
                         parse=parse_port)
    healthz_host: str = _flag("", name="healthz-host",
                              help_text="the healthz port's address (every address when empty)")
    # ingress-nginx's names, accepted; they open no port: nginx's status and configuration API and its TLS
    # listener behind the passthrough proxy are Unix sockets in <run-dir>/nginx/ (SECURITY.md says why).
    status: int = _flag(10246, name="status-port",
                        help_text="accepted for ingress-nginx compatibility; opens no port "
                        "(nginx's status is a Unix socket in the run directory)", parse=parse_port)
    ssl_passthrough_proxy: int = _flag(442, name="ssl-passthrough-proxy-port",
                                       help_text="accepted for ingress-nginx compatibility; opens no port (nginx's TLS "
                                       "listener is a Unix socket in the run directory)", parse=parse_port)


@dataclass(frozen=True, kw_only=True)
class PathSettings:
    state_dir: str = _flag(DEFAULT_STATE_DIR, name="state-dir", help_text="nginx's prefix, the dynamic tables, IPAM")
    run_dir: str = _flag(DEFAULT_RUN_DIR, name="run-dir", help_text="sockets and status files (root-only, 0700)")
    template: str | None = _flag(None, name="template",
                                 help_text="a directory laid out as templates/ (nginx.conf.j2 and lua/) to use "
                                 "instead of the built-in template; watched, checked, applied when it passes")


@dataclass(frozen=True, kw_only=True)
class IngressSettings:
    ingress_class: str = _flag("nginx", name="ingress-class",
                               help_text="the kubernetes.io/ingress.class value that is ours")
    controller_class: str = _flag("k8s.io/ingress-nginx", name="controller-class",
                                  help_text="the IngressClass spec.controller that is ours")
    watch_ingress_without_class: bool = _flag(False, name="watch-ingress-without-class",
                                              help_text="serve Ingresses that name no class", parse=parse_bool)
    ingress_class_by_name: bool = _flag(False, name="ingress-class-by-name", parse=parse_bool,
                                        help_text="also serve Ingresses whose ingressClassName is --ingress-class, "
                                                  "whatever that IngressClass's controller (ingress-nginx's flag)")
    configmap: str | None = _flag(None, name="configmap", help_text="the controller ConfigMap, NAMESPACE/NAME")
    tcp_services_configmap: str | None = _flag(None, name="tcp-services-configmap", help_text="NAMESPACE/NAME")
    udp_services_configmap: str | None = _flag(None, name="udp-services-configmap", help_text="NAMESPACE/NAME")
    default_backend_service: str | None = _flag(None, name="default-backend-service",
                                                help_text="the Service (NAMESPACE/NAME) that answers requests no "
                                                "Ingress takes and those whose Service has no endpoints")
    default_ssl_certificate: str | None = _flag(None, name="default-ssl-certificate",
                                                help_text="the Secret served when no other certificate matches, "
                                                "NAMESPACE/NAME")
    annotations_prefix: str = _flag("nginx.ingress.kubernetes.io", name="annotations-prefix",
                                    help_text="the annotations' prefix")
    enable_ssl_passthrough: bool = _flag(False, name="enable-ssl-passthrough",
                                         help_text="run the passthrough proxy on the HTTPS port", parse=parse_bool)
    # As ingress-nginx: refuse every ExternalName Service as an Ingress backend.
    disable_svc_external_name: bool = _flag(False, name="disable-svc-external-name",
                                            help_text="refuse ExternalName Services as backends", parse=parse_bool)
    # As ingress-nginx: an Ingress with a spec.defaultBackend is ignored whole, rules and all.
    disable_catch_all: bool = _flag(False, name="disable-catch-all", parse=parse_bool,
                                    help_text="ignore Ingresses with a spec.defaultBackend, so that no namespace "
                                    "takes the requests of unknown hosts")
    gateway_controller_name: str = _flag("pyngress.io/gateway-controller", name="gateway-controller-name",
                                         help_text="the GatewayClass spec.controllerName that is ours (Gateway API)")


@dataclass(frozen=True, kw_only=True)
class LeaderSettings:
    election_id: str = _flag("ingress-controller-leader", name="election-id", help_text="the Lease's name")
    # A follower takes an abandoned Lease over this long after it last saw it change; a leader renews every
    # third of it (30, as ingress-nginx).
    lease_seconds: int = _flag(30, name="election-lease-seconds", help_text="the Lease's duration", parse=parse_count)
    update_status: bool = _flag(True, name="update-status", help_text="write Ingress status while leading",
                                parse=parse_bool)
    update_status_on_shutdown: bool = _flag(True, name="update-status-on-shutdown",
                                            help_text="clear the Ingresses' status when the leader stops and no "
                                                      "other replica runs", parse=parse_bool)
    publish_service: str | None = _flag(None, name="publish-service",
                                        help_text="status addresses from this Service, NS/NAME")
    publish_status_address: str | None = _flag(None, name="publish-status-address",
                                               help_text="status addresses, comma-separated")


@dataclass(frozen=True, kw_only=True)
class ReloadSettings:
    # ingress-nginx's flag and default: a token bucket of one sync, refilled at this rate. Here it limits reloads
    # only; route, endpoint and certificate changes reach nginx's Lua at once.
    sync_rate_limit: float = _flag(0.3, name="sync-rate-limit",
                                   help_text="nginx reloads per second at most; a change that needs a reload waits "
                                   "for the next one, changes that need none apply at once", parse=parse_rate)
    # Old workers drain for up to worker_shutdown_timeout (240 s) after each reload: without a bound, a reload
    # storm with long requests open piles them up (47 processes, 400 MiB in 30 s).
    max_draining_worker_generations: int = _flag(
        8, name="max-draining-worker-generations",
        help_text="generations of old nginx workers (one per reload) that may still be finishing their requests; "
        "past it the oldest generation stops at once, closing what it still serves", parse=parse_count)


@dataclass(frozen=True, kw_only=True)
class CniSettings:
    enabled: bool = _flag(False, name="enable-cni", help_text="run the CNI server and its workers", parse=parse_bool)
    workers: int = _flag(2, name="cni-workers", help_text="CNI worker processes", parse=parse_count)
    node_name: str | None = _flag(None, name="node-name",
                                  help_text="this node's name (its spec.podCIDR is the pod subnet)")
    pod_cidr: str | None = _flag(None, name="pod-cidr", help_text="the pod subnet when no network config gives one")


@dataclass(frozen=True, kw_only=True)
class ProxySettings:
    processes: int = _flag(2, name="proxy-processes", help_text="passthrough proxy processes sharing the HTTPS port",
                           parse=parse_count)
    hello_timeout: float = _flag(5.0, name="proxy-hello-timeout",
                                 help_text="seconds from accept until the ClientHello (and any inbound PROXY header) "
                                 "is complete", parse=parse_seconds)
    max_pending_hellos: int = _flag(1024, name="proxy-max-pending-hellos",
                                    help_text="connections per process still waiting for their ClientHello; past it "
                                    "the oldest is closed", parse=parse_count)
    connect_timeout: float = _flag(5.0, name="proxy-connect-timeout",
                                   help_text="seconds to connect to one upstream before the next", parse=parse_seconds)
    idle_timeout: float = _flag(600.0, name="proxy-idle-timeout",
                                help_text="seconds without data either way before an established connection is "
                                "closed", parse=parse_seconds)
    drain_timeout: float = _flag(5.0, name="proxy-drain-timeout",
                                 help_text="seconds open connections may finish after SIGTERM "
                                 "(keep it below supervisord's stopwaitsecs)", parse=parse_seconds)


@dataclass(frozen=True, kw_only=True)
class MetricsSettings:
    """The per-request metrics on /metrics; names, defaults and meaning are ingress-nginx's."""
    enabled: bool = _flag(True, name="enable-metrics", help_text="record per-request metrics in nginx for /metrics",
                          parse=parse_bool)
    per_host: bool = _flag(True, name="metrics-per-host", help_text="a host label on request metrics",
                           parse=parse_bool)
    per_undefined_host: bool = _flag(False, name="metrics-per-undefined-host",
                                     help_text="also count requests for hosts no Ingress defines, by their Host "
                                               "(needs --metrics-per-host)", parse=parse_bool)
    report_status_classes: bool = _flag(False, name="report-status-classes",
                                        help_text="status label 2xx, 4xx, ... instead of the code", parse=parse_bool)
    exclude_socket_metrics: str = _flag("", name="exclude-socket-metrics",
                                        help_text="request metrics neither recorded nor exported, comma-separated",
                                        parse=parse_metric_names)
    time_buckets: str = _flag("0.005,0.01,0.025,0.05,0.1,0.25,0.5,1.0,2.5,5.0,10.0", name="time-buckets",
                              help_text="bounds of the duration histograms, seconds", parse=parse_buckets)
    length_buckets: str = _flag("10.0,20.0,30.0,40.0,50.0,60.0,70.0,80.0,90.0,100.0", name="length-buckets",
                                help_text="bounds of the request and response size histograms, bytes",
                                parse=parse_buckets)
    size_buckets: str = _flag("10.0,100.0,1000.0,10000.0,100000.0,1000000.0,10000000.0", name="size-buckets",
                              help_text="bounds of the bytes_sent histogram, bytes", parse=parse_buckets)


@dataclass(frozen=True, kw_only=True)
class WebhookSettings:
    """The validating admission webhook (`pyngress webhook`), with ingress-nginx's flag names; off unless an
    address is given."""
    address: str | None = _flag(None, name="validating-webhook", parse=parse_listen_address,
                                help_text="serve the validating admission webhook (HTTPS) on [ADDRESS]:PORT, "
                                "such as :8443")
    certificate: str | None = _flag(None, name="validating-webhook-certificate",
                                    help_text="the webhook's certificate (PEM), re-read when it changes")
    key: str | None = _flag(None, name="validating-webhook-key",
                            help_text="the webhook's private key (PEM), re-read when it changes")
    processes: int = _flag(1, name="validating-webhook-processes", parse=parse_count,
                           help_text="webhook processes sharing the port")


def parse_edition_ids(text: str) -> str:
    """MaxMind editions separated by commas ("GeoLite2-City,GeoLite2-ASN"), each one ingress-nginx knows."""
    try:
        return ",".join(geoip2.edition_ids(text))
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


@dataclass(frozen=True, kw_only=True)
class GeoIP2Settings:
    """Where ConfigMap use-geoip2 finds its databases: files `<edition>.mmdb`, which pyngress never downloads."""
    mmdb_dir: str = _flag(geoip2.DEFAULT_DIRECTORY, name="maxmind-mmdb-dir",
                          help_text="the directory of MaxMind databases (<edition>.mmdb, from a volume or a sidecar "
                          "such as geoipupdate) that ConfigMap use-geoip2 loads; a replaced file is served within "
                          "seconds")
    edition_ids: str = _flag(geoip2.DEFAULT_EDITIONS, name="maxmind-edition-ids", parse=parse_edition_ids,
                             help_text="the editions use-geoip2 loads from --maxmind-mmdb-dir, comma-separated")


@dataclass(frozen=True, kw_only=True)
class Settings:
    source: SourceSettings = field(default_factory=SourceSettings)
    ports: PortSettings = field(default_factory=PortSettings)
    paths: PathSettings = field(default_factory=PathSettings)
    ingress: IngressSettings = field(default_factory=IngressSettings)
    leader: LeaderSettings = field(default_factory=LeaderSettings)
    reload: ReloadSettings = field(default_factory=ReloadSettings)
    cni: CniSettings = field(default_factory=CniSettings)
    proxy: ProxySettings = field(default_factory=ProxySettings)
    metrics: MetricsSettings = field(default_factory=MetricsSettings)
    webhook: WebhookSettings = field(default_factory=WebhookSettings)
    geoip2: GeoIP2Settings = field(default_factory=GeoIP2Settings)
    log_level: str = _flag("info", name="log-level", help_text="debug, info, warning or error")

    @classmethod
    def from_flags(cls, **values: Any) -> Settings:
        """Settings from flag values by their argparse names (`http_port=8080`); the rest keep defaults."""
        return cls().replace_flags(**values)

    def replace_flags(self, **values: Any) -> Settings:
        """A copy with these flags (by their argparse names) changed."""
        unknown = set(values) - {dest for dest, _, _ in _FLAGS}
        if unknown:
            raise TypeError(f"unknown setting(s) {', '.join(sorted(unknown))}")
        groups: dict[str, dict[str, Any]] = {}
        top: dict[str, Any] = {}
        for dest, group, name in _FLAGS:
            if dest in values:
                (groups.setdefault(group, {}) if group else top)[name] = values[dest]
        return replace(self, **top, **{g: replace(getattr(self, g), **changed) for g, changed in groups.items()})

    def flag_values(self) -> dict[str, Any]:
        """Every flag's value by its name without dashes ("http-port" → 8080)."""
        return {_flag_name(dest): _value(self, group=group, name=name) for dest, group, name in _FLAGS}

    def as_args(self) -> list[str]:
        """The command-line form of these settings, for handing them on to child processes."""
        return [f"--{flag}={str(value).lower() if isinstance(value, bool) else value}"
                for flag, value in self.flag_values().items() if value is not None]

    def environment(self) -> dict[str, str]:
        """These settings as PYNGRESS_* variables (unset flags left out), for the programs supervisord runs."""
        return {env_name(flag): str(value).lower() if isinstance(value, bool) else str(value)
                for flag, value in self.flag_values().items() if value is not None}


def env_name(flag: str) -> str:
    return "PYNGRESS_" + flag.upper().replace("-", "_")


def _flag_name(dest: str) -> str:
    return dest.replace("_", "-")


def _value(settings: Settings, *, group: str | None, name: str) -> Any:
    return getattr(getattr(settings, group) if group else settings, name)


def _declared_flags() -> list[tuple[str, str | None, str]]:
    """(argparse dest, group field or None, field name) for every flag, in declaration order."""
    flags: list[tuple[str, str | None, str]] = []
    for top in fields(Settings):
        if "flag" in top.metadata:
            flags.append((top.metadata["flag"].replace("-", "_"), None, top.name))
            continue
        for f in fields(top.default_factory()):  # type: ignore[operator]  # a group field always has a factory
            flags.append((f.metadata["flag"].replace("-", "_"), top.name, f.name))
    return flags


def _field_of(group: str | None, name: str) -> Any:
    owner = Settings if group is None else next(f for f in fields(Settings) if f.name == group).default_factory
    return next(f for f in fields(owner) if f.name == name)  # type: ignore[arg-type]  # a group's factory is its class


_FLAGS = _declared_flags()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add every shared flag to `parser`, defaulting from PYNGRESS_* environment variables."""
    for dest, group, name in _FLAGS:
        f = _field_of(group, name)
        flag, parse, default = f.metadata["flag"], f.metadata["parse"], f.default
        env = env_name(flag)
        env_value = os.environ.get(env)
        if parse is parse_bool:
            # `--flag`, `--flag=true` and `--flag=false` all work, as with Go's flag package.
            parser.add_argument(f"--{flag}", dest=dest, nargs="?", const=True, type=parse_bool,
                                default=_from_environment(env, value=env_value, parse=parse_bool)
                                if env_value is not None else default,
                                help=f"{f.metadata['help']} (env {env}, default {str(default).lower()})")
        else:
            parser.add_argument(f"--{flag}", dest=dest, type=parse,
                                default=_from_environment(env, value=env_value, parse=parse) if env_value else default,
                                help=f"{f.metadata['help']} (env {env}, default {default})")


def from_namespace(ns: argparse.Namespace) -> Settings:
    return Settings.from_flags(**{dest: getattr(ns, dest) for dest, _, _ in _FLAGS})


def parse(argv: Sequence[str] | None = None, prog: str = "pyngress") -> Settings:
    parser = argparse.ArgumentParser(prog=prog)
    add_arguments(parser)
    return from_namespace(parser.parse_args(argv))

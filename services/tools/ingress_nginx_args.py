"""`pyngress nginx-ingress-controller ARGS`: ingress-nginx's entrypoint, so that swapping only the image of an
ingress-nginx Deployment (its static deploy.yaml or its Helm chart) runs pyngress.

The image installs `deploy/nginx-ingress-controller` as `/nginx-ingress-controller`; it execs this command
with the container's arguments. Here they are parsed as ingress-nginx parses them (spf13/pflag, plus Go's
`flag` spellings), translated into `pyngress up` flags, and `pyngress up` is exec'd.

`FLAGS` is the table: every flag ingress-nginx's controller accepts (its documented list, `--profiler-address`,
and the klog flags it registers from Go's flag set), each with its type, ingress-nginx's default and one of:
- `Maps`: a pyngress flag does the same (most keep ingress-nginx's name);
- `Ignored`: accepted and named once in the log at start, with why ignoring it is harmless.
pyngress's own flags (`--manifests`, `--run-dir`, ...) are passed on as they are. Anything else is refused,
as ingress-nginx refuses an unknown flag.

Facts (flag names, types and defaults) are from ingress-nginx v1.15 (pkg/flags/flags.go,
docs/user-guide/cli-arguments.md) and klog v2.140 (klog.go).
"""
from __future__ import annotations

import argparse
import ipaddress
import logging
import math
import os
import re
import shutil
import sys
import urllib.parse
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Sequence

from services.common import logs
from services.common import settings as settings_mod

COMPONENT = "nginx-ingress-controller"
INGRESS_NGINX_VERSION = "v1.15"  # the release whose flags the table lists


class ArgumentsError(Exception):
    """The arguments do not parse (an unknown flag, a missing or malformed value): ingress-nginx would not
    start either."""


# --- values, parsed as Go parses them -------------------------------------------------------------------

_GO_TRUE = {"1", "t", "T", "TRUE", "true", "True"}
_GO_FALSE = {"0", "f", "F", "FALSE", "false", "False"}


def go_bool(text: str) -> bool:
    """strconv.ParseBool."""
    if text in _GO_TRUE:
        return True
    if text in _GO_FALSE:
        return False
    raise ValueError(f"parse error on {text!r}: expected true or false (1, t, T, TRUE, true, True or 0, f, ...)")


_GO_INT_BASE0 = re.compile(r"[+-]?(0[xX]_?[0-9a-fA-F]+(_[0-9a-fA-F]+)*|0[oO]_?[0-7]+(_[0-7]+)*|0[bB]_?[01]+(_[01]+)*"
                           r"|0(_?[0-7]+)*|[1-9](_?[0-9]+)*)")


def go_int(text: str, *, bits: int = 64, unsigned: bool = False, base0: bool = True) -> int:
    """strconv.ParseInt(text, 0, bits) as pflag's and Go flag's integers use it (a leading 0 is octal, 0x hex,
    underscores between digits); with base0=False, ParseInt(text, 10, bits) as klog's levels use it."""
    if base0:
        if not _GO_INT_BASE0.fullmatch(text) or (unsigned and text[0] in "+-"):
            raise ValueError(f"invalid syntax: {text!r} is not an integer")
        sign = -1 if text[0] == "-" else 1
        digits = text.lstrip("+-").replace("_", "")
        if len(digits) > 1 and digits[0] == "0" and digits[1] not in "xXoObB":
            value = int(digits[1:], 8)  # Go's legacy octal: "010" is 8
        else:
            value = int(digits, 0)
        value *= sign
    else:
        if not re.fullmatch(r"[+-]?[0-9]+", text):
            raise ValueError(f"invalid syntax: {text!r} is not a decimal integer")
        value = int(text)
    low, high = (0, 2 ** bits - 1) if unsigned else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    if not low <= value <= high:
        raise ValueError(f"value out of range: {text}")
    return value


_FLOAT32_MAX = 3.4028234663852886e38


def go_float(text: str, *, bits: int = 64) -> float:
    """strconv.ParseFloat, closely enough for flags pyngress only validates (decimal, hex, inf, nan)."""
    candidate = text.strip()
    try:
        value = float.fromhex(candidate) if re.match(r"[+-]?0[xX]", candidate) else float(candidate.replace("_", "x"))
    except ValueError:
        raise ValueError(f"invalid syntax: {text!r} is not a number") from None
    if bits == 32 and math.isfinite(value) and abs(value) > _FLOAT32_MAX:
        raise ValueError(f"value out of range: {text}")
    return value


_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)")


def go_duration(text: str) -> float:
    """time.ParseDuration, in seconds: "30s", "1h30m", "1.5h"; a bare number must be 0."""
    body = text[1:] if text[:1] in "+-" else text
    sign = -1.0 if text[:1] == "-" else 1.0
    if body == "0":
        return 0.0
    position, total = 0, 0.0
    while position < len(body):
        match = _DURATION_PART.match(body, position)
        if not match:
            break
        total += float(match.group(1)) * _DURATION_UNITS[match.group(2)]
        position = match.end()
    if not body or position != len(body):
        raise ValueError(f"time: invalid duration {text!r} (a number with a unit: 30s, 10m, 1h)")
    return sign * total


def go_ip(text: str) -> str:
    """net.ParseIP (no zone)."""
    try:
        if "%" in text:
            raise ValueError
        return str(ipaddress.ip_address(text.strip()))
    except ValueError:
        raise ValueError(f"failed to parse IP: {text!r}") from None


def go_float_list(text: str) -> tuple[float, ...]:
    """pflag's float64 slice: comma-separated. The brackets and spaces of its printed form are tolerated."""
    return tuple(go_float(item) for item in text.strip().strip("[]").replace(" ", ",").split(",") if item)


def go_string_list(text: str) -> tuple[str, ...]:
    """pflag's string slice: comma-separated."""
    return tuple(item.strip() for item in text.split(",") if item.strip())


_KLOG_SEVERITIES = ("INFO", "WARNING", "ERROR", "FATAL")


def klog_severity(text: str) -> int:
    """klog's severity flags: a name (any case) or a number."""
    if text.upper() in _KLOG_SEVERITIES:
        return _KLOG_SEVERITIES.index(text.upper())
    return go_int(text, bits=32, base0=False)


def klog_vmodule(text: str) -> str:
    """klog's -vmodule: comma-separated pattern=N, N >= 0."""
    for item in filter(None, text.split(",")):
        pattern, equals, level = item.partition("=")
        if not equals or not pattern or not level or "=" in level or go_int(level, bits=32, base0=False) < 0:
            raise ValueError("syntax error: expect comma-separated list of filename=N")
    return text


def klog_trace_location(text: str) -> str:
    """klog's -log_backtrace_at: empty, or file.go:N with N > 0."""
    if text:
        file, colon, line = text.partition(":")
        if not colon or "." not in file or ":" in line or go_int(line, base0=False) <= 0:
            raise ValueError("syntax error: expect file.go:234")
    return text


@dataclass(frozen=True)
class Kind:
    """A flag's Go type: how its text parses, and whether a bare `--flag` means true."""
    name: str
    parse: Callable[[str], Any]
    is_bool: bool = False


BOOL = Kind("bool", go_bool, is_bool=True)
STRING = Kind("string", str)
INT = Kind("int", go_int)
UINT32 = Kind("uint32", lambda text: go_int(text, bits=32, unsigned=True))
UINT64 = Kind("uint64", lambda text: go_int(text, unsigned=True))
FLOAT32 = Kind("float32", lambda text: go_float(text, bits=32))
FLOAT64 = Kind("float64", go_float)
DURATION = Kind("duration", go_duration)
IP = Kind("ip", go_ip)
FLOAT_LIST = Kind("float64Slice", go_float_list)
STRING_LIST = Kind("strings", go_string_list)
LEVEL = Kind("klog level", lambda text: go_int(text, bits=32, base0=False))
SEVERITY = Kind("klog severity", klog_severity)
VMODULE = Kind("klog vmodule", klog_vmodule)
TRACE = Kind("klog trace location", klog_trace_location)


# --- what becomes of each flag --------------------------------------------------------------------------

@dataclass(frozen=True)
class Maps:
    """A pyngress flag does this; `convert` turns the parsed value into that flag's text."""
    to: str
    convert: Callable[[Any], str] | None = None
    # ingress-nginx reads an empty value as "not set": then pyngress is not given the flag either.
    empty_is_unset: bool = False


@dataclass(frozen=True)
class Ignored:
    """Accepted, named once in the log at start; `because` says why ignoring it is harmless."""
    because: str


@dataclass(frozen=True)
class Version:
    """`--version`: print the version and exit."""


@dataclass(frozen=True)
class Flag:
    name: str  # as given on the command line, without dashes
    kind: Kind
    default: str  # ingress-nginx's default, in command-line form
    doc: str  # what it does in ingress-nginx, in one line
    action: Maps | Ignored | Version
    secret: bool = False  # never write its value to the log

    def parse(self, text: str) -> Any:
        try:
            return self.kind.parse(text)
        except ValueError as err:
            raise ArgumentsError(f"invalid argument {text!r} for --{self.name} ({self.kind.name}): {err}") from None


def _port(value: int) -> str:
    return str(value)  # decimal, whatever Go spelling it came in ("0x50" is 80)


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _floats(values: tuple[float, ...]) -> str:
    return ",".join(repr(value) for value in values)


def _lease_seconds(ttl: float) -> str:
    # ingress-nginx replaces a TTL <= 0 by 30s; pyngress's lease is whole seconds, at least 1.
    return str(max(1, math.ceil(ttl))) if ttl > 0 else "30"


def _log_level(verbosity: int) -> str:
    # klog: V(2) is ingress-nginx's steady-state detail, V(3) and up its debugging output.
    return "debug" if verbosity >= 3 else "info"


_NO_TCP_API = ("pyngress's nginx status and configuration API is a Unix socket in the run directory (root-only); "
               "nothing internal listens on TCP")
_NO_METRICS = ("pyngress's nginx adds requests up per label set before handing them on (no batch of single "
               "requests to bound), and /metrics has classic histograms only (no native ones)")
_KLOG = "a klog setting; pyngress writes one key=value line per event to stderr"
_NO_MAXMIND = ("pyngress downloads no MaxMind database (offline, and no license key is sent anywhere): provide the "
               "<edition>.mmdb files in --maxmind-mmdb-dir (default /etc/ingress-controller/geoip) with a volume or a "
               "sidecar such as geoipupdate; a replaced file is served within seconds")
_STRICTER = "pyngress always does this, and this flag cannot turn it off"

FLAGS: tuple[Flag, ...] = (
    # -- sources and scope
    Flag("kubeconfig", STRING, "", "kubeconfig file with the API server and credentials",
         Maps("kubeconfig", empty_is_unset=True)),
    Flag("apiserver-host", STRING, "", "API server URL, overriding the kubeconfig's or the in-cluster one",
         Ignored("pyngress talks to the API server of --kubeconfig, else of the pod's service account (in-cluster); "
                 "to use another, give a kubeconfig naming it")),
    Flag("certificate-authority", STRING, "", "CA file for --apiserver-host",
         Ignored("used only with --apiserver-host; pyngress verifies the API server with the kubeconfig's or the "
                 "service account's CA")),
    Flag("watch-namespace", STRING, "", "only objects of this namespace (all when empty)",
         Maps("watch-namespace", empty_is_unset=True)),
    Flag("watch-namespace-selector", STRING, "", "only namespaces whose labels match this selector",
         Maps("watch-namespace-selector", empty_is_unset=True)),
    Flag("sync-period", DURATION, "0s", "period of forced resyncs of the object stores",
         Ignored("pyngress's watches re-list after every error or expiry; no periodic resync is needed")),
    Flag("sync-rate-limit", FLOAT32, "0.3", "upper limit of syncs per second",
         Maps("sync-rate-limit", repr)),
    Flag("disable-sync-events", BOOL, "false", "do not create Sync Events",
         Ignored("pyngress creates no Events")),
    Flag("dynamic-configuration-retries", INT, "15", "retries of a failed push of dynamic configuration",
         Ignored("pyngress re-pushes its tables until nginx takes them")),
    # -- which Ingresses are ours
    Flag("ingress-class", STRING, "nginx", "the kubernetes.io/ingress.class annotation value that is ours",
         Maps("ingress-class")),
    Flag("controller-class", STRING, "k8s.io/ingress-nginx", "the IngressClass spec.controller that is ours",
         Maps("controller-class")),
    Flag("watch-ingress-without-class", BOOL, "false", "also serve Ingresses that name no class",
         Maps("watch-ingress-without-class", _bool)),
    Flag("ingress-class-by-name", BOOL, "false", "also match IngressClasses by --ingress-class name",
         Maps("ingress-class-by-name", _bool)),
    Flag("annotations-prefix", STRING, "nginx.ingress.kubernetes.io", "the annotations' prefix",
         Maps("annotations-prefix")),
    Flag("disable-catch-all", BOOL, "false", "ignore catch-all Ingresses (those with spec.defaultBackend)",
         Maps("disable-catch-all", _bool)),
    Flag("disable-svc-external-name", BOOL, "false", "refuse ExternalName Services as backends",
         Maps("disable-svc-external-name", _bool)),
    Flag("enable-annotation-validation", BOOL, "true", "validate annotation values",
         Ignored(f"{_STRICTER}: every annotation value passes an allow-list validator; one that fails is set "
                 "aside as ingress-nginx sets it aside (ignored with a warning, or its paths denied for an "
                 "access-control annotation: docs/migrating.md), and never reaches nginx.conf")),
    Flag("deep-inspect", BOOL, "true", "inspect Ingress objects for dangerous content",
         Ignored(f"{_STRICTER}: every annotation and path is checked before it reaches nginx.conf")),
    Flag("default-backend-service", STRING, "", "the Service that answers requests no Ingress matches",
         Maps("default-backend-service", empty_is_unset=True)),
    Flag("default-ssl-certificate", STRING, "", "the Secret served when no other certificate matches",
         Maps("default-ssl-certificate", empty_is_unset=True)),
    Flag("enable-ssl-chain-completion", BOOL, "false", "fetch missing intermediate certificates (AIA)",
         Ignored("pyngress serves the chain the Secret holds and fetches nothing (ingress-nginx deprecated the "
                 "flag): put the intermediate certificates in tls.crt after the server's own")),
    Flag("enable-ssl-passthrough", BOOL, "false", "pass TLS through by SNI (ssl-passthrough annotation)",
         Maps("enable-ssl-passthrough", _bool)),
    Flag("enable-topology-aware-routing", BOOL, "false", "prefer endpoints of the client's zone",
         Ignored("pyngress balances over every ready endpoint of the Service, whatever its zone hints say: every "
                 "request is still served, at worst by an endpoint in another zone")),
    Flag("tcp-services-configmap", STRING, "", "the ConfigMap of TCP services to expose",
         Maps("tcp-services-configmap", empty_is_unset=True)),
    Flag("udp-services-configmap", STRING, "", "the ConfigMap of UDP services to expose",
         Maps("udp-services-configmap", empty_is_unset=True)),
    Flag("configmap", STRING, "", "the controller ConfigMap",
         Maps("configmap", empty_is_unset=True)),
    # -- status and leader election
    Flag("publish-service", STRING, "", "status addresses from this Service",
         Maps("publish-service", empty_is_unset=True)),
    Flag("publish-status-address", STRING, "", "status addresses, comma-separated",
         Maps("publish-status-address", empty_is_unset=True)),
    Flag("update-status", BOOL, "true", "write the Ingresses' load-balancer status",
         Maps("update-status", _bool)),
    Flag("update-status-on-shutdown", BOOL, "true", "clear the Ingresses' status when the last replica stops",
         Maps("update-status-on-shutdown", _bool)),
    Flag("status-update-interval", INT, "60", "seconds between status checks",
         Ignored("pyngress updates the status when its addresses or the Ingresses change")),
    Flag("report-node-internal-ip-address", BOOL, "false", "status addresses from Nodes' internal IPs",
         Ignored("pyngress reads no Nodes for the Ingresses' status (no permission on them is needed): give the "
                 "addresses with --publish-status-address, or the Service in front with --publish-service")),
    Flag("election-id", STRING, "ingress-controller-leader", "the leader election Lease's name",
         Maps("election-id")),
    Flag("election-ttl", DURATION, "30s", "the leader election Lease's duration",
         Maps("election-lease-seconds", _lease_seconds)),
    Flag("disable-leader-election", BOOL, "false", "every replica writes status, without a Lease",
         Ignored("pyngress always elects one leader to write status; the others serve traffic the same")),
    # -- ports and health
    Flag("http-port", INT, "80", "HTTP port", Maps("http-port", _port)),
    Flag("https-port", INT, "443", "HTTPS port", Maps("https-port", _port)),
    Flag("healthz-port", INT, "10254", "/healthz and /metrics port", Maps("healthz-port", _port)),
    Flag("healthz-host", STRING, "", "the healthz port's address (every address when empty)", Maps("healthz-host")),
    Flag("status-port", INT, "10246", "nginx's internal status and Lua configuration port",
         Maps("status-port", _port)),
    Flag("ssl-passthrough-proxy-port", INT, "442", "nginx's internal TLS port behind the passthrough proxy",
         Maps("ssl-passthrough-proxy-port", _port)),
    Flag("stream-port", INT, "10247", "nginx's internal Lua TCP/UDP configuration port", Ignored(_NO_TCP_API)),
    Flag("default-server-port", INT, "8181", "internal port of the default (catch-all) server",
         Ignored("pyngress's default server listens on the HTTP and HTTPS ports only")),
    Flag("health-check-path", STRING, "/healthz", "the health check's path",
         Ignored("pyngress serves /healthz only: point the probes at /healthz")),
    Flag("health-check-timeout", INT, "10", "seconds a health check may take",
         Ignored("pyngress's /healthz answers from the syncer's state without probing nginx")),
    Flag("internal-logger-address", STRING, "127.0.0.1:11514", "internal syslog address (chroot)",
         Ignored("pyngress runs nginx without chroot and opens no syslog port")),
    Flag("shutdown-grace-period", INT, "0", "seconds to wait after SIGTERM before stopping nginx",
         Ignored("pyngress stops nginx at SIGTERM with QUIT, which lets in-flight requests finish; delay the "
                 "stop with a preStop sleep if load balancers need time to drop the pod")),
    Flag("post-shutdown-grace-period", INT, "10", "seconds to wait after nginx stopped before exiting",
         Ignored("supervisord exits as soon as nginx has drained")),
    # -- admission webhook
    Flag("validating-webhook", STRING, "", "address of the admission webhook server",
         Maps("validating-webhook", empty_is_unset=True)),
    Flag("validating-webhook-certificate", STRING, "", "the admission webhook's certificate",
         Maps("validating-webhook-certificate", empty_is_unset=True)),
    Flag("validating-webhook-key", STRING, "", "the admission webhook's key",
         Maps("validating-webhook-key", empty_is_unset=True)),
    Flag("disable-full-test", BOOL, "false", "admission tests only the changed Ingress",
         Ignored("pyngress's webhook never runs nginx -t: it reviews the Ingress with the syncer's validators and "
                 "model against the other Ingresses it knows, which is neither a full nor a partial nginx test")),
    # -- metrics and profiling
    Flag("enable-metrics", BOOL, "false", "collect nginx's request metrics", Maps("enable-metrics", _bool)),
    Flag("metrics-per-host", BOOL, "true", "request metrics per host", Maps("metrics-per-host", _bool)),
    Flag("metrics-per-undefined-host", BOOL, "false", "request metrics for hosts no Ingress defines",
         Maps("metrics-per-undefined-host", _bool)),
    Flag("report-status-classes", BOOL, "false", "status classes (2xx) instead of codes in metrics",
         Maps("report-status-classes", _bool)),
    Flag("exclude-socket-metrics", STRING_LIST, "", "request metrics not to collect",
         Maps("exclude-socket-metrics", ",".join)),
    Flag("monitor-max-batch-size", INT, "10000", "batch size of nginx's metrics", Ignored(_NO_METRICS)),
    Flag("time-buckets", FLOAT_LIST, "0.005,0.01,0.025,0.05,0.1,0.25,0.5,1,2.5,5,10", "request time buckets",
         Maps("time-buckets", _floats)),
    Flag("length-buckets", FLOAT_LIST, "10,20,30,40,50,60,70,80,90,100", "request length buckets",
         Maps("length-buckets", _floats)),
    Flag("size-buckets", FLOAT_LIST, "10,100,1000,10000,100000,1e+06,1e+07", "response size buckets",
         Maps("size-buckets", _floats)),
    Flag("bucket-factor", FLOAT64, "0", "native histograms' bucket factor", Ignored(_NO_METRICS)),
    Flag("max-buckets", UINT32, "100", "native histograms' maximum bucket count", Ignored(_NO_METRICS)),
    Flag("profiling", BOOL, "true", "Go profiler at /debug/pprof",
         Ignored("pyngress has no profiler endpoint (nothing is exposed)")),
    Flag("profiler-port", INT, "10245", "the Go profiler's port", Ignored("pyngress opens no profiler port")),
    Flag("profiler-address", IP, "127.0.0.1", "the Go profiler's address", Ignored("pyngress opens no profiler port")),
    # -- GeoIP
    Flag("maxmind-license-key", STRING, "", "MaxMind license key for GeoLite2 downloads", Ignored(_NO_MAXMIND),
         secret=True),
    Flag("maxmind-mirror", STRING, "", "mirror URL for GeoLite2 downloads", Ignored(_NO_MAXMIND)),
    Flag("maxmind-edition-ids", STRING, "GeoLite2-City,GeoLite2-ASN", "GeoLite2 databases to download",
         Maps("maxmind-edition-ids")),
    Flag("maxmind-retries-count", INT, "1", "GeoLite2 download attempts", Ignored(_NO_MAXMIND)),
    Flag("maxmind-retries-timeout", DURATION, "0s", "delay between GeoLite2 download attempts", Ignored(_NO_MAXMIND)),
    # -- the program
    Flag("version", BOOL, "false", "print the version and exit", Version()),
    Flag("v", LEVEL, "0", "log verbosity (klog)", Maps("log-level", _log_level)),
    Flag("vmodule", VMODULE, "", "per-file log verbosity (klog)", Ignored(_KLOG)),
    Flag("logtostderr", BOOL, "true", "log to stderr instead of files (klog)", Ignored(_KLOG)),
    Flag("alsologtostderr", BOOL, "false", "log to stderr as well as files (klog)", Ignored(_KLOG)),
    Flag("alsologtostderrthreshold", SEVERITY, "INFO", "severity also logged to stderr (klog)", Ignored(_KLOG)),
    Flag("stderrthreshold", SEVERITY, "ERROR", "severity logged to stderr besides files (klog)", Ignored(_KLOG)),
    Flag("legacy_stderr_threshold_behavior", BOOL, "true", "stderrthreshold ignored with logtostderr (klog)",
         Ignored(_KLOG)),
    Flag("log_dir", STRING, "", "directory of log files (klog)", Ignored(_KLOG)),
    Flag("log_file", STRING, "", "log file (klog)", Ignored(_KLOG)),
    Flag("log_file_max_size", UINT64, "1800", "maximum log file size in MB (klog)", Ignored(_KLOG)),
    Flag("log_backtrace_at", TRACE, "", "stack trace when logging at file:N (klog)", Ignored(_KLOG)),
    Flag("add_dir_header", BOOL, "false", "directory in log headers (klog)", Ignored(_KLOG)),
    Flag("skip_headers", BOOL, "false", "no header prefixes (klog)", Ignored(_KLOG)),
    Flag("skip_log_headers", BOOL, "false", "no headers in log files (klog)", Ignored(_KLOG)),
    Flag("one_output", BOOL, "false", "each line to its own severity's file only (klog)", Ignored(_KLOG)),
)

BY_NAME: dict[str, Flag] = {flag.name: flag for flag in FLAGS}
HELP_FLAGS = ("help", "h")


# --- parsing ----------------------------------------------------------------------------------------------

def pyngress_flags() -> dict[str, bool]:
    """`pyngress up`'s own flags by name (no dashes) → whether a bare `--flag` means true; read from its parser,
    so that however the settings are stored this follows them."""
    parser = argparse.ArgumentParser(add_help=False)
    settings_mod.add_arguments(parser)
    return {option[2:]: action.nargs == "?" and action.const is True
            for action in parser._actions for option in action.option_strings if option.startswith("--")}


@dataclass(frozen=True)
class Given:
    """One flag as the command line gave it (the last time, when given more than once)."""
    flag: Flag
    text: str
    value: Any

    @property
    def shown(self) -> str:
        """The value for the log: a secret is never written; a URL loses its password."""
        if self.flag.secret:
            return "<redacted>" if self.text else ""
        parts = urllib.parse.urlsplit(self.text) if "@" in self.text and "://" in self.text else None
        if parts and parts.password is not None:
            netloc = f"{parts.username}:<redacted>@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
            return urllib.parse.urlunsplit(parts._replace(netloc=netloc))
        return self.text

    @property
    def is_default(self) -> bool:
        return self.value == self.flag.parse(self.flag.default)


@dataclass
class Translation:
    """What the ingress-nginx command line becomes."""
    up_args: list[str]  # `pyngress up` flags, `--flag=value`
    ignored: list[Given]  # in the order given, each flag once
    notes: list[str] = field(default_factory=list)  # other things the log should say once
    show_version: bool = False
    show_help: bool = False


_REFERENCE = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


def expand_references(text: str, environ: dict[str, str], notes: list[str]) -> str:
    """`$(VAR)` as the kubelet expands it in a container's args. In a pod it has done so already; outside one
    (podman, docker, a shell) nothing has, and the Deployment's args are taken from the environment here. A
    reference to a variable that is not set stays as it is, as the kubelet leaves it, and the log says so."""
    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in environ:
            return environ[name]
        note = f"$({name}) is not expanded: {name} is not in the environment"
        if note not in notes:
            notes.append(note)
        return match.group(0)
    return _REFERENCE.sub(replace, text)


def _split(arg: str) -> tuple[str, str | None]:
    """`--name=value` / `-name value` / `--name` → (name, value or None). pflag's `-v2` is `-v 2`."""
    body = arg[2:] if arg.startswith("--") else arg[1:]
    name, equals, value = body.partition("=")
    if not arg.startswith("--") and not equals and name not in BY_NAME and re.fullmatch(r"v-?[0-9]+", name):
        return "v", name[1:]
    return name, value if equals else None


def parse_args(argv: Sequence[str], environ: dict[str, str] | None = None) -> Translation:
    """The translation of an ingress-nginx command line; raises ArgumentsError."""
    environ = dict(os.environ if environ is None else environ)
    own = pyngress_flags()
    notes: list[str] = []
    given: dict[str, Given] = {}  # ingress-nginx flags, by name, last value wins (as pflag's scalars)
    passed: dict[str, str] = {}  # pyngress's own flags → value text
    order: list[str] = []  # flags (either kind) in the order first given
    positional: list[str] = []
    args = list(argv)
    # The Deployment's args start with the program's own path (the image has no other entrypoint for it).
    if args and not args[0].startswith("-") and Path(args[0]).name == COMPONENT:
        args = args[1:]
    i = 0
    show_help = False
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "--":
            positional.extend(args[i:])
            break
        if not arg.startswith("-") or arg == "-":
            positional.append(arg)
            continue
        name, text = _split(arg)
        if name in HELP_FLAGS:
            show_help = True
            continue
        flag = BY_NAME.get(name)
        if flag is None and name not in own:
            raise ArgumentsError(f"unknown flag: {arg.partition('=')[0]} (not an ingress-nginx {INGRESS_NGINX_VERSION} "
                                 "flag nor a pyngress flag; ingress-nginx refuses it too)")
        is_bool = flag.kind.is_bool if flag else own[name]
        if text is None:
            if is_bool:
                text = "true"
            elif i < len(args):
                text, i = args[i], i + 1  # pflag takes the next argument whatever it looks like
            else:
                raise ArgumentsError(f"flag needs an argument: {arg}")
        text = expand_references(text, environ, notes)
        if name not in order:
            order.append(name)
        if flag:
            given[name] = Given(flag, text, flag.parse(text))
        else:
            passed[name] = text
    if positional:
        notes.append(f"arguments ignored, as ingress-nginx ignores them: {' '.join(positional)} "
                     "(a boolean flag takes its value as --flag=false, not --flag false)")
    translation = Translation(up_args=[], ignored=[], notes=notes, show_help=show_help,
                              show_version=any(isinstance(g.flag.action, Version) and g.value for g in given.values()))
    if show_help or translation.show_version:
        return translation
    up: dict[str, str] = {}
    for name in order:
        if name in passed:
            up[name] = passed[name]
            continue
        one = given[name]
        action = one.flag.action
        if isinstance(action, Maps):
            if action.empty_is_unset and one.text == "":
                up.pop(action.to, None)
            else:
                up[action.to] = action.convert(one.value) if action.convert else one.text
        elif isinstance(action, Ignored):
            translation.ignored.append(one)
    translation.up_args = [f"--{name}={value}" for name, value in up.items()]
    return translation


def ignore_reason(flag: Flag) -> str:
    action = flag.action
    assert isinstance(action, Ignored)
    return action.because


def usage() -> str:
    lines = [f"usage: /nginx-ingress-controller [FLAGS]  (ingress-nginx {INGRESS_NGINX_VERSION}'s flags; "
             "pyngress's own flags are accepted too: pyngress up --help)", ""]
    for flag in FLAGS:
        action = flag.action
        if isinstance(action, Maps):
            what = f"→ pyngress --{action.to}"
        elif isinstance(action, Version):
            what = "prints pyngress's version"
        else:
            what = f"ignored: {action.because}"
        lines.append(f"  --{flag.name} {flag.kind.name} (default {flag.default!r}): {flag.doc}; {what}")
    return "\n".join(lines)


# --- the command ------------------------------------------------------------------------------------------

def add_arguments(parser: argparse.ArgumentParser) -> None:
    # Go's flag syntax is not argparse's (`-flag`, a boolean's `--flag` then a positional, `-v2`...): every
    # argument is taken raw and parsed by parse_args. argparse would treat the dashed ones as its own options
    # (and refuse them) unless no character counts as an option prefix for this subcommand; -h and --help
    # then reach parse_args too, which prints ingress-nginx's flags.
    parser.add_argument("args", nargs=argparse.REMAINDER, help="ingress-nginx's controller arguments")
    parser.prefix_chars = "\0"


def pyngress_executable() -> str:
    beside_python = Path(sys.executable).parent / "pyngress"
    return str(beside_python) if beside_python.exists() else shutil.which("pyngress") or "pyngress"


def log_translation(log: logging.Logger, translation: Translation) -> None:
    """The start's log: each ignored flag once, with why; then what runs."""
    for note in translation.notes:
        log.warning(note)
    for one in translation.ignored:
        # Given at ingress-nginx's default, ignoring it changes nothing ingress-nginx would have done.
        level = logging.INFO if one.is_default else logging.WARNING
        log.log(level, "ingress-nginx flag ignored", extra=logs.kv(flag=f"--{one.flag.name}", value=one.shown,
                                                                     reason=ignore_reason(one.flag)))


def run(namespace: argparse.Namespace) -> int:
    log = logs.setup(COMPONENT)
    try:
        translation = parse_args(namespace.args)
    except ArgumentsError as err:
        log.error(f"{err}; see /nginx-ingress-controller --help")
        return 2
    if translation.show_help:
        print(usage())
        return 0
    if translation.show_version:
        print(f"pyngress {metadata.version('pyngress')} (answering to ingress-nginx {INGRESS_NGINX_VERSION}'s "
              "/nginx-ingress-controller)")
        return 0
    log_translation(log, translation)
    executable = pyngress_executable()
    log.info("running pyngress up for ingress-nginx's arguments", extra=logs.kv(args=" ".join(translation.up_args)))
    for handler in logging.getLogger().handlers:
        handler.flush()
    # exec: the container's signals reach `pyngress up`, which execs supervisord in turn.
    os.execvp(executable, [executable, "up", *translation.up_args])
    return 0  # not reached

"""The CNI 1.1 rules a request is parsed by (in the cniserver and again in the cniworker), one case each."""
from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from proto.cni import CniError
from services.common.cni_config.network import parse_network
from services.common.cni_config.request import cni_version_for_reply, decode_body, parse_request, version_result
from services.common.cni_config.runtime_env import AttachmentId, parse_cni_args

NETWORK = {"cniVersion": "1.1.0", "name": "pods", "type": "pyngress-cni"}
ATTACH = {"CNI_CONTAINERID": "c0ffee", "CNI_NETNS": "/var/run/netns/p1", "CNI_IFNAME": "eth0"}
POD = "K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0;K8S_POD_UID=6f1d0c1e-8a49-4d2c-9f3e-1b2a3c4d5e6f"


def request(command: str, config: dict | None = None, **env: str):
    return parse_request({"CNI_COMMAND": command, **env}, json.dumps(NETWORK if config is None else config).encode())


def error_of(call) -> CniError:
    with pytest.raises(CniError) as caught:
        call()
    return caught.value


def test_an_add_yields_the_request_a_worker_receives():
    env = {"CNI_COMMAND": "ADD", "CNI_ARGS": POD, "CNI_PATH": "/opt/cni/bin", **ATTACH}
    req = parse_request(*decode_body(json.dumps({"env": env, "config": base64.b64encode(json.dumps(NETWORK).encode())
                                                 .decode()}).encode()))
    assert (req.env.command, req.env.container_id, req.env.netns, req.env.ifname, req.env.path) == \
        ("ADD", "c0ffee", "/var/run/netns/p1", "eth0", "/opt/cni/bin")
    assert req.env.args == {"K8S_POD_NAMESPACE": "default", "K8S_POD_NAME": "web-0",
                            "K8S_POD_UID": "6f1d0c1e-8a49-4d2c-9f3e-1b2a3c4d5e6f"}
    assert req.network.raw == NETWORK
    assert (req.network.cni_version, req.network.name, req.network.type) == ("1.1.0", "pods", "pyngress-cni")


@pytest.mark.parametrize("command, env", [
    ("DEL", {"CNI_CONTAINERID": "c1", "CNI_IFNAME": "eth0"}),  # no netns: it may be gone already
    ("CHECK", {**ATTACH, "CNI_ARGS": "K8S_POD_NAMESPACE=default"}),  # only ADD/UPDATE need the pod
    ("STATUS", {}),
    ("GC", {}),
    ("VERSION", {}),
])
def test_each_command_needs_only_its_own_variables(command, env):
    assert request(command, **env).env.command == command


@pytest.mark.parametrize("command, env, missing", [
    ("ADD", {"CNI_ARGS": POD}, "CNI_CONTAINERID, CNI_NETNS, CNI_IFNAME not set"),
    ("CHECK", {"CNI_CONTAINERID": "c1", "CNI_IFNAME": "eth0"}, "CNI_NETNS not set"),
    ("UPDATE", {"CNI_CONTAINERID": "c1", "CNI_NETNS": "/n", "CNI_ARGS": POD}, "CNI_IFNAME not set"),
    ("DEL", {"CNI_CONTAINERID": "c1"}, "CNI_IFNAME not set"),
])
def test_missing_variables_are_code_4_and_named(command, env, missing):
    err = error_of(lambda: request(command, **env))
    assert err.code == 4 and missing in err.msg


@pytest.mark.parametrize("name", ["CNI_ARGS", "CNI_NETNS", "CNI_PATH"])
def test_a_value_that_is_not_utf8_is_code_4(name):
    # JSON carries lone surrogates ("\udcff"); they used to pass and fail later, packing the request (a 500).
    env = {"CNI_ARGS": POD, **ATTACH, name: "/x\udcff"}
    err = error_of(lambda: request("ADD", **env))
    assert (err.code, err.msg) == (4, f"{name} is not valid UTF-8 text")


@pytest.mark.parametrize("container_id, valid", [
    ("abc", True), ("A1_b.c-d", True), ("9" * 255, True),
    ("_abc", False), ("-abc", False), (".abc", False), ("a/b", False), ("a b", False), ("a;b", False),
    ("é", False), ("9" * 256, False),
])
def test_container_id_syntax(container_id, valid):
    call = lambda: request("DEL", CNI_CONTAINERID=container_id, CNI_IFNAME="eth0")  # noqa: E731
    if valid:
        assert call().env.container_id == container_id
    else:
        assert error_of(call).code == 4


@pytest.mark.parametrize("ifname, valid", [
    ("eth0", True), ("a" * 15, True), ("net1.100", True), ("é" * 7, True),
    ("a" * 16, False), ("é" * 8, False), (".", False), ("..", False), ("a/b", False), ("a:b", False),
    ("a b", False), ("a\tb", False), ("a\x00b", False), ("a\x7fb", True),
])
def test_interface_name_syntax(ifname, valid):
    call = lambda: request("DEL", CNI_CONTAINERID="c1", CNI_IFNAME=ifname)  # noqa: E731
    if valid:
        assert call().env.ifname == ifname
    else:
        assert error_of(call).code == 4


@pytest.mark.parametrize("text, parsed", [
    ("", {}),
    ("A=1", {"A": "1"}),
    ("IgnoreUnknown=1;K8S_POD_NAME=web-0", {"IgnoreUnknown": "1", "K8S_POD_NAME": "web-0"}),
    ("K=a=b", {"K": "a=b"}),
    ("K=", {"K": ""}),
])
def test_cni_args_pairs(text, parsed):
    assert parse_cni_args(text) == parsed


@pytest.mark.parametrize("text, words", [
    ("novalue", "'novalue' is not KEY=VALUE"), ("A=1;", "'' is not KEY=VALUE"), ("=1", "'=1'"),
    ("A-B=1", "'A-B=1'"), ("A=1;A=2", "names A twice"),
])
def test_malformed_cni_args_are_code_4(text, words):
    err = error_of(lambda: parse_cni_args(text))
    assert err.code == 4 and words in err.msg


@pytest.mark.parametrize("args, words", [
    ("K8S_POD_NAMESPACE=default", "lacks K8S_POD_NAME"),
    ("K8S_POD_NAME=web-0", "lacks K8S_POD_NAMESPACE"),
    ("K8S_POD_NAMESPACE=;K8S_POD_NAME=web-0", "lacks K8S_POD_NAMESPACE"),
    ("K8S_POD_NAMESPACE=Default;K8S_POD_NAME=web-0", "K8S_POD_NAMESPACE 'Default' is not valid"),
    ("K8S_POD_NAMESPACE=default;K8S_POD_NAME=web_0", "K8S_POD_NAME 'web_0' is not valid"),
    ("K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0;K8S_POD_UID=../x", "K8S_POD_UID"),
])
def test_add_needs_a_valid_pod_identity(args, words):
    err = error_of(lambda: request("ADD", CNI_ARGS=args, **ATTACH))
    assert err.code == 4 and words in err.msg


def test_netns_must_be_an_absolute_path():
    err = error_of(lambda: request("ADD", CNI_ARGS=POD, **{**ATTACH, "CNI_NETNS": "p1"}))
    assert err.code == 4 and "CNI_NETNS" in err.msg


@pytest.mark.parametrize("config, code, words", [
    ([], 7, "must be a JSON object"),
    ({"name": "pods", "type": "pyngress-cni"}, 7, 'lacks "cniVersion"'),
    ({**NETWORK, "cniVersion": "0.3.1"}, 1, "'0.3.1' is not supported"),
    ({**NETWORK, "name": "bad name"}, 7, "network name"),
    ({k: v for k, v in NETWORK.items() if k != "type"}, 7, 'lacks "type"'),
    ({**NETWORK, "bridge": "a-bridge-name-too-long"}, 7, "bridge"),
    ({**NETWORK, "mtu": 67}, 7, "mtu 67"),
    ({**NETWORK, "mtu": "1500"}, 7, "mtu '1500'"),
    ({**NETWORK, "ipMasq": "yes"}, 7, "ipMasq"),
    ({**NETWORK, "serverSocket": "relative.sock"}, 7, "serverSocket"),
    ({**NETWORK, "ipam": "10.0.0.0/24"}, 7, "ipam must be a JSON object"),
    ({**NETWORK, "ipam": {"subnet": "10.0.0.0/33"}}, 7, "ipam.subnet"),
    ({**NETWORK, "ipam": {"subnet": "fd00::/64"}}, 7, "IPv4"),
    ({**NETWORK, "ipam": {"subnet": "10.0.0.0/31"}}, 7, "too small"),
    ({**NETWORK, "ipam": {"subnet": "10.0.0.0/24", "gateway": "10.0.1.1"}}, 7, "outside ipam.subnet"),
    ({**NETWORK, "ipam": {"subnet": "10.0.0.0/24", "rangeStart": "10.0.0.255"}}, 7, "broadcast"),
    ({**NETWORK, "ipam": {"rangeStart": "10.0.0.9", "rangeEnd": "10.0.0.3"}}, 7, "after ipam.rangeEnd"),
    ({**NETWORK, "ipam": {"gateway": "10.0.0"}}, 7, "not an IPv4 address"),
    ({**NETWORK, "ipam": {"subnet": "10.0.0.0/24", "rangestart": "10.0.0.5"}}, 2, 'rangestart="10.0.0.5"'),
])
def test_network_configuration_rules(config, code, words):
    err = error_of(lambda: request("ADD", config, CNI_ARGS=POD, **ATTACH))
    assert err.code == code and words in err.msg, err


def test_a_full_configuration_passes():
    config = {**NETWORK, "bridge": "pyngress0", "mtu": 1450, "ipMasq": True, "prevResult": {}, "dns": {},
              "ipam": {"type": "pyngress", "subnet": "10.88.0.0/16", "gateway": "10.88.0.1",
                       "rangeStart": "10.88.1.0", "rangeEnd": "10.88.1.255"}}
    network = request("ADD", config, CNI_ARGS=POD, **ATTACH).network
    assert network.raw == config
    assert (network.bridge, network.mtu, network.ip_masq, network.prev_result, network.dns) == \
        ("pyngress0", 1450, True, {}, {})
    assert (str(network.ipam.subnet), str(network.ipam.gateway), str(network.ipam.range_start),
            str(network.ipam.range_end)) == ("10.88.0.0/16", "10.88.0.1", "10.88.1.0", "10.88.1.255")


def test_gc_attachments_must_be_objects_with_a_container_id_and_an_ifname():
    gc = request("GC", {**NETWORK, "cni.dev/valid-attachments": [{"containerID": "c1", "ifname": "eth0"}]})
    assert gc.network.valid_attachments == {AttachmentId("c1", "eth0")}
    assert error_of(lambda: request("GC", {**NETWORK, "cni.dev/valid-attachments": ["c1"]})).code == 7
    # The server once let an entry without ifname through to the worker, which refused it: one rule now.
    missing_ifname = error_of(lambda: request("GC", {**NETWORK, "cni.dev/valid-attachments": [{"containerID": "c1"}]}))
    assert missing_ifname.code == 7 and '"ifname"' in missing_ifname.msg
    # libcni's older name for the list, and no list at all: nothing is valid
    older = request("GC", {**NETWORK, "cni.dev/attachments": [{"containerID": "c2", "ifname": "net1"}]})
    assert older.network.valid_attachments == {AttachmentId("c2", "net1")}
    assert request("GC").network.valid_attachments == frozenset()
    # only GC reads the list
    assert request("DEL", {**NETWORK, "cni.dev/valid-attachments": ["c1"]}, CNI_CONTAINERID="c1",
                   CNI_IFNAME="eth0").network.valid_attachments is None


def test_version_needs_no_configuration():
    assert version_result(b"") == {"cniVersion": "1.1.0", "supportedVersions": ["0.4.0", "1.0.0", "1.1.0"]}
    assert version_result(b'{"cniVersion": "0.4.0"}')["cniVersion"] == "0.4.0"
    assert error_of(lambda: version_result(b"[]")).code == 7


@pytest.mark.parametrize("body, version", [
    (json.dumps({"env": {}, "config": base64.b64encode(b'{"cniVersion": "0.4.0"}').decode()}).encode(), "0.4.0"),
    (json.dumps({"env": {}, "config": base64.b64encode(b'{"cniVersion": "7.0.0"}').decode()}).encode(), "1.1.0"),
    (b"garbage", "1.1.0"),
])
def test_errors_answer_in_the_callers_version_when_it_is_one_we_speak(body, version):
    assert cni_version_for_reply(body) == version


def test_the_example_conflist_is_valid():
    conflist = json.loads((Path(__file__).resolve().parents[3] / "examples/cni/10-pyngress.conflist").read_text())
    for plugin in conflist["plugins"]:
        # What a runtime hands each plugin of a list: the list's version and name merged in.
        parse_network({"cniVersion": conflist["cniVersion"], "name": conflist["name"], **plugin})

"""The plugin's hand-written JSON and its version list (it imports nothing from the project, so these are kept
in step by test), for the Python plugin and for the static one (cni-plugin/main.c)."""
import json
import re
import subprocess
from pathlib import Path

import pytest

from proto.cni import SUPPORTED_VERSIONS
from services.cni_plugin import main as plugin
from tests.integration.cniserver.plugins import plugin_path

C_MAIN = Path(__file__).resolve().parents[3] / "cni-plugin" / "main.c"


@pytest.mark.parametrize("text", ["plain", 'q"uote', "back\\slash", "ctl\x00\x01\x1f", "é ü 日本", "\udcff"])
def test_quote_is_a_json_string_literal(text):
    assert json.loads(plugin.quote(text)) == text


def test_the_plugin_speaks_the_versions_proto_declares():
    assert plugin.SUPPORTED_VERSIONS == SUPPORTED_VERSIONS


def test_the_static_plugin_speaks_the_versions_proto_declares():
    done = subprocess.run([str(plugin_path("static"))], input=b"", env={"CNI_COMMAND": "VERSION"}, capture_output=True)
    assert done.returncode == 0
    assert json.loads(done.stdout) == {"cniVersion": SUPPORTED_VERSIONS[-1], "supportedVersions": list(SUPPORTED_VERSIONS)}


def test_the_static_plugin_has_the_python_plugins_constants():
    """The default socket and the timeout are not observable in a quick test: read them from the C source."""
    source = C_MAIN.read_text()
    default_socket = re.search(r'#define DEFAULT_SOCKET "([^"]*)"', source).group(1)
    timeout = re.search(r"#define TIMEOUT_SECONDS (\d+)", source).group(1)
    versions = re.search(r"SUPPORTED_VERSIONS\[\] = \{([^}]*)\}", source).group(1)
    codes = dict(re.findall(r"(IO_FAILURE|TRY_AGAIN_LATER|INTERNAL) = (\d+)", source))
    assert default_socket == plugin.DEFAULT_SOCKET
    assert float(timeout) == plugin.TIMEOUT_SECONDS
    assert tuple(re.findall(r'"([^"]*)"', versions)) == SUPPORTED_VERSIONS
    assert {name: int(code) for name, code in codes.items()} == \
        {"IO_FAILURE": plugin.IO_FAILURE, "TRY_AGAIN_LATER": plugin.TRY_AGAIN_LATER, "INTERNAL": plugin.INTERNAL}

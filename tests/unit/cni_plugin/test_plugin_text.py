"""The plugin's hand-written JSON and its version list (it imports nothing from the project, so these are kept
in step by test)."""
import json

import pytest

from proto.cni import SUPPORTED_VERSIONS
from services.cni_plugin import main as plugin


@pytest.mark.parametrize("text", ["plain", 'q"uote', "back\\slash", "ctl\x00\x01\x1f", "é ü 日本", "\udcff"])
def test_quote_is_a_json_string_literal(text):
    assert json.loads(plugin.quote(text)) == text


def test_the_plugin_speaks_the_versions_proto_declares():
    assert plugin.SUPPORTED_VERSIONS == SUPPORTED_VERSIONS

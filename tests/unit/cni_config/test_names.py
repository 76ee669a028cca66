"""One rule for interface names (CNI_IFNAME and the bridge), and one for container IDs and network names.

The cniserver and the cniworker each had an `is_valid_ifname` of their own: the server's refused control
characters, the worker's let them through, and neither refused what the kernel refuses in UTF-8 names.
"""
import pytest

from services.common.cni_config.names import is_valid_cni_name, is_valid_ifname


@pytest.mark.parametrize("name", ["eth0", "a" * 15, "net1.100", "é" * 7, "pyngress0", "a\x7fb", "br-pods_1"])
def test_linux_interface_names(name):
    assert is_valid_ifname(name)


@pytest.mark.parametrize("name, why", [
    ("", "empty"),
    ("a" * 16, "16 bytes: IFNAMSIZ is 16 with the NUL"),
    ("é" * 8, "16 bytes in UTF-8, though 8 characters"),
    (".", "the current directory in /sys/class/net"),
    ("..", "the parent directory"),
    ("a/b", "a path separator"),
    ("a:b", "the alias separator"),
    ("a b", "a space"),
    ("a\tb", "a tab"),
    ("a\nb", "a newline"),
    # The server refused these and the worker accepted them: control characters are refused.
    ("a\x00b", "NUL ends the name in C"),
    ("a\x01b", "a control character"),
    ("a\x1bb", "ESC, a terminal escape"),
    # Neither refused these; the kernel does: its isspace() sees the byte 0xA0 (Latin-1 no-break space)
    # inside the UTF-8 encoding ("à" is C3 A0), and netlink answers EINVAL.
    ("tà", "UTF-8 byte 0xA0"),
    ("Šx", "UTF-8 byte 0xA0 (C5 A0)"),
    # Unicode white space, which Python's isspace() sees and the kernel does not, stays refused.
    ("a\u2003b", "an em space"),
    ("a\u00a0b", "a no-break space (C2 A0)"),
    # A lone surrogate (JSON "\udcff") has no UTF-8 form: refused instead of failing with an exception.
    ("a\udcffb", "a lone surrogate"),
])
def test_names_the_kernel_or_the_stricter_rule_refuses(name, why):
    assert not is_valid_ifname(name), why


@pytest.mark.parametrize("name, valid", [
    ("abc", True), ("A1_b.c-d", True), ("9" * 300, True),
    ("_abc", False), ("-abc", False), (".abc", False), ("a/b", False), ("a b", False), ("é", False), ("", False),
    ("abc\n", False),
])
def test_container_ids_and_network_names(name, valid):
    assert is_valid_cni_name(name) == valid
